#pragma once
// The dialects of run config the loader reads besides LLaMA-Factory's own keys: today
// LLaMA-Factory v1's training YAML (llamafactory_v1.h). The loader, the key table's documentation
// and validation look a dialect up here -- by the file's keys when loading, by the config's form
// afterwards -- and call it through this table, so none of them includes a dialect's header; a
// dialect may use all of them.
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "studio/config/diagnostic.h"
#include "studio/config/run_config.h"

namespace studio {

struct LoadResult;       // config_io.h
struct ValidateOptions;  // validate.h
namespace detail {
class Checker;           // checker.h (validate's checks)
}

struct ConfigDialect {
  const char* name;  // as messages and docs name it, e.g. "LLaMA-Factory v1"
  ConfigForm form;   // RunConfig::source.form of a config read in this dialect
  // Whether a YAML mapping is written in this dialect.
  bool (*detect)(const YAML::Node& root);
  // Reads the mapping into res.config (which starts from the dialect's defaults), every problem
  // located at the key as the file spells it.
  void (*read)(const YAML::Node& root, LoadResult& res);
  // `--set KEY=VALUE` in the dialect's own spelling; false when KEY is not one of its keys (the
  // key table's names then apply).
  bool (*apply_override)(RunConfig& cfg, const std::string& key, const YAML::Node& value,
                         const std::string& where, std::vector<Diagnostic>& diags);
  // The config written back in the dialect's form; `full`: every key.
  std::string (*write_yaml)(const RunConfig& cfg, bool full);
  // What the dialect leaves to the model, the command or the world, worked out in place.
  void (*resolve)(RunConfig& cfg, const ValidateOptions& opt);
  // The dialect's own checks of a resolved config (in place of the dataset checks).
  void (*check)(const RunConfig& cfg, detail::Checker& ck);
  // Its keys and what each becomes, a section of docs/config.md.
  std::string (*keys_markdown)();
};

// Every dialect, in the order files are tried.
const std::vector<const ConfigDialect*>& config_dialects();
// The dialect a YAML mapping is written in; null for LLaMA-Factory's own keys.
const ConfigDialect* dialect_of_file(const YAML::Node& root);
// The dialect a config was read in; null for LLaMA-Factory's own keys.
const ConfigDialect* dialect_of(const RunConfig& cfg);

// Defined with each dialect (llamafactory_v1.cpp).
const ConfigDialect& llamafactory_v1_dialect();

}  // namespace studio
