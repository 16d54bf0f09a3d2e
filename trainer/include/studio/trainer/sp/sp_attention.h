#pragma once
// The decoder's attention seam under sequence parallelism: one AttentionFn per mode, over the
// Communicator's groups (zigzag-ring: ring_group; ulysses: ulysses_group; usp: Ulysses inside,
// the ring over the gathered ring pieces).
#include <cstdint>

#include "studio/trainer/parallel/communicator.h"
#include "studio/trainer/model/attention.h"
#include "studio/trainer/sp/layout.h"

namespace studio::trainer::sp {

// Throws std::invalid_argument when the model's heads cannot be spread as the mode needs
// (ulysses, usp: query heads divisible by the Ulysses degree, key/value heads and the degree
// dividing one another); the message names the numbers and suggests zigzag-ring. Call it
// before training; zigzag-ring accepts any heads.
void check_sp_heads(const SpLayout& layout, int64_t q_heads, int64_t kv_heads);

// The seam function for layout.mode; default_attention() when layout.sp == 1. Each decoder
// layer passes this rank's tokens (split_batch / split_sequence order) and gets this rank's
// output rows. Causal attention only for zigzag-ring and usp. Throws std::invalid_argument when
// `comm`'s groups do not match the layout. `comm` must outlive the function and every graph
// built with it.
AttentionFn make_sp_attention(const SpLayout& layout, dist::Communicator& comm);

}  // namespace studio::trainer::sp
