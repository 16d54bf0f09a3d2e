#include "studio/config/llamafactory_target.h"

#include <algorithm>

#include "studio/config/config_schema.h"

namespace studio {

const std::vector<std::string_view>& llamafactory_unknown_keys() {
  static const std::vector<std::string_view> keys = {
      // sharding and offload: LLaMA-Factory takes these from a DeepSpeed JSON (`deepspeed:`)
      "zero_stage", "offload_optimizer", "offload_param",
      // the engine's own
      "precompute_ref_logps", "skip_nonfinite_steps", "save_on_stop", "offload_activations",
      "tiled_mlp", "tiled_mlp_budget_mib",
      // LLaMA-Factory v1's (its v0 trainer has none)
      "batching_strategy",
      // 360-LLaMA-Factory's sequence parallelism (upstream has none in its v0 trainer)
      "sequence_parallel_size", "sequence_parallel_mode", "sequence_parallel_ulysses_degree",
      "sequence_parallel_ring_degree", "shuffle_for_sequence_parallel"};
  return keys;
}

const std::vector<std::string_view>& llamafactory_different_defaults() {
  static const std::vector<std::string_view> keys = {
      "do_train", "finetuning_type", "per_device_train_batch_size", "per_device_eval_batch_size",
      "logging_steps", "gradient_checkpointing"};
  return keys;
}

bool llamafactory_knows(std::string_view key) {
  const auto& unknown = llamafactory_unknown_keys();
  return std::find(unknown.begin(), unknown.end(), key) == unknown.end();
}

std::string llamafactory_refusal(const RunConfig& cfg) {
  if (cfg.is_v1())
    return "a LLaMA-Factory v1 config runs with USE_V1=1 llamafactory-cli sft (or dpo), not with "
           "LLaMA-Factory 0.9.5's trainer: run it with studio-train";
  std::string out;
  for (std::string_view key : llamafactory_unknown_keys()) {
    const FieldSpec* f = find_field(key);
    if (f == nullptr || f->is_default(cfg)) continue;
    YAML::Emitter e;
    e << YAML::Flow << f->to_node(cfg);
    std::string hint = "run it with studio-train, or leave the key at its default";
    if (key.rfind("sequence_parallel", 0) == 0 || key == "shuffle_for_sequence_parallel")
      hint = "sequence parallelism needs studio-train (or 360-LLaMA-Factory)";
    else if (key == "zero_stage" || key.rfind("offload_", 0) == 0)
      hint = "LLaMA-Factory shards through a DeepSpeed config file: set `deepspeed:` instead";
    out += (out.empty() ? "" : "\n") + std::string(key) + ": " + e.c_str() +
           " is not a LLaMA-Factory 0.9.5 key (" + hint + ")";
  }
  return out;
}

}  // namespace studio
