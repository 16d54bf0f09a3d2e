#pragma once
// The safetensors format (https://huggingface.co/docs/safetensors), as the Hugging Face
// `safetensors` library reads and writes it: an 8-byte little-endian header length N, N bytes of
// JSON {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then
// the data section. A checkpoint is untrusted input: the whole header is validated when the file
// is opened, so that no later call can read outside the mapping.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <torch/types.h>

namespace studio::trainer {

// Every problem with a checkpoint file or folder. The message names the file, the tensor where one
// is involved, and what to do.
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The dtypes accepted in checkpoints: the float types weights come in, and the integer and f64
// types that metadata-like buffers use. Others (F8_*, BOOL, U8, ...) are refused by name.
std::optional<torch::ScalarType> dtype_from_safetensors(const std::string& name);
// "BF16", "F16", "F32", "F64", "I64", "I32"; throws CheckpointError for any other type.
std::string safetensors_dtype_name(torch::ScalarType dtype);

struct TensorInfo {
  torch::ScalarType dtype = torch::kFloat;
  std::vector<std::int64_t> shape;
  std::uint64_t offset = 0;  // byte offset of the first element, from the start of the file
  std::uint64_t size = 0;    // bytes
};

// A read-only memory map of one .safetensors file with its validated header. Copies share the
// mapping; it lives as long as the last copy or the last tensor returned by tensor().
class SafetensorsFile {
 public:
  // Maps `path` and validates the header; throws CheckpointError.
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const;
  // Tensor names, sorted.
  const std::vector<std::string>& names() const;
  bool has(const std::string& name) const;
  // Throws CheckpointError naming the file when there is no such tensor.
  const TensorInfo& info(const std::string& name) const;
  // A CPU tensor. When the data is aligned for its dtype (always for files this engine or the
  // Python library writes) it is a zero-copy view of the read-only mapping: read it, copy it,
  // convert it, but clone() it before writing into it in place. Otherwise it is a copy.
  torch::Tensor tensor(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const;

  // The mapped bytes of the whole file, for diagnostics and tests.
  const std::uint8_t* mapping_data() const;
  std::size_t mapping_size() const;

 private:
  struct State;
  explicit SafetensorsFile(std::shared_ptr<const State> state);
  std::shared_ptr<const State> state_;
};

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// Writes `tensors` to `path` atomically (temporary file beside it, fsync, rename), one tensor at a
// time so that no second copy of the whole model is held in memory. Tensors may be on any device
// and in any layout. With `dtype`, floating-point tensors are converted to it and integer tensors
// keep their type. The data section is contiguous, ordered as the Python library orders it (by
// dtype size, largest first, then by name), so every tensor is aligned. `metadata` always gets
// "format": "pt" unless it sets "format" itself. Throws CheckpointError naming the file (and the
// tensor where one is at fault); the target is untouched on failure.
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {},
                       std::optional<torch::ScalarType> dtype = std::nullopt);

// The bytes a tensor takes in a file once converted as write_safetensors converts it.
std::uint64_t safetensors_byte_size(const torch::Tensor& tensor,
                                    std::optional<torch::ScalarType> dtype = std::nullopt);

}  // namespace studio::trainer
