#pragma once
// A small command-line reader shared by the two executables: `--name value`, `--name=value`,
// flags, and positional arguments, with errors that name the option.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace studio::cli {

class Args {
 public:
  // `valued` lists the options that take a value; `flags` those that do not.
  Args(std::vector<std::string> argv, std::set<std::string> valued, std::set<std::string> flags);

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  bool flag(const std::string& name) const { return flags_.count(name) != 0; }
  // The option's value (the last one when it was given several times).
  std::optional<std::string> value(const std::string& name) const;
  // Every value of an option that may repeat (--set a=1 --set b=2), in order.
  std::vector<std::string> values(const std::string& name) const;
  // A positive integer option; sets error() when present but not a positive integer.
  int positive_int(const std::string& name, int fallback);
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::vector<std::string>> values_;
  std::set<std::string> flags_;
  std::vector<std::string> positional_;
  std::string error_;
};

}  // namespace studio::cli
