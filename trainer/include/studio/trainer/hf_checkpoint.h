#pragma once
// Hugging Face model folders: reading the weights of `model.safetensors` or of the shards a
// `model.safetensors.index.json` lists, and saving a trained model the way transformers'
// save_pretrained(safe_serialization=True) does, so that from_pretrained() loads it.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "studio/trainer/tensors/safetensors.h"

namespace studio::trainer {

// LLaMA-Factory's reward-model layout (stage rm, its fix_valuehead_checkpoint): the value head's
// tensors (v_head.summary.weight and .bias) in this file beside the model's own weights, which
// transformers' AutoModelForCausalLM then loads without them.
inline constexpr const char* kValueHeadFile = "value_head.safetensors";
bool is_value_head_tensor(const std::string& name);

// The weights of one model folder. Every shard is mapped and validated on open(), and the index
// is checked against what the shards hold, so a broken download fails before training starts.
class CheckpointReader {
 public:
  // Throws CheckpointError naming the folder, the file and the tensor involved.
  static CheckpointReader open(const std::string& dir);

  const std::string& dir() const;
  // All tensor names, sorted.
  std::vector<std::string> names() const;
  bool has(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;
  // See SafetensorsFile::tensor(): usually a zero-copy, read-only view of the mapped shard.
  torch::Tensor tensor(const std::string& name) const;
  // The file (full path) holding `name`.
  const std::string& file_of(const std::string& name) const;
  const std::vector<SafetensorsFile>& files() const;

  // Compares the checkpoint with the shapes a model config implies. Throws one CheckpointError
  // listing every missing tensor, unexpected tensor and shape mismatch (the first 20 of them and
  // how many more).
  void check_shapes(const std::map<std::string, std::vector<std::int64_t>>& expected) const;

 private:
  CheckpointReader() = default;
  const SafetensorsFile& file_holding(const std::string& name) const;

  std::string dir_;
  std::vector<SafetensorsFile> files_;
  std::map<std::string, std::size_t> file_index_;  // tensor name -> index into files_
};

struct HfSaveOptions {
  // Floating-point tensors are saved in this dtype (kBFloat16, kHalf or kFloat). Unset: the
  // source config.json's torch_dtype when it is one of those, else bf16.
  std::optional<torch::ScalarType> dtype;
  // transformers' default max_shard_size "5GB" (decimal): tensor bytes per shard, not counting
  // headers. A tensor larger than this gets a shard of its own.
  std::uint64_t max_shard_bytes = 5'000'000'000ull;
  // The model folder the weights came from: config.json (with torch_dtype updated), the
  // generation config and the tokenizer files are copied from it when present. Empty: none.
  std::string source_dir;
  // Streamed saving (sharded training): `tensors` then only give names, shapes and dtypes (meta
  // tensors will do) and fetch(i) returns tensor i's values when its shard is written, so at most
  // one shard's tensors exist at a time. Called in the order hf_save_order() returns.
  std::function<torch::Tensor(std::size_t index)> fetch;
};

// What save_hf_model() wrote.
struct HfSaveResult {
  torch::ScalarType dtype = torch::kBFloat16;
  std::vector<std::string> weight_files;  // file names in out_dir, in order
  std::uint64_t total_size = 0;           // tensor bytes, as in the index's metadata
  bool value_head = false;                // kValueHeadFile written too (not in the above)
};

// Saves `tensors` (in the given order, which decides the sharding as in transformers) into
// `out_dir`: `model.safetensors`, or `model-0000i-of-0000n.safetensors` shards and
// `model.safetensors.index.json` (a value head's tensors apart, in kValueHeadFile), plus the source folder's config and tokenizer files. Everything
// is written to a temporary folder first: for a new `out_dir` one beside it, renamed into place
// in one go; for an existing folder one inside it, whose files are then renamed in one by one,
// after which the weight files of an earlier save that the new one does not use are removed.
// A failure before those renames leaves `out_dir` as it was. Throws CheckpointError.
HfSaveResult save_hf_model(const std::string& out_dir, const NamedTensors& tensors,
                           const HfSaveOptions& options = {});

// The order in which save_hf_model(tensors, options) writes, hence fetches, the tensors: shard by
// shard. Ranks that help a streamed save run their part of each fetch in this order.
std::vector<std::size_t> hf_save_order(const NamedTensors& tensors, const HfSaveOptions& options);

// "bfloat16", "float16", "float32" (config.json's torch_dtype) <-> torch dtype.
std::optional<torch::ScalarType> dtype_from_torch_dtype_name(const std::string& name);
std::string torch_dtype_name(torch::ScalarType dtype);

}  // namespace studio::trainer
