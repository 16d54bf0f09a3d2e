#include "unicode.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>

#include <stdexcept>

namespace studio::data::detail {

namespace {

struct Scan {
  std::size_t length;  // bytes of the character, or of the maximal ill-formed subpart
  bool valid;
};

// One step of UTF-8 validation following Unicode Table 3-7: the second byte's range depends on
// the lead byte (this is what rules out overlongs, surrogates and code points past U+10FFFF).
Scan scan_character(std::string_view text, std::size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  if (lead < 0x80) return {1, true};
  std::size_t trail = 0;
  unsigned char low = 0x80, high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    trail = 1;
  } else if (lead == 0xE0) {
    trail = 2, low = 0xA0;
  } else if (lead == 0xED) {
    trail = 2, high = 0x9F;
  } else if (lead >= 0xE1 && lead <= 0xEF) {
    trail = 2;
  } else if (lead == 0xF0) {
    trail = 3, low = 0x90;
  } else if (lead == 0xF4) {
    trail = 3, high = 0x8F;
  } else if (lead >= 0xF1 && lead <= 0xF3) {
    trail = 3;
  } else {
    return {1, false};
  }
  for (std::size_t i = 1; i <= trail; ++i) {
    if (pos + i >= text.size()) return {i, false};
    const auto byte = static_cast<unsigned char>(text[pos + i]);
    if (byte < low || byte > high) return {i, false};
    low = 0x80, high = 0xBF;
  }
  return {trail + 1, true};
}

const icu::Normalizer2& normalizer_for(NormalForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = nullptr;
  switch (form) {
    case NormalForm::NFC:
      normalizer = icu::Normalizer2::getNFCInstance(status);
      break;
    case NormalForm::NFD:
      normalizer = icu::Normalizer2::getNFDInstance(status);
      break;
    case NormalForm::NFKC:
      normalizer = icu::Normalizer2::getNFKCInstance(status);
      break;
    case NormalForm::NFKD:
      normalizer = icu::Normalizer2::getNFKDInstance(status);
      break;
  }
  if (U_FAILURE(status) || normalizer == nullptr) {
    throw std::runtime_error(std::string("ICU normalizer data is unavailable: ") +
                             u_errorName(status));
  }
  return *normalizer;
}

}  // namespace

char32_t next_code_point(std::string_view text, std::size_t& pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  const std::size_t length = utf8_length(lead);
  char32_t cp = length == 1   ? lead
                : length == 2 ? (lead & 0x1F)
                : length == 3 ? (lead & 0x0F)
                              : (lead & 0x07);
  for (std::size_t i = 1; i < length; ++i)
    cp = (cp << 6) | (static_cast<unsigned char>(text[pos + i]) & 0x3F);
  pos += length;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_valid_utf8(std::string_view text) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const Scan scan = scan_character(text, pos);
    if (!scan.valid) return false;
    pos += scan.length;
  }
  return true;
}

std::string to_valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  std::size_t pos = 0;
  while (pos < text.size()) {
    const Scan scan = scan_character(text, pos);
    if (scan.valid) {
      out.append(text.substr(pos, scan.length));
    } else {
      out += "\xEF\xBF\xBD";
    }
    pos += scan.length;
  }
  return out;
}

bool is_white_space(char32_t cp) {
  return u_isUWhiteSpace(static_cast<UChar32>(cp));
}

bool is_numeric(char32_t cp) {
  const auto type = u_charType(static_cast<UChar32>(cp));
  return type == U_DECIMAL_DIGIT_NUMBER || type == U_LETTER_NUMBER || type == U_OTHER_NUMBER;
}

bool is_word_character(char32_t cp) {
  const auto c = static_cast<UChar32>(cp);
  const auto type = u_charType(c);
  return u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || type == U_NON_SPACING_MARK ||
         type == U_ENCLOSING_MARK || type == U_COMBINING_SPACING_MARK ||
         type == U_DECIMAL_DIGIT_NUMBER || type == U_CONNECTOR_PUNCTUATION ||
         u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL);
}

void append_lowercase(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
    return;
  }
  // One character alone: ICU applies the unconditional full mappings (İ -> i + U+0307) and no
  // context rule, which is what Rust's char::to_lowercase does.
  UChar source[2];
  int32_t source_length = 0;
  U16_APPEND_UNSAFE(source, source_length, static_cast<UChar32>(cp));
  UChar lowered[8];
  UErrorCode status = U_ZERO_ERROR;
  const int32_t length = u_strToLower(lowered, 8, source, source_length, "", &status);
  if (U_FAILURE(status)) {
    append_utf8(out, cp);
    return;
  }
  for (int32_t i = 0; i < length;) {
    UChar32 c;
    U16_NEXT(lowered, i, length, c);
    append_utf8(out, static_cast<char32_t>(c));
  }
}

void normalize_unicode(std::string& text, NormalForm form) {
  const icu::Normalizer2& normalizer = normalizer_for(form);
  UErrorCode status = U_ZERO_ERROR;
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  if (normalizer.isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return;
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  icu::StringByteSink<std::string> sink(&out);
  status = U_ZERO_ERROR;
  normalizer.normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status)) {
    throw std::runtime_error(std::string("ICU normalization failed: ") + u_errorName(status));
  }
  text = std::move(out);
}

}  // namespace studio::data::detail
