#pragma once
// UTF-8 handling and the Unicode facts HF's Rust code takes from `char` and `str`: White_Space,
// alphanumeric, numeric and regex-\w tests, full lowercase mapping and the normalization forms,
// all answered by ICU so that they follow one Unicode version.
#include <cstddef>
#include <string>
#include <string_view>

namespace studio::data::detail {

// Byte length of the UTF-8 character starting with `lead` (1 for a stray continuation byte).
inline std::size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xF0) return 4;
  if (lead >= 0xE0) return 3;
  if (lead >= 0xC0) return 2;
  return 1;
}

// Decodes the character at `pos` of valid UTF-8 and advances `pos` past it.
char32_t next_code_point(std::string_view text, std::size_t& pos);
void append_utf8(std::string& out, char32_t cp);

// Whether `text` is well-formed UTF-8 (Unicode Table 3-7: no overlongs, surrogates or > U+10FFFF).
bool is_valid_utf8(std::string_view text);
// `text` with every maximal ill-formed subsequence replaced by U+FFFD: the rule of Rust's
// String::from_utf8_lossy, Python's errors="replace" and the WHATWG decoder.
std::string to_valid_utf8(std::string_view text);

bool is_white_space(char32_t cp);     // Rust char::is_whitespace
bool is_numeric(char32_t cp);         // Rust char::is_numeric: Nd, Nl, No
bool is_word_character(char32_t cp);  // the regex crate's \w: Alphabetic, M, Nd, Pc, Join_Control
void append_lowercase(std::string& out, char32_t cp);  // Rust char::to_lowercase, no context

enum class NormalForm { NFC, NFD, NFKC, NFKD };
// Normalizes `text` in place; returns quickly when it already is in that form.
void normalize_unicode(std::string& text, NormalForm form);

}  // namespace studio::data::detail
