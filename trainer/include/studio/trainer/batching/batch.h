#pragma once
// Token batches as the engine trains on them. Labels follow LLaMA-Factory (aligned with the input,
// -100 where masked); the batch shifts them once, globally, before any sequence-parallel split:
// target[i] is what position i predicts, i.e. labels[i + 1] (docs/SEQUENCE_PARALLEL.md, "The data path").
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
  torch::Tensor position_ids;  // [B, S] int64, 0..S-1 per row (global positions); packed rows
                               // restart at 0 for every sample (as LLaMA-Factory's packing)
  torch::Tensor segment_ids;   // [B, S] int64 with segment_ids: the packed sample of each token
                               // (0, 1, ... per row), -1 on padding; undefined otherwise
  torch::Tensor token_mask;    // [B, S] bool: true on the samples' tokens, false on padding
  int64_t valid_tokens = 0;    // targets != kIgnoreIndex
  int64_t tokens = 0;          // non-padding input tokens
};

// Pads every row to the longest sample rounded up to `pad_multiple` (the SP alignment), so the
// batch is no longer than it must be.
// `segment_ids`: fill Batch::segment_ids (neat packing isolates the packed samples by them).
Batch make_batch(const std::vector<const TokenizedSample*>& samples, int64_t pad_id,
                 int64_t pad_multiple = 1, bool segment_ids = false);

// LLaMA-Factory's packing (PackedSupervisedDatasetProcessor): samples grouped by its greedy
// knapsack (lengths sorted ascending; each pack repeatedly takes the longest remaining sample
// that still fits `capacity` tokens) and concatenated, recording segment_lengths and masking
// each packed sample's first label. Samples longer than `capacity` are dropped (the caller
// truncates first, so there are none). Order: the packs as the knapsack forms them.
std::vector<TokenizedSample> pack_samples(const std::vector<TokenizedSample>& samples,
                                          int64_t capacity);
// The same, over pointers, also saying which samples (indexes into `samples`, in segment order)
// each pack holds.
std::vector<TokenizedSample> pack_samples(const std::vector<const TokenizedSample*>& samples,
                                          int64_t capacity,
                                          std::vector<std::vector<size_t>>* members);

// Valid (learned) target tokens of a sample after the shift: what normalises the loss.
int64_t count_valid_targets(const TokenizedSample& s);

}  // namespace studio::trainer
