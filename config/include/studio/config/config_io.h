#pragma once
// Loading a run config from YAML (with every key's line and column kept for messages) and saving
// it back. Unknown keys survive load -> save verbatim.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "studio/config/diagnostic.h"
#include "studio/config/run_config.h"

namespace studio {

struct LoadResult {
  RunConfig config;
  std::vector<Diagnostic> diagnostics;  // parse problems: malformed YAML, types, unknown keys
  bool ok() const { return !has_errors(diagnostics); }
};

// `display_name` is the file name used in messages.
LoadResult load_config_string(std::string_view yaml, const std::string& display_name = "<config>");
LoadResult load_config_file(const std::string& path);

// Applies `key=value` overrides (studio-train train --set) as if the lines were in the file:
// the value is read as YAML, typed by the key table, and recorded as given on the command line.
// Problems are returned as diagnostics located at "--set".
std::vector<Diagnostic> apply_overrides(RunConfig& cfg, const std::vector<std::string>& sets);

// A config loaded from a LLaMA-Factory v1 file is written in v1's form by Minimal and Full
// (llamafactory_v1.h).
enum class YamlStyle {
  // The keys that were in the source or differ from their defaults, in the source's order, plus
  // the unknown keys where they stood: what "Export YAML" writes, and what users know.
  Minimal,
  // Every key with its default filled in, grouped under comment headers (print-config).
  Full,
  // Minimal, less the keys LLaMA-Factory does not know (llamafactory_target.h): what
  // `llamafactory-cli train` is given. Check llamafactory_refusal() first: a key left out here
  // is one at its default.
  LlamaFactory,
};

std::string to_yaml(const RunConfig& cfg, YamlStyle style = YamlStyle::Minimal);
// Every key with its value as JSON (the `config` of the start event); unknown keys included,
// and a v1 config's train_dataset, eval_dataset and global_batch_size.
nlohmann::json config_to_json(const RunConfig& cfg);
// Writes atomically (temp file + rename). Returns an empty string or the error message.
std::string save_config_file(const RunConfig& cfg, const std::string& path,
                             YamlStyle style = YamlStyle::Minimal);

}  // namespace studio
