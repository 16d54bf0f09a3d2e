#pragma once
// Models from Hugging Face folders: load one for training or inference, or create a freshly
// initialised one from a config.json (the built-in demo model, test models).
#include <cstdint>
#include <functional>
#include <string>

#include "studio/trainer/hf_checkpoint.h"
#include "studio/trainer/model/decoder.h"

namespace studio::trainer {

// A model folder's weights by HF name.
using WeightGetter = std::function<torch::Tensor(const std::string& name)>;

// The weights of DIR for `model`, after checking every name and shape against it (one error
// listing every problem). A model with a value head (ModelOptions::value_head) reads it from
// DIR/value_head.safetensors when the folder has one (a reward model trained before, or a
// checkpoint of one); otherwise the head is initialised from `seed` as TRL initialises it, and
// `head_note`, when given, says which it was.
WeightGetter model_weights(const std::string& dir, CausalLM& model, uint64_t seed = 0,
                           std::string* head_note = nullptr);

// A folder that bitsandbytes quantized on disk (config.json's quantization_config: load_in_4bit;
// transformers' save_pretrained of a Linear4bit: `<name>.weight` packed bytes in
// bnb_4bit_quant_storage's dtype beside `.absmax`, `.quant_map`, `.nested_absmax`,
// `.nested_quant_map` and `.quant_state.bitsandbytes__nf4|fp4`, a JSON of the type, block size,
// shape and offset): every Linear of `model` whose weight the folder holds that way gets it as
// its 4-bit weight on the weight's device, the stored bytes themselves (not requantized); those
// the folder keeps unquantized (llm_int8_skip_modules, lm_head) stay ordinary weights. Returns
// the number of weights it set and adds their bytes to `bytes` when given. Throws
// CheckpointError naming the folder, the tensor and what is wrong with it.
int64_t load_bnb_4bit_weights(CausalLM& model, const std::string& dir, int64_t* bytes = nullptr);

// Loads DIR's weights into `model` (model_weights).
void load_weights(CausalLM& model, const std::string& dir, uint64_t seed = 0,
                  std::string* head_note = nullptr);

// Reads DIR/config.json and DIR's weights (checked name by name and shape by shape); a folder
// bitsandbytes saved in 4 bits keeps its linear weights in 4 bits (load_bnb_4bit_weights).
CausalLM load_model_folder(const std::string& dir, const ModelOptions& options = {});

// Writes OUT_DIR as a Hugging Face model folder: randomly initialised weights (HF's init,
// deterministic for `seed`) in `dtype`, plus config.json and the tokenizer files found beside
// `config_json`.
void init_model_folder(const std::string& config_json, const std::string& out_dir, uint64_t seed,
                       torch::Dtype dtype = torch::kFloat);

}  // namespace studio::trainer
