#pragma once
// studio-train export: LLaMA-Factory's `llamafactory-cli export` for adapters (its merge_lora
// examples). The base model of model_name_or_path with every adapter of adapter_name_or_path
// merged into it in order (PEFT's merge_and_unload: W + s BA, DoRA's scaled form, modules_to_save
// weights replaced), written to export_dir as transformers' save_pretrained writes a model:
// safetensors shards of export_size GB, their index, config.json (torch_dtype set), the
// generation config and the tokenizer's files. The merge streams: each weight is read (mapped),
// merged in fp32 and converted when its shard is written, so it needs about one shard of memory,
// not the model.
#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "studio/config/run_config.h"

namespace studio::trainer {

struct ExportResult {
  torch::ScalarType dtype = torch::kFloat;
  std::vector<std::string> weight_files;  // in export_dir
  std::uint64_t total_size = 0;           // weight bytes
  std::vector<std::string> merged;        // the adapter folders merged, in order
};

// The dtype infer_dtype asks for, given the base's config.json torch_dtype (`base`, "" when
// absent) and whether a CUDA device is present: auto keeps the base's dtype, except that a float32
// base is written in bfloat16 where a GPU is (LLaMA-Factory's infer_optim_dtype) and stays
// float32 on a machine without one. Throws std::invalid_argument for an unknown value.
torch::ScalarType export_dtype(const std::string& infer_dtype, const std::string& base, bool cuda);

// Checks cfg's export keys (export_dir set, infer_dtype, export_size, export_device,
// export_legacy_format) and writes the merged model. Throws std::invalid_argument for a bad key
// (naming it) and std::runtime_error for an unreadable model or adapter (naming the file).
ExportResult export_merged_model(const RunConfig& cfg);

}  // namespace studio::trainer
