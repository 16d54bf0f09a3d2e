#pragma once
// What the Parallelism page draws for a world and an SP choice: which part of the sequence each
// rank holds (zigzag-ring's paired chunks, Ulysses' contiguous slices and head groups, usp's ring
// x Ulysses grid), the data-parallel replicas, and what travels between the ranks of a group in
// one decoder layer (the ring's K/V blocks, Ulysses' all-to-alls), in bytes from the model's
// shape. The cut is the engine's (trainer/sp/layout.h: 2g chunks, ring rank r holds
// c_r ++ c_{2g-1-r}, Ulysses rank j the j-th 1/u of that piece; SP-local rank s = r * u + j,
// groups of consecutive global ranks). Plain C++ (no Qt, no Torch).
#include <cstdint>
#include <string>
#include <vector>

#include "studio/config/run_config.h"
#include "studio/model_facts/model_info.h"

namespace studio {

// [begin, end) as fractions of the (padded) sequence.
struct SeqSpan {
  double begin = 0;
  double end = 0;
};

struct SpRankPicture {
  int global_rank = 0;
  int sp_rank = 0;      // inside its group: ring * ulysses_degree + ulysses
  int ring_index = 0;   // r
  int ulysses_index = 0;  // j
  std::vector<SeqSpan> tokens;  // the sequence positions this rank holds (and computes)
  // During attention (after Ulysses' all-to-all): the query heads [heads_begin, heads_end) and
  // the KV heads it holds (kv_heads_begin, kv_heads_end; replicated KV heads repeat).
  int64_t heads_begin = 0, heads_end = 0;
  int64_t kv_heads_begin = 0, kv_heads_end = 0;
};

// One kind of transfer a rank makes in one decoder layer's forward.
struct SpTransfer {
  std::string what;        // "K/V block to the next ring rank", "all-to-all of q, k, v", ...
  int64_t bytes = 0;       // per rank, per occurrence
  int64_t times = 0;       // occurrences per layer forward
  std::string backward;    // what the backward adds, in words with sizes
};

inline constexpr int kMaxPictureRanks = 1024;

struct SpPicture {
  int world = 1, nodes = 1, gpus_per_node = 1;
  int sp = 1, ulysses = 1, ring = 1, replicas = 1;
  SpMode mode = SpMode::ZigzagRing;
  int64_t tokens = 0;                // the sequence (cutoff_len, padded to the SP multiple)
  int64_t tokens_per_rank = 0;
  // The global ranks in order: every one up to kMaxPictureRanks, beyond that the first
  // kMaxPictureRanks (the pattern repeats per SP group and node; a picture of a 4,096-node world
  // must not cost the GUI millions of entries).
  std::vector<SpRankPicture> ranks;
  std::vector<SpTransfer> per_layer;
  std::string problem;               // why this choice does not work ("" when it does)
};

// The picture of `cfg`'s SP choice (mode, size, usp split, cutoff_len, bf16) on nodes x
// gpus_per_node ranks of `model` (per_device_train_batch_size rows of cutoff_len tokens).
SpPicture sp_picture(const RunConfig& cfg, const ModelInfo& model, int gpus_per_node, int nodes);

}  // namespace studio
