#pragma once
// GPT-2's byte-level alphabet: every byte is written as one printable character (printable
// Latin-1 bytes as themselves, the others as U+0100 onwards), so a BPE over those characters
// covers any input without an unknown token.
#include <string>
#include <string_view>

namespace studio::data::detail {

// Appends the byte-level characters of the bytes of `text`.
void byte_level_encode(std::string_view text, std::string& out);

// Appends the bytes a byte-level token stands for; false (and nothing appended) when `token`
// holds a character outside the alphabet, e.g. an added token's text.
bool byte_level_decode(std::string_view token, std::string& out);

}  // namespace studio::data::detail
