#pragma once
// Tags every line of a byte stream (a worker's stdout or stderr) with a prefix such as
// "[rank 3] ", so the lines of several ranks stay readable when they share one terminal.
#include <cstddef>
#include <string>
#include <string_view>

namespace studio::launch {

class LinePrefixer {
 public:
  // A line longer than max_line bytes is passed on in pieces of max_line bytes, each prefixed,
  // so a rank printing without newlines cannot make the launcher buffer without bound.
  explicit LinePrefixer(std::string prefix, std::size_t max_line = std::size_t{64} << 10);

  // Appends to `out` the lines completed by `bytes`, each prefixed and ending in '\n'.
  void feed(std::string_view bytes, std::string& out);
  // Appends the partial last line, prefixed and ended with '\n', if there is one.
  void finish(std::string& out);

  std::size_t pending_bytes() const { return partial_.size(); }
  // The last non-blank line passed on, without the prefix: a failed worker's last words.
  const std::string& last_line() const { return last_line_; }

 private:
  void append_line(std::string_view line, std::string& out);

  std::string prefix_;
  std::size_t max_line_;
  std::string partial_;
  std::string last_line_;
};

}  // namespace studio::launch
