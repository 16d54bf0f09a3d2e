#include "studio/launch/line_prefixer.h"

namespace studio::launch {

LinePrefixer::LinePrefixer(std::string prefix, std::size_t max_line)
    : prefix_(std::move(prefix)), max_line_(max_line == 0 ? 1 : max_line) {}

void LinePrefixer::append_line(std::string_view line, std::string& out) {
  if (line.find_first_not_of(" \t\r") != std::string_view::npos) last_line_.assign(line);
  out += prefix_;
  out += line;
  out += '\n';
}

void LinePrefixer::feed(std::string_view bytes, std::string& out) {
  while (!bytes.empty()) {
    const std::size_t nl = bytes.find('\n');
    const std::string_view piece = bytes.substr(0, nl);
    if (nl != std::string_view::npos && partial_.size() + piece.size() <= max_line_) {
      partial_ += piece;
      append_line(partial_, out);
      partial_.clear();
      bytes.remove_prefix(nl + 1);
      continue;
    }
    // No newline yet, or the line outgrew max_line: keep what fits, pass on a full piece.
    const std::size_t room = max_line_ - partial_.size();
    const std::size_t take = std::min(room, piece.size());
    partial_.append(piece.substr(0, take));
    bytes.remove_prefix(take);
    if (partial_.size() == max_line_) {
      append_line(partial_, out);
      partial_.clear();
    }
  }
}

void LinePrefixer::finish(std::string& out) {
  if (partial_.empty()) return;
  append_line(partial_, out);
  partial_.clear();
}

}  // namespace studio::launch
