#pragma once
// PEFT's adapter folders, read and written the way the `peft` package does (docs/ADAPTERS.md):
// adapter_config.json (a LoraConfig) and adapter_model.safetensors, whose tensors are named
// "base_model.model." + the engine's name (model.layers.0.self_attn.q_proj.lora_A.weight, ...;
// DoRA's ...q_proj.lora_magnitude_vector; a modules_to_save module's weight under its own name,
// e.g. base_model.model.lm_head.weight).
#include <map>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "studio/trainer/model/lora.h"
#include "studio/trainer/tensors/safetensors.h"

namespace studio::trainer {

inline constexpr const char* kAdapterConfigFile = "adapter_config.json";
inline constexpr const char* kAdapterWeightsFile = "adapter_model.safetensors";

struct PeftAdapter {
  LoraSettings lora;
  std::vector<std::string> modules_to_save;  // leaf names (embed_tokens, lm_head, norm)
  std::string base_model;                     // base_model_name_or_path, as written
};

// Reads DIR/adapter_config.json. What studio-train cannot apply is an error naming the file and
// the key (a peft_type other than LORA, bias other than none, fan_in_fan_out, rank_pattern /
// alpha_pattern / layers_to_transform / a regex target_modules, ...): std::runtime_error.
PeftAdapter read_peft_adapter_config(const std::string& dir);

// adapter_config.json's text for `a`, with the fields peft 0.21 writes.
std::string peft_adapter_config_json(const PeftAdapter& a);

// "model.layers.0....lora_A.weight" <-> "base_model.model.model.layers.0....lora_A.weight".
std::string peft_tensor_name(const std::string& engine_name);

// The tensors of DIR/adapter_model.safetensors by engine name (the prefix removed), mapped from
// the file. Every name of `expected` must be there with its shape, nothing else may be: a missing,
// unexpected or misshapen tensor is a std::runtime_error naming the file and the tensor.
std::map<std::string, torch::Tensor> read_peft_adapter_tensors(
    const std::string& dir, const std::map<std::string, std::vector<int64_t>>& expected);

// PEFT's "all-linear" (and LLaMA-Factory's "all") as the leaf names of `model`'s decoder linear
// layers; other entries stay as they are.
std::vector<std::string> expand_lora_targets(const std::vector<std::string>& targets,
                                             const ModelInfo& model);

// The names and shapes of the tensors an adapter folder of `a` holds for `model`: its adapter
// parameters and its modules_to_save weights (every base parameter whose module path ends with
// one of those names, as PEFT matches them), by engine name. Throws std::runtime_error for a
// modules_to_save name that matches nothing.
std::map<std::string, std::vector<int64_t>> adapter_file_shapes(CausalLMImpl& model,
                                                                 const PeftAdapter& a);

// Puts the adapter of folder DIR on `model` (which has none): its config read
// (read_peft_adapter_config, targets expanded), the adapters attached and filled from its
// adapter_model.safetensors, its modules_to_save weights copied over the model's. Returns the
// config. PEFT's PeftModel.from_pretrained, for evaluation, export and the tests.
PeftAdapter load_peft_adapter(CausalLMImpl& model, const std::string& dir);

// Writes an adapter folder: adapter_model.safetensors (`tensors` by engine name, in fp32) and
// adapter_config.json, each file atomically, then the tokenizer files of `source_dir` (when
// given and present) as LLaMA-Factory's saved adapters carry them.
void save_peft_adapter(const std::string& dir, const NamedTensors& tensors, const PeftAdapter& a,
                       const std::string& source_dir);

}  // namespace studio::trainer
