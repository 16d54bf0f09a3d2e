#include "env_vars.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <stdexcept>

namespace studio::launch::detail {

std::optional<std::string> env_string(const Getenv& getenv, const char* name) {
  const char* value = getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

void fail(const std::string& message) {
  throw std::invalid_argument(message);
}

bool in_slurm_step(const Getenv& getenv) {
  return env_string(getenv, "SLURM_STEP_ID") || env_string(getenv, "SLURM_STEPID");
}

std::optional<long long> parse_integer(const std::string& text) {
  // strtoll alone would also take leading blanks.
  if (text.empty() ||
      !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-' || text[0] == '+'))
    return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0') return std::nullopt;
  return v;
}

std::optional<int> env_int(const Getenv& getenv, const char* name, int lo, int hi,
                           const std::string& hint) {
  const auto text = env_string(getenv, name);
  if (!text) return std::nullopt;
  const auto v = parse_integer(*text);
  if (!v || *v < lo || *v > hi) {
    std::string msg = std::string(name) + "=" + *text + " is not " +
                      (v ? "in range" : "an integer") + ": expected " + std::to_string(lo) + ".." +
                      std::to_string(hi);
    if (!hint.empty()) msg += "; " + hint;
    throw std::invalid_argument(msg);
  }
  return static_cast<int>(*v);
}

std::optional<std::vector<int>> parse_tasks_per_node(const std::string& text) {
  std::vector<int> out;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = text.find(',', pos);
    const std::string item =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    // "N" or "N(xM)": N tasks on each of M nodes.
    const std::size_t paren = item.find('(');
    const auto count = parse_integer(item.substr(0, paren));
    long long repeat = 1;
    if (paren != std::string::npos) {
      if (item.size() < paren + 4 || item.compare(paren, 2, "(x") != 0 || item.back() != ')')
        return std::nullopt;
      const auto r = parse_integer(item.substr(paren + 2, item.size() - paren - 3));
      if (!r) return std::nullopt;
      repeat = *r;
    }
    if (!count || *count < 1 || *count > 1 << 20 || repeat < 1 || repeat > 1 << 20)
      return std::nullopt;
    out.insert(out.end(), static_cast<std::size_t>(repeat), static_cast<int>(*count));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace studio::launch::detail
