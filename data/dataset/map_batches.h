#pragma once
// The batches LLaMA-Factory's preprocessing sees. It maps every processor with datasets'
// Dataset.map(batched=True, batch_size=preprocessing_batch_size,
// num_proc=preprocessing_num_workers): the rows are split into num_proc contiguous shards (the
// first rows % num_proc of them one row longer, as Dataset.shard(contiguous=True)), and each
// shard is cut into batches from its own start. Stage pt packs within a batch; stage kto pairs
// each row with the previous one of its batch.
#include <cstddef>
#include <vector>

#include "studio/config/run_config.h"

namespace studio::data::detail {

struct RowRange {
  std::size_t begin = 0;
  std::size_t end = 0;  // one past the last row
};

// The batches of `rows` rows in order, none empty. A batch size <= 0 makes each shard one batch.
std::vector<RowRange> map_batches(std::size_t rows, const RunConfig& cfg);

}  // namespace studio::data::detail
