#pragma once
// Zigzag ring attention (docs/SEQUENCE_PARALLEL.md, "Attention"): causal attention over a
// sequence whose 2n chunks are spread over the n ranks of a ring, rank r holding [c_r ; c_{2n-1-r}]
// (layout.h). K/V travel around the ring for n-1 steps, the next block arriving while the current
// one is computed; block outputs are merged with their log-sum-exp in fp32 (fp64 for double).
// The backward re-runs the ring with the global out and lse, accumulates dq locally and sends the
// visiting block's dk/dv around a second ring, home after the full cycle.
#include <torch/torch.h>

#include "studio/trainer/parallel/communicator.h"
#include "studio/trainer/model/attention.h"

namespace studio::trainer::sp {

// Differentiable; q [B, Hq, S_local, D], k and v [B, Hkv, S_local, D] (Hq a multiple of Hkv),
// S_local even when the ring has more than one rank; returns [B, Hq, S_local, D] in q's dtype.
// Every rank of `ring` must call it (and its backward) in the same order. A ring of one rank is
// plain local causal attention. `ring` must outlive the autograd graph.
// `segments` (neat packing): the sample index of every token of the whole sequence the ring
// shares, [B, 2 * ring.size() * chunk] in global order; each block then also masks keys of
// other samples (the segments of a visiting K/V block are cut from it, nothing extra travels).
// `shape`: the layer's sliding window (over global positions; blocks wholly outside it are
// skipped, those wholly inside run the kernels) and soft-capping.
torch::Tensor zigzag_ring_attention(const torch::Tensor& q, const torch::Tensor& k,
                                    const torch::Tensor& v, double scale, dist::Group& ring,
                                    const torch::Tensor& segments = {}, ScoreShape shape = {});

}  // namespace studio::trainer::sp
