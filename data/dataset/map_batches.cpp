#include "map_batches.h"

#include <algorithm>

namespace studio::data::detail {

std::vector<RowRange> map_batches(std::size_t rows, const RunConfig& cfg) {
  std::vector<RowRange> out;
  if (rows == 0) return out;
  const int64_t num_proc = cfg.preprocessing_num_workers.value_or(1);
  const std::size_t shards = num_proc > 1 ? std::min(rows, static_cast<std::size_t>(num_proc)) : 1;
  const std::size_t div = rows / shards;
  const std::size_t mod = rows % shards;
  for (std::size_t s = 0; s < shards; ++s) {
    const std::size_t start = div * s + std::min(s, mod);
    const std::size_t end = start + div + (s < mod ? 1 : 0);
    const std::size_t batch = cfg.preprocessing_batch_size > 0
                                  ? static_cast<std::size_t>(cfg.preprocessing_batch_size)
                                  : end - start;
    for (std::size_t b = start; b < end; b += batch) out.push_back({b, std::min(b + batch, end)});
  }
  return out;
}

}  // namespace studio::data::detail
