#include "byte_level.h"

#include <array>
#include <cstdint>

#include "unicode.h"

namespace studio::data::detail {

namespace {

constexpr bool printable(int byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE);
}

struct Encoded {
  char utf8[2];  // every character of the alphabet is below U+0800
  uint8_t length;
};

struct Tables {
  std::array<Encoded, 256> encoded{};  // byte -> UTF-8 of its character
  std::array<int, 0x144> decoded{};    // code point -> byte, -1 outside the alphabet

  Tables() {
    decoded.fill(-1);
    char32_t next_unprintable = 0x100;
    for (int byte = 0; byte < 256; ++byte) {
      const char32_t cp = printable(byte) ? static_cast<char32_t>(byte) : next_unprintable++;
      std::string utf8;
      append_utf8(utf8, cp);
      encoded[byte] = {{utf8[0], utf8.size() > 1 ? utf8[1] : '\0'},
                       static_cast<uint8_t>(utf8.size())};
      decoded[cp] = byte;
    }
  }
};

const Tables& tables() {
  static const Tables instance;
  return instance;
}

}  // namespace

void byte_level_encode(std::string_view text, std::string& out) {
  const Tables& t = tables();
  const std::size_t start = out.size();
  out.resize(start + text.size() * 2);
  char* cursor = out.data() + start;
  for (const char c : text) {
    const Encoded& e = t.encoded[static_cast<unsigned char>(c)];
    cursor[0] = e.utf8[0];
    cursor[1] = e.utf8[1];
    cursor += e.length;
  }
  out.resize(static_cast<std::size_t>(cursor - out.data()));
}

bool byte_level_decode(std::string_view token, std::string& out) {
  const Tables& t = tables();
  const std::size_t mark = out.size();
  for (std::size_t pos = 0; pos < token.size();) {
    const char32_t cp = next_code_point(token, pos);
    if (cp >= t.decoded.size() || t.decoded[cp] < 0) {
      out.resize(mark);
      return false;
    }
    out += static_cast<char>(t.decoded[cp]);
  }
  return true;
}

}  // namespace studio::data::detail
