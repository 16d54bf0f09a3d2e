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

// Loads DIR's weights into `model` (model_weights).
void load_weights(CausalLM& model, const std::string& dir, uint64_t seed = 0,
                  std::string* head_note = nullptr);

// Reads DIR/config.json and DIR's weights (checked name by name and shape by shape).
CausalLM load_model_folder(const std::string& dir, const ModelOptions& options = {});

// Writes OUT_DIR as a Hugging Face model folder: randomly initialised weights (HF's init,
// deterministic for `seed`) in `dtype`, plus config.json and the tokenizer files found beside
// `config_json`.
void init_model_folder(const std::string& config_json, const std::string& out_dir, uint64_t seed,
                       torch::Dtype dtype = torch::kFloat);

}  // namespace studio::trainer
