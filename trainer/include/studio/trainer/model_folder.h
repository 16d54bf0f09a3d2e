#pragma once
// Models from Hugging Face folders: load one for training or inference, or create a freshly
// initialised one from a config.json (the built-in demo model, test models).
#include <cstdint>
#include <string>

#include "studio/trainer/model/decoder.h"

namespace studio::trainer {

// Loads DIR's weights into `model` after checking every name and shape against it.
void load_weights(CausalLM& model, const std::string& dir);

// Reads DIR/config.json and DIR's weights (checked name by name and shape by shape).
CausalLM load_model_folder(const std::string& dir, const ModelOptions& options = {});

// Writes OUT_DIR as a Hugging Face model folder: randomly initialised weights (HF's init,
// deterministic for `seed`) in `dtype`, plus config.json and the tokenizer files found beside
// `config_json`.
void init_model_folder(const std::string& config_json, const std::string& out_dir, uint64_t seed,
                       torch::Dtype dtype = torch::kFloat);

}  // namespace studio::trainer
