#pragma once
// Validation of a run config: every problem in one pass, each located at its key's line.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "studio/config/deepspeed.h"
#include "studio/config/diagnostic.h"
#include "studio/model_facts/model_info.h"
#include "studio/config/run_config.h"

namespace studio {

struct ValidateOptions {
  int nproc_per_node = 0;     // 0: the world size is unknown and not checked
  int nnodes = 1;
  bool for_training = false;  // missing local paths are errors (they are warnings in `validate`,
                              // since the files may exist only on the cluster)
  std::string base_dir;       // relative paths resolve against it; empty: the working directory
  int world_size() const { return nproc_per_node > 0 ? nproc_per_node * nnodes : 0; }
};

std::vector<Diagnostic> validate_config(const RunConfig& cfg, const ValidateOptions& opt,
                                        std::optional<ModelInfo>* model_out = nullptr);

struct CheckResult {
  RunConfig config;  // as loaded; a LLaMA-Factory v1 file's resolved (resolve_llamafactory_v1)
  std::vector<Diagnostic> diagnostics;  // parse and validation problems, sorted by line
  std::optional<ModelInfo> model;       // when the model's config.json was readable
  bool ok() const { return !has_errors(diagnostics); }
};

// Load + validate in one pass: what `studio-train validate` and the wizard run. `overrides` are
// `key=value` settings applied after loading, as `--set` gives them (see apply_overrides).
CheckResult check_config_file(const std::string& path, const ValidateOptions& opt,
                              const std::vector<std::string>& overrides = {});

// The config as the engine runs it: eval_steps defaulted.
RunConfig normalized(const RunConfig& cfg);
// Hub ids in model_name_or_path and ref_model (that are not also local folders, relative to the
// working directory) replaced by their snapshot folders in the local Hugging Face cache
// (hub_cache.h), as the engine loads them; left as they are when not found (validation says why).
void resolve_hub_models(RunConfig& cfg);

// Sizes that divide `world_size` (the valid sequence_parallel_size choices).
std::vector<int> divisors(int world_size);

// Whether Ulysses of `degree` ranks can scatter a model's attention heads: the query heads must
// divide over the ranks, and the key/value heads must either divide over them or be replicated
// to them (degree a multiple of the kv heads, keeping grouped-query attention's mapping).
enum class UlyssesHeads { Ok, QueryHeadsIndivisible, KvHeadsUnsplittable };
UlyssesHeads ulysses_heads(const ModelInfo& model, int64_t degree);
// The largest Ulysses degree dividing `sp` that the heads allow (1, a pure ring, always does):
// the usp split the estimate and the wizard choose.
int64_t largest_ulysses_degree(const ModelInfo& model, int64_t sp);

}  // namespace studio
