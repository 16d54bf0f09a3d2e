#pragma once
// LoRA adapters on the decoder's linear layers, as PEFT's LoraModel puts them (layers.h has the
// forward): each adapted Linear gets lora_A [r, in] and lora_B [out, r] (and with DoRA a magnitude
// [out]), its output gains scaling * B(A(dropout(x))). The adapters are parameters of the model
// (named as in PEFT's files, without the "base_model.model." prefix) but not part of hf_state():
// CausalLM::adapter_state() lists them. docs/ADAPTERS.md.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "studio/trainer/model/decoder.h"

namespace studio::trainer {

struct LoraSettings {
  int64_t rank = 8;
  double alpha = 16;
  double dropout = 0;
  bool rslora = false;  // scaling alpha / sqrt(r) instead of alpha / r
  bool dora = false;
  std::vector<std::string> targets;  // PEFT's target_modules: leaf names or full module paths
  double scaling() const;
};

// Whether a module (its full name) is one of PEFT's target_modules: its name equals an entry or
// ends with "." + the entry (so both leaf names and full paths work).
bool lora_targets_match(const std::string& module, const std::vector<std::string>& targets);

// Adds an adapter to every Linear of the decoder layers that s.targets names, its
// parameters created like the model's (layers.h's new_parameter: no bytes under
// DeferredAllocation), values unset. Returns how many were adapted; throws std::invalid_argument
// when a target matches no module or the model already has adapters.
int64_t attach_lora(CausalLMImpl& model, const LoraSettings& s);

// PEFT's initial value of adapter parameter `name` (an adapter_state() name) of `shape`, in fp32
// on the CPU: lora_A kaiming-uniform with a = sqrt(5), i.e. U(-1/sqrt(in), 1/sqrt(in)); lora_B
// zero; DoRA's magnitude the row norms of the base weight (`base(weight name)`), which B = 0
// leaves as they are. Drawn from a generator seeded by `seed` and the name, so that every rank,
// every ZeRO stage and every world size start from the same adapters.
torch::Tensor initial_adapter_value(const std::string& name, at::IntArrayRef shape, uint64_t seed,
                                    const std::function<torch::Tensor(const std::string&)>& base);

// "model.layers.0.self_attn.q_proj.lora_A.weight" -> "model.layers.0.self_attn.q_proj.weight":
// the base weight an adapter parameter belongs to.
std::string adapted_weight_name(const std::string& adapter_name);

// The merged weight W + scaling * B A (DoRA: m / |W + s BA|_row * (W + s BA)), in fp32, as
// PEFT's merge_and_unload computes it. `w` [out, in], `a` [r, in], `b` [out, r], `magnitude`
// [out] (undefined: plain LoRA).
torch::Tensor merged_weight(const torch::Tensor& w, const torch::Tensor& a, const torch::Tensor& b,
                            const torch::Tensor& magnitude, double scaling);

}  // namespace studio::trainer
