#pragma once
// Small text helpers shared by the remote layer's sources (private to studio_remote): remote
// path joining, program names, the tail of command output for messages, hex digests.
#include <string>

namespace studio::remote::detail {

// DIR/NAME for remote (POSIX) paths; DIR empty gives NAME.
inline std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

// The last component of a path: the program name of an engine path.
inline std::string basename_of(const std::string& path) {
  return path.substr(path.find_last_of('/') + 1);
}

// The last `count` lines of some output, trailing blank space dropped; for messages.
inline std::string last_lines(const std::string& text, int count = 1) {
  const std::size_t end = text.find_last_not_of("\r\n \t");
  if (end == std::string::npos) return {};
  std::size_t begin = end;
  for (int i = 0; i < count && begin != std::string::npos; ++i) {
    begin = begin == 0 ? std::string::npos : text.rfind('\n', begin - 1);
  }
  const std::size_t from = begin == std::string::npos ? 0 : begin + 1;
  return text.substr(from, end + 1 - from);
}

// Lower-case hex of a digest.
inline std::string hex_digest(const unsigned char* bytes, unsigned int length) {
  static const char digits[] = "0123456789abcdef";
  std::string text;
  for (unsigned int i = 0; i < length; ++i) {
    text += digits[bytes[i] >> 4];
    text += digits[bytes[i] & 0xf];
  }
  return text;
}

}  // namespace studio::remote::detail
