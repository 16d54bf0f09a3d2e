#pragma once
// The header of a .safetensors file (https://huggingface.co/docs/safetensors), validated without
// LibTorch: an 8-byte little-endian length N, N bytes of JSON {"name": {"dtype", "shape",
// "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data section. A checkpoint is
// untrusted input: every entry is checked against the dtypes this project reads, its shape
// against its byte range, its range against the file and the other tensors, so that no later
// read can leave the file. The engine's SafetensorsFile maps the file and reads tensors from what
// this returns; the fuzz target fuzz_safetensors_header feeds it arbitrary bytes.
#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace studio {

// A header that is not a valid safetensors header for this project. The message starts with the
// file's path and names the tensor where one is involved, and what to do.
class SafetensorsHeaderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The dtypes accepted ("BF16", "F16", "F32", "F64", "I64", "I32") with their byte sizes; 0 for
// any other name.
std::size_t safetensors_item_size(const std::string& dtype);
// "BF16, F16, F32, F64, I64, I32", for messages.
const char* safetensors_supported_dtypes();

struct SafetensorsEntry {
  std::string dtype;  // one of the accepted names
  std::vector<std::int64_t> shape;
  std::uint64_t offset = 0;  // byte offset of the first element, from the start of the file
  std::uint64_t size = 0;    // bytes
};

struct SafetensorsHeader {
  std::map<std::string, SafetensorsEntry> tensors;
  std::map<std::string, std::string> metadata;
  std::uint64_t data_start = 0;  // 8 + N
};

// Validates the header of the `size` bytes of a whole file (a mapping of it). `path` only names
// the file in messages. Throws SafetensorsHeaderError.
SafetensorsHeader parse_safetensors_header(const std::string& path, const std::uint8_t* bytes,
                                           std::size_t size);

}  // namespace studio
