#pragma once
// Ulysses sequence parallelism (docs/SEQUENCE_PARALLEL.md, "Attention"): an all-to-all trades the
// sequence split for a head split, attention runs over the whole (gathered) sequence for H/u heads,
// and the reverse all-to-all restores the sequence split. Each all-to-all's backward is the other.
#include <cstdint>
#include <functional>

#include <torch/torch.h>

#include "studio/trainer/parallel/communicator.h"

namespace studio::trainer::sp {

// [B, H/u, S, D] (the whole sequence, this rank's contiguous 1/u of the heads) ->
// [B, H, S/u, D] (this rank's contiguous chunk of the sequence, all heads), over `group` (size u,
// ranks in sequence order). Differentiable: its backward is the reverse all-to-all.
torch::Tensor ulysses_gather_heads(const torch::Tensor& x, dist::Group& group);

// Throws std::invalid_argument unless `q_heads` query and `kv_heads` key/value heads can be
// spread over `degree` Ulysses ranks: q_heads % degree == 0 and kv_heads and degree dividing one
// another. `mode` names the configured mode in the message ("ulysses" or "usp").
void check_ulysses_heads(int64_t degree, int64_t q_heads, int64_t kv_heads, const char* mode);

// The attention run on the gathered sequence: q [B, Hq/u, S, D], k/v [B, Hkv', S, D].
using GatheredAttention = std::function<torch::Tensor(
    const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v)>;

// Ulysses attention for one rank's chunk: q [B, Hq, S/u, D], k/v [B, Hkv, S/u, D] ->
// [B, Hq, S/u, D]. Grouped-query K/V: when u divides Hkv their heads are scattered like q's;
// when Hkv divides u each K/V head is first repeated u/Hkv times, so that the rank holding query
// heads [i*Hq/u, (i+1)*Hq/u) receives exactly the K/V head they use (the repeats' gradients are
// summed back by autograd). Throws std::invalid_argument as check_ulysses_heads.
torch::Tensor ulysses_attention(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, dist::Group& group,
                                const GatheredAttention& attend);

}  // namespace studio::trainer::sp
