#include "studio/config/json_file.h"

#include <algorithm>

#include "studio/config/atomic_file.h"

namespace studio {

bool read_json_file(const std::string& path, nlohmann::json& out, std::string& error) {
  std::string text;
  if (!read_file(path, text, error)) return false;
  try {
    out = nlohmann::json::parse(text);
    return true;
  } catch (const nlohmann::json::parse_error& e) {
    const size_t offset = std::min<size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(offset), '\n');
    error = path + ":" + std::to_string(line) + ": malformed JSON: " + e.what();
    return false;
  } catch (const nlohmann::json::exception& e) {  // e.g. a number too large for a double
    error = path + ": malformed JSON: " + json_error_text(e.what());
    return false;
  }
}

std::string json_error_text(const char* what) {
  std::string s = what;
  if (!s.empty() && s[0] == '[') {
    const auto close = s.find("] ");
    if (close != std::string::npos) s.erase(0, close + 2);
  }
  return s;
}

}  // namespace studio
