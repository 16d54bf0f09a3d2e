#pragma once
// Token batches as the engine trains on them. Labels follow LLaMA-Factory (aligned with the input,
// -100 where masked); the batch shifts them once, globally, before any sequence-parallel split:
// target[i] is what position i predicts, i.e. labels[i + 1] (see sequence-parallel.md).
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "studio/data/sample.h"

namespace studio::trainer {

// Samples come from the data library (tokenized, LLaMA-Factory label convention).
using data::kIgnoreIndex;
using data::TokenizedSample;

struct Batch {
  torch::Tensor input_ids;     // [B, S] int64, padded with pad_id at the tail
  torch::Tensor targets;       // [B, S] int64, shifted labels; kIgnoreIndex on padding
  torch::Tensor position_ids;  // [B, S] int64, 0..S-1 per row (global positions)
  int64_t valid_tokens = 0;    // targets != kIgnoreIndex
  int64_t tokens = 0;          // non-padding input tokens
};

// Pads every row to the longest sample rounded up to `pad_multiple` (the SP alignment), so the
// batch is no longer than it must be.
Batch make_batch(const std::vector<const TokenizedSample*>& samples, int64_t pad_id,
                 int64_t pad_multiple = 1);

// Valid (learned) target tokens of a sample after the shift: what normalises the loss.
int64_t count_valid_targets(const TokenizedSample& s);

}  // namespace studio::trainer
