#pragma once
// Which tokens of a sequence each rank of a sequence-parallel group holds
// (docs/SEQUENCE_PARALLEL.md, "The data path"). The global batch is shifted and padded first
// (make_batch with sp_pad_multiple); this file only cuts it.
//
// One rule covers all three modes. With ring degree g and Ulysses degree u (g * u = sp), cut the
// sequence into 2g equal chunks c_0..c_{2g-1}; ring rank r holds the piece c_r ++ c_{2g-1-r}
// (zigzag), and Ulysses rank j of that piece holds its j-th contiguous 1/u. SP-local rank
// s = r * u + j, as the Communicator numbers them.
//   zigzag-ring (u = 1, g = sp): rank s holds c_s ++ c_{2sp-1-s}.
//   ulysses     (u = sp, g = 1): rank s holds the contiguous chunk s of sp.
//   usp: after Ulysses' all-to-all the ring rank r sees exactly its zigzag piece c_r ++ c_{2g-1-r}.
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "studio/config/run_config.h"
#include "studio/trainer/batching/batch.h"

namespace studio::trainer::sp {

struct SpLayout {
  SpMode mode = SpMode::ZigzagRing;
  int64_t sp = 1;    // ranks sharing one sequence
  int64_t rank = 0;  // this rank's index inside the SP group: ring index * ulysses + ulysses index
  int64_t ulysses = 1;  // Ulysses degree: 1 for zigzag-ring, sp for ulysses
  int64_t ring = 1;     // ring degree: sp for zigzag-ring, 1 for ulysses
};

// A validated layout: fills ulysses/ring for zigzag-ring and ulysses (their degrees are then
// ignored), checks ulysses_degree * ring_degree == sp for usp and 0 <= rank < sp.
// Throws std::invalid_argument naming the offending values.
SpLayout make_sp_layout(SpMode mode, int64_t sp, int64_t rank, int64_t ulysses_degree = 1,
                        int64_t ring_degree = 1);

// What the global sequence length must be a multiple of: 2*ring*ulysses (2*sp) for zigzag-ring
// and usp, sp for ulysses; 1 without SP.
int64_t sp_pad_multiple(const SpLayout& layout);

// This rank's tokens of x along `dim` (a contiguous tensor of size(dim) / sp), for any tensor
// laid out like the sequence (ids, targets, positions, hidden states, q/k/v).
torch::Tensor split_sequence(const torch::Tensor& x, int64_t dim, const SpLayout& layout);

// The inverse over the whole group: `slices[s]` is SP rank s's split_sequence (layout.rank is
// ignored); returns the global tensor. For tests, evaluation and debugging dumps.
torch::Tensor gather_sequence(const std::vector<torch::Tensor>& slices, int64_t dim,
                              const SpLayout& layout);

// The global positions (0..seq_len-1) this rank holds, in local order: int64 [seq_len / sp].
torch::Tensor sp_token_positions(int64_t seq_len, const SpLayout& layout);

// This rank's share of a global batch: input_ids, targets and position_ids split along S (the
// positions stay global, for RoPE). valid_tokens is exact: the local targets != kIgnoreIndex
// (0 on a rank that holds only padding). tokens: with `row_lengths` (the true, unpadded length of
// each row; empty to leave out), exactly the local positions p < row_lengths[b]; without, this
// rank's proportional share of global.tokens (summing over the group to global.tokens exactly),
// because a Batch cannot tell a padding id from the same id used as a real token.
// Throws std::invalid_argument when S is not a multiple of sp_pad_multiple(layout) or
// row_lengths has the wrong size.
Batch split_batch(const Batch& global, const SpLayout& layout,
                  const std::vector<int64_t>& row_lengths = {});

}  // namespace studio::trainer::sp
