#include "studio/model_facts/safetensors_header.h"

#include <algorithm>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include "studio/base/json_file.h"

namespace studio {
namespace {

using json = nlohmann::json;

// The Python library's limit (safetensors MAX_HEADER_SIZE is 100 MB); a larger header is not a
// checkpoint, and parsing it would only waste memory.
constexpr std::uint64_t kMaxHeaderBytes = 100ull << 20;
constexpr const char* kCorrupt =
    " (file truncated or corrupted? re-download or re-save the checkpoint)";

struct Dtype {
  const char* name;
  std::size_t size;
};
// U8: bitsandbytes' packed 4-bit weights and their statistics (QLoRA).
constexpr Dtype kDtypes[] = {{"BF16", 2}, {"F16", 2}, {"F32", 4}, {"F64", 8},
                             {"I64", 8},  {"I32", 4}, {"U8", 1}};

[[noreturn]] void fail(const std::string& path, const std::string& message) {
  throw SafetensorsHeaderError(path + ": " + message);
}

[[noreturn]] void fail_tensor(const std::string& path, const std::string& name,
                              const std::string& message) {
  throw SafetensorsHeaderError(path + ": tensor '" + name + "': " + message);
}

std::string range_text(std::uint64_t begin, std::uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// A value as JSON text for a message. dump() recurses, and a hostile header can nest a million
// levels deep, so nested values are only named; long ones are cut.
std::string brief(const json& v) {
  if (v.is_structured())
    for (const json& e : v)
      if (e.is_structured()) return std::string("(a nested JSON ") + v.type_name() + ")";
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

std::uint64_t read_u64_le(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A JSON integer in [0, max]; false for negative, fractional or too large numbers and non-numbers.
bool to_uint(const json& v, std::uint64_t max, std::uint64_t& out) {
  if (v.is_number_unsigned()) {
    out = v.get<std::uint64_t>();
    return out <= max;
  }
  if (v.is_number_integer()) {
    const auto i = v.get<std::int64_t>();
    out = static_cast<std::uint64_t>(i);
    return i >= 0 && out <= max;
  }
  return false;
}

const json& field(const std::string& path, const std::string& name, const json& entry,
                  const char* key) {
  const auto it = entry.find(key);
  if (it == entry.end()) fail_tensor(path, name, std::string("no '") + key + "' field" + kCorrupt);
  return *it;
}

// Everything about one header entry except how it sits beside the others.
SafetensorsEntry parse_entry(const std::string& path, const std::string& name, const json& entry,
                             std::uint64_t data_start, std::uint64_t data_size) {
  if (!entry.is_object())
    fail_tensor(path, name,
                std::string("entry is a JSON ") + entry.type_name() +
                    ", not an object {dtype, shape, data_offsets}" + kCorrupt);
  SafetensorsEntry info;
  const json& dtype = field(path, name, entry, "dtype");
  const std::size_t itemsize =
      dtype.is_string() ? safetensors_item_size(dtype.get<std::string>()) : 0;
  if (itemsize == 0)
    fail_tensor(path, name,
                "dtype " + brief(dtype) +
                    " is not supported (supported: " + safetensors_supported_dtypes() +
                    "; convert the checkpoint to bf16 or f32 before training)");
  info.dtype = dtype.get<std::string>();

  const json& shape = field(path, name, entry, "shape");
  if (!shape.is_array())
    fail_tensor(path, name, "shape " + brief(shape) + " is not a list of sizes" + kCorrupt);
  std::uint64_t numel = 1;
  for (const json& d : shape) {
    std::uint64_t dim = 0;
    if (!to_uint(d, std::numeric_limits<std::int64_t>::max(), dim) ||
        __builtin_mul_overflow(numel, dim, &numel))
      fail_tensor(
          path, name,
          "shape " + brief(shape) + " has a negative, non-integer or too large size" + kCorrupt);
    info.shape.push_back(static_cast<std::int64_t>(dim));
  }

  const json& offsets = field(path, name, entry, "data_offsets");
  const auto max = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t begin = 0, end = 0;
  if (!offsets.is_array() || offsets.size() != 2 || !to_uint(offsets[0], max, begin) ||
      !to_uint(offsets[1], max, end))
    fail_tensor(path, name,
                "data_offsets " + brief(offsets) + " is not [begin, end] in bytes" + kCorrupt);
  if (begin > end)
    fail_tensor(path, name,
                "data_offsets " + range_text(begin, end) + " end before begin" + kCorrupt);
  if (end > data_size)
    fail_tensor(path, name,
                "data_offsets " + range_text(begin, end) + " end past the data section (" +
                    std::to_string(data_size) + " bytes)" + kCorrupt);
  std::uint64_t expected = 0;
  const bool overflow = __builtin_mul_overflow(numel, std::uint64_t{itemsize}, &expected);
  if (overflow || expected != end - begin)
    fail_tensor(path, name,
                "data_offsets " + range_text(begin, end) + " hold " + std::to_string(end - begin) +
                    " bytes, but shape " + brief(shape) + " of " + info.dtype + " needs " +
                    (overflow ? std::string("more than 2^64") : std::to_string(expected)) +
                    kCorrupt);
  info.offset = data_start + begin;
  info.size = end - begin;
  return info;
}

json parse_header_json(const std::string& path, const std::uint8_t* p, std::size_t n) {
  try {
    return json::parse(p, p + n);
  } catch (const json::exception& e) {  // parse errors, and numbers too large for a double
    fail(path, "header is not valid JSON (" + json_error_text(e.what()) + ")" + kCorrupt);
  }
}

std::map<std::string, std::string> parse_metadata(const std::string& path, const json& m) {
  std::map<std::string, std::string> out;
  if (m.is_object()) {
    for (auto it = m.begin(); it != m.end(); ++it) {
      if (!it.value().is_string()) break;
      out[it.key()] = it.value().get<std::string>();
    }
    if (out.size() == m.size()) return out;
  }
  fail(path, "__metadata__ is not a map of strings to strings" + std::string(kCorrupt));
}

}  // namespace

std::size_t safetensors_item_size(const std::string& dtype) {
  for (const Dtype& d : kDtypes)
    if (dtype == d.name) return d.size;
  return 0;
}

const char* safetensors_supported_dtypes() {
  return "BF16, F16, F32, F64, I64, I32, U8";
}

SafetensorsHeader parse_safetensors_header(const std::string& path, const std::uint8_t* bytes,
                                           std::size_t file_size) {
  if (file_size < 8)
    fail(path, std::to_string(file_size) + " bytes, too short for a safetensors file" + kCorrupt);
  const std::uint64_t header_size = read_u64_le(bytes);
  if (header_size > kMaxHeaderBytes)
    fail(path,
         "header length " + std::to_string(header_size) + " is over the 100 MiB limit" + kCorrupt);
  if (header_size > file_size - 8)
    fail(path, "header length " + std::to_string(header_size) + " runs past the end of the file (" +
                   std::to_string(file_size) + " bytes)" + kCorrupt);
  const json header = parse_header_json(path, bytes + 8, header_size);
  if (!header.is_object())
    fail(path,
         std::string("header is a JSON ") + header.type_name() + ", not an object" + kCorrupt);

  SafetensorsHeader out;
  out.data_start = 8 + header_size;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__")
      out.metadata = parse_metadata(path, it.value());
    else
      out.tensors[it.key()] =
          parse_entry(path, it.key(), it.value(), out.data_start, file_size - out.data_start);
  }

  // Ranges must not overlap: a tensor written through one name would change another. Empty
  // tensors occupy no bytes and may sit anywhere.
  std::vector<std::pair<const std::string*, const SafetensorsEntry*>> by_offset;
  for (const auto& [name, info] : out.tensors)
    if (info.size > 0) by_offset.emplace_back(&name, &info);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto& a, const auto& b) { return a.second->offset < b.second->offset; });
  for (std::size_t i = 1; i < by_offset.size(); ++i) {
    const auto& [prev_name, prev] = by_offset[i - 1];
    const auto& [name, info] = by_offset[i];
    const std::uint64_t start = out.data_start;
    if (info->offset < prev->offset + prev->size)
      fail_tensor(
          path, *name,
          "data_offsets " + range_text(info->offset - start, info->offset - start + info->size) +
              " overlap those of tensor '" + *prev_name + "' " +
              range_text(prev->offset - start, prev->offset - start + prev->size) + kCorrupt);
  }
  return out;
}

}  // namespace studio
