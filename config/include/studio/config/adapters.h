#pragma once
// Which weights finetuning_type lora and freeze train (docs/ADAPTERS.md), as LLaMA-Factory picks
// them: one place that the validator, the memory estimate and the engine all ask, so that what
// the config check accepts, what the estimate counts and what the engine trains agree.
// Plain C++ (no Torch).
#include <cstdint>
#include <string>
#include <vector>

#include "studio/config/run_config.h"
#include "studio/model_facts/model_info.h"

namespace studio {

// A linear layer of a decoder layer: its Hugging Face leaf name and shape (in, out features).
struct DecoderLinear {
  std::string name;  // q_proj, k_proj, v_proj, o_proj, qkv_proj, gate_proj, up_proj, down_proj,
                     // gate_up_proj
  int64_t in = 0, out = 0;
};

// The linear layers of a dense decoder layer of `model`, in module order (every layer has the
// same ones).
std::vector<DecoderLinear> decoder_linears(const ModelInfo& model);

// The leaf names lora_target picks on `model` ("all": every linear layer of the decoder layers,
// as LLaMA-Factory's find_all_linear_modules, which leaves the LM head out). A name no module of
// the model has sets `error` (naming it and the model's names) and returns nothing.
std::vector<std::string> lora_target_modules(const RunConfig& cfg, const ModelInfo& model,
                                             std::string& error);

// The Hugging Face parameters additional_target trains whole (PEFT's modules_to_save): those of
// every module whose path ends with one of its names (so `norm` takes the final norm and every
// layer's norms, as PEFT does). A name that matches nothing, has LoRA adapters, or names a tied
// LM head sets `error`.
std::vector<std::string> additional_target_parameters(const RunConfig& cfg, const ModelInfo& model,
                                                      std::string& error);

// The parameters the LoRA adapters add over all layers: r x (in + out) per adapted linear layer,
// plus out (the magnitude) with use_dora.
int64_t lora_parameter_count(const RunConfig& cfg, const ModelInfo& model);

// finetuning_type freeze: the decoder layers whose modules are trained, ascending (LLaMA-Factory:
// freeze_trainable_layers n > 0 the last n, n < 0 the first -n, at most every layer).
std::vector<int64_t> freeze_trained_layers(const RunConfig& cfg, const ModelInfo& model);

// Whether the Hugging Face parameter `name` of the base model is trained: every one under full;
// under lora only the additional_target ones; under freeze those of the picked modules of the
// picked layers and of freeze_extra_modules. (The adapters' own parameters are always trained.)
bool base_parameter_trained(const RunConfig& cfg, const ModelInfo& model, const std::string& name);

// The parameters trained (adapters included) and in all (base + adapters): what the run's start
// line and the memory estimate count.
struct TrainedCount {
  int64_t trained = 0;
  int64_t total = 0;
};
TrainedCount trained_parameter_count(const RunConfig& cfg, const ModelInfo& model);

// QLoRA: the bytes the 4-bit form of a weight of n values holds: the packed values, the fp32
// absmax per block, or with double quantization one byte per block, an fp32 scale per 256 blocks
// and the 256-value fp32 code (kernels/quant4.h).
int64_t quant4_weight_bytes(int64_t n, int64_t blocksize, bool double_quant);

// QLoRA (quantization_bit 4): the base parameters held in 4 bits (every linear weight of the
// decoder layers) and the bytes they take; zeros without quantization.
struct QuantizedBase {
  int64_t params = 0;
  int64_t bytes = 0;
};
// A model bitsandbytes saved in 4 bits (ModelInfo::bnb_4bit_on_disk) counts the same way, its
// own format and llm_int8_skip_modules deciding (quantization_bit is then ignored).
QuantizedBase quantized_base(const RunConfig& cfg, const ModelInfo& model);
// transformers' should_convert_module, negated: whether one of llm_int8_skip_modules' patterns
// leaves the module `full_name` unquantized (a suffix, or a regex matching up to a module
// boundary from the start).
bool bnb_skips_module(const std::string& full_name, const std::vector<std::string>& patterns);

// The most parameters any one decoder layer trains (its adapters, or its trained modules): what
// the largest gradient reduction of a layer holds.
int64_t largest_trained_layer(const RunConfig& cfg, const ModelInfo& model);

}  // namespace studio
