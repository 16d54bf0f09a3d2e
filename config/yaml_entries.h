#pragma once
// Private to studio_config: a config written as `key: value` lines, the way both the key table's
// writer (config_io.cpp) and LLaMA-Factory v1's (llamafactory_v1.cpp) order them.
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace studio::detail {

struct YamlEntry {
  long order;  // the key's line in the source; keys set in memory after, in the order added
  std::string key;
  YAML::Node value;
};

// The entries by `order` (equal orders as given), block collections indented under their key.
std::string write_yaml_entries(const std::vector<YamlEntry>& entries);

}  // namespace studio::detail
