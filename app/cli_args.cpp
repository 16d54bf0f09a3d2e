#include "cli_args.h"

#include <cstdlib>

namespace studio::cli {

Args::Args(std::vector<std::string> argv, std::set<std::string> valued,
           std::set<std::string> flags) {
  for (size_t i = 0; i < argv.size() && error_.empty(); ++i) {
    const std::string& a = argv[i];
    if (a == "--") {
      positional_.insert(positional_.end(), argv.begin() + static_cast<long>(i) + 1, argv.end());
      break;
    }
    if (a.size() < 2 || a[0] != '-') {
      positional_.push_back(a);
      continue;
    }
    const auto eq = a.find('=');
    const std::string name = a.substr(0, eq);
    if (valued.count(name)) {
      if (eq != std::string::npos)
        values_[name].push_back(a.substr(eq + 1));
      else if (i + 1 < argv.size())
        values_[name].push_back(argv[++i]);
      else
        error_ = name + " needs a value";
    } else if (flags.count(name) && eq == std::string::npos) {
      flags_.insert(name);
    } else {
      error_ = "unknown option " + a;
    }
  }
}

std::optional<std::string> Args::value(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> Args::values(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>() : it->second;
}

int Args::positive_int(const std::string& name, int fallback) {
  auto v = value(name);
  if (!v) return fallback;
  char* end = nullptr;
  long n = std::strtol(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || n < 1 || n > 1000000) {
    if (error_.empty()) error_ = name + " needs a positive whole number, got '" + *v + "'";
    return fallback;
  }
  return static_cast<int>(n);
}

}  // namespace studio::cli
