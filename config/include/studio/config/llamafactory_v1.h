#pragma once
// LLaMA-Factory v1 training YAML (`USE_V1=1 llamafactory-cli sft|dpo CONFIG.yaml`): telling it from
// the v0 form, reading its keys onto the run config, what is refused and why, the dataset YAML it
// names, what depends on the model and the world (stage, chat template, gradient accumulation),
// and writing the config back in v1's own form. docs/LLAMAFACTORY.md explains every choice.
#include <cstdint>
#include <limits>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "studio/config/config_io.h"
#include "studio/config/diagnostic.h"
#include "studio/config/run_config.h"
#include "studio/config/validate.h"

namespace studio {

// v1's `save_steps: null` (its default): no checkpoint before the final model.
inline constexpr int64_t kSaveAtEndOnly = std::numeric_limits<int64_t>::max();

// A mapping holding one of v1's own keys (model, train_dataset, micro_batch_size,
// global_batch_size, cp_size, dist_config or any other *_config block) and no model_name_or_path.
bool is_llamafactory_v1(const YAML::Node& root);

// Reads a v1 mapping into `res.config`, which starts from v1's defaults; every problem is located
// at the key as the file spells it. config_io's loader calls it for a v1 file.
void read_llamafactory_v1(const YAML::Node& root, LoadResult& res);

// `--set KEY=VALUE` on a v1 config (config_io's apply_overrides): KEY in v1's own spelling
// (cp_size, micro_batch_size, global_batch_size, dist_config, train_dataset, ...), read as the
// file's keys are; problems go to `diags` located at `where`. False when KEY is none of v1's
// settable keys (the key table's own names then apply).
bool apply_llamafactory_v1_override(RunConfig& cfg, const std::string& key, const YAML::Node& value,
                                    const std::string& where, std::vector<Diagnostic>& diags);

// The config in v1's form (config_io's to_yaml for a v1 config): the file's keys in its order,
// a key whose value is unchanged as the file wrote it, an edited one in v1's spelling, unknown
// keys kept; other keys where they differ from v1's defaults. `full`: every v1 key.
std::string llamafactory_v1_yaml(const RunConfig& cfg, bool full);

// The v1 keys and what each becomes in studio-train, a section of docs/config.md.
std::string llamafactory_v1_keys_markdown();

// --- dataset files ----------------------------------------------------------------------------

// One entry of a v1 dataset YAML: `name: {path, source, split, converter, size, weight,
// streaming}`.
struct V1DatasetEntry {
  std::string name;
  std::string path;               // as written: relative paths are the working directory's
  std::string source = "hf_hub";  // hf_hub | ms_hub | local (v1's default: hf_hub)
  std::string split = "train";
  std::string converter;                 // alpaca | sharegpt | pair; "": v1's own messages format
  std::optional<int64_t> size;           // samples taken from the dataset
  std::map<std::string, SourcePos> pos;  // where each field's value stands ("" = the entry's name)
};

struct V1DatasetList {
  std::string yaml;                     // the dataset YAML; "" when the value named a data path
  std::vector<V1DatasetEntry> entries;  // in the file's order
  // Problems of the value itself, for the config key that named it (an empty message: none).
  std::string error;
  std::vector<Diagnostic> problems;  // in the dataset YAML, at the entry's own lines
};

// What train_dataset or eval_dataset names, as v1's data engine reads it: a local *.yaml dataset
// file; a hub "repo/file.yaml" (not downloaded: an error); a local data file or folder (one entry
// "default" in v1's messages format); else a hub dataset id (an error). Relative paths resolve
// against `base_dir` (empty: the working directory). `for_training`: a missing data file is an
// error, else a warning (it may exist only on the cluster).
V1DatasetList read_v1_datasets(const std::string& value, const std::string& base_dir,
                               bool for_training);

// A v1 config's datasets made to run from another working directory (the studio's run folder,
// a remote host): train_dataset and eval_dataset naming a local data file or folder become
// place(its absolute path); naming a local dataset YAML, the YAML is rewritten with the `path`
// of each local entry replaced by place(its absolute path), the rest kept, and the config then
// names write_yaml(a file name for it, the new text). Relative paths resolve against
// `base_dir`; hub ids and files that are not here are left as written (validation names them).
// Throws std::invalid_argument naming the file for a dataset YAML that cannot be read.
void relocate_v1_datasets(
    RunConfig& cfg, const std::string& base_dir,
    const std::function<std::string(const std::string& absolute_path)>& place,
    const std::function<std::string(const std::string& file_name, const std::string& text)>&
        write_yaml);

// --- what depends on the files and the world --------------------------------------------------

// The chat template studio-train renders for a model that a v1 file names without `template:`:
// v1 renders with the tokenizer's own chat template (ChatML when it has none), so only a named
// template known to render the same text and mask the same tokens is chosen.
struct TemplateChoice {
  std::string name;  // "" when none is
  std::string why;   // what the choice rests on, or why there is none
};
TemplateChoice template_for_model(const std::string& model_dir);

// The stage, the chat template, gradient_accumulation_steps (from global_batch_size) and, with a
// DeepSpeed JSON, the precision it asks for: a v1 file leaves them to its command, the model and
// the world size. Done on a copy in validate_config (whose checks say what was chosen and why);
// done on the config itself before a run (train, preview, estimate).
void resolve_llamafactory_v1(RunConfig& cfg, const ValidateOptions& opt);

}  // namespace studio
