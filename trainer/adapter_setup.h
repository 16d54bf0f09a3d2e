#pragma once
// Private to studio_trainer: how a run's policy gets its weights under finetuning_type lora
// (docs/ADAPTERS.md). LLaMA-Factory's rules: of adapter_name_or_path, every folder but the last is
// merged into the base; the last is trained further with its own settings (its
// adapter_config.json, not the run's lora_* keys), unless create_new_adapter, which merges it too
// and trains a new adapter from the run's keys. A resumed run takes the adapter (and the
// additional_target weights) from its checkpoint, the base from model_name_or_path.
#include <cstdint>
#include <string>
#include <vector>

#include "studio/config/run_config.h"
#include "studio/trainer/model/decoder.h"
#include "studio/trainer/model_folder.h"
#include "studio/trainer/peft_adapter.h"

namespace studio::trainer {

struct AdapterPlan {
  PeftAdapter adapter;               // the adapter trained and written
  std::vector<std::string> merged;   // adapter folders merged into the base, in order
  std::string continued;             // the adapter folder trained further ("" : a new adapter)
  std::vector<std::string> notes;    // what the run's log says about it
};

// The plan of `cfg` (finetuning_type lora) for a model of `info`. Reads the adapters'
// adapter_config.json; throws std::runtime_error naming a folder it cannot use.
AdapterPlan plan_adapters(const RunConfig& cfg, const ModelInfo& info);

// `base` (a model folder's weights) with the plan's merged adapters applied, as PEFT's
// merge_and_unload would leave them: each adapted weight W + s BA (DoRA's scaled form), each
// modules_to_save weight the adapter's.
WeightGetter merged_base(const AdapterPlan& plan, CausalLMImpl& model, WeightGetter base);

// Every weight of the adapted `model`: the base's from `base`, the adapter's (and the
// additional_target weights') from the adapter folder `adapter_dir` when given (a resumed
// checkpoint, or the continued adapter), else PEFT's initialisation drawn from `seed`.
WeightGetter with_adapter(const AdapterPlan& plan, CausalLMImpl& model, WeightGetter base,
                          const std::string& adapter_dir, uint64_t seed);

}  // namespace studio::trainer
