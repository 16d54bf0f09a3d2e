// The safetensors header check on arbitrary bytes, taken as a whole file. Invariants: no crash,
// only SafetensorsHeaderError, and every accepted tensor lies inside the file, after the header,
// its bytes matching its shape and dtype, no two overlapping.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "studio/model_facts/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  studio::SafetensorsHeader header;
  try {
    header = studio::parse_safetensors_header("fuzz.safetensors", data, size);
  } catch (const studio::SafetensorsHeaderError&) {
    return 0;
  }
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const auto& [name, t] : header.tensors) {
    std::uint64_t numel = 1;
    for (const std::int64_t d : t.shape) numel *= static_cast<std::uint64_t>(d);
    const bool ok = t.offset >= header.data_start && t.offset <= size &&
                    t.size <= size - t.offset &&
                    numel * studio::safetensors_item_size(t.dtype) == t.size;
    if (!ok) {
      std::fprintf(stderr, "tensor '%s' accepted outside the file or the wrong size\n",
                   name.c_str());
      std::abort();
    }
    if (t.size > 0) ranges.emplace_back(t.offset, t.offset + t.size);
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) {
      std::fprintf(stderr, "overlapping tensors accepted\n");
      std::abort();
    }
  return 0;
}
