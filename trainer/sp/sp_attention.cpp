// The SP modes behind the attention seam.
#include "studio/trainer/sp/sp_attention.h"

#include <stdexcept>
#include <string>

#include "studio/trainer/sp/ring_attention.h"
#include "studio/trainer/sp/ulysses.h"

namespace studio::trainer::sp {
namespace {

void check_group(const dist::Group& g, int64_t size, int64_t rank, const char* which) {
  if (g.size() != size || g.rank() != rank)
    throw std::invalid_argument(std::string("sequence parallelism: the communicator's ") + which +
                                " group is rank " + std::to_string(g.rank()) + " of " +
                                std::to_string(g.size()) + ", the layout expects rank " +
                                std::to_string(rank) + " of " + std::to_string(size));
}

void require_causal(const AttentionCall& call, SpMode mode) {
  if (!call.causal)
    throw std::invalid_argument("sequence parallelism (" + std::string(to_string(mode)) +
                                "): layer " + std::to_string(call.layer) +
                                " asks for non-causal attention; the zigzag ring is causal only");
}

}  // namespace

void check_sp_heads(const SpLayout& l, int64_t q_heads, int64_t kv_heads) {
  switch (l.mode) {
    case SpMode::ZigzagRing:
      return;
    case SpMode::Ulysses:
      check_ulysses_heads(l.ulysses, q_heads, kv_heads, "ulysses");
      return;
    case SpMode::Usp: {
      const std::string mode =
          "usp (sequence_parallel_ulysses_degree " + std::to_string(l.ulysses) + ")";
      check_ulysses_heads(l.ulysses, q_heads, kv_heads, mode.c_str());
      return;
    }
  }
}

AttentionFn make_sp_attention(const SpLayout& layout, dist::Communicator& comm) {
  if (layout.sp == 1) return default_attention();
  check_group(comm.sp_group(), layout.sp, layout.rank, "sequence-parallel");
  check_group(comm.ulysses_group(), layout.ulysses, layout.rank % layout.ulysses, "Ulysses");
  check_group(comm.ring_group(), layout.ring, layout.rank / layout.ulysses, "ring");
  dist::Group* ring = &comm.ring_group();
  dist::Group* ulysses = &comm.ulysses_group();
  switch (layout.mode) {
    case SpMode::ZigzagRing:
      return [ring](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                    const AttentionCall& call) {
        require_causal(call, SpMode::ZigzagRing);
        return zigzag_ring_attention(q, k, v, call.scale, *ring, call.segments, call.shape);
      };
    case SpMode::Ulysses:
      return [layout, ulysses](const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const AttentionCall& call) {
        check_sp_heads(layout, q.size(1), k.size(1));
        return ulysses_attention(
            q, k, v, *ulysses,
            [&call](const torch::Tensor& qg, const torch::Tensor& kg, const torch::Tensor& vg) {
              // The gathered sequence is the whole sequence in global order.
              return local_attention(qg, kg, vg, call.causal, call.scale, call.segments,
                                     call.shape);
            });
      };
    case SpMode::Usp:
      return [layout, ulysses, ring](const torch::Tensor& q, const torch::Tensor& k,
                                     const torch::Tensor& v, const AttentionCall& call) {
        require_causal(call, SpMode::Usp);
        check_sp_heads(layout, q.size(1), k.size(1));
        // After the all-to-all this rank holds its ring piece [c_r ; c_{2g-1-r}] whole.
        return ulysses_attention(q, k, v, *ulysses,
                                 [&call, ring](const torch::Tensor& qg, const torch::Tensor& kg,
                                               const torch::Tensor& vg) {
                                   return zigzag_ring_attention(qg, kg, vg, call.scale, *ring,
                                                                call.segments, call.shape);
                                 });
      };
  }
  throw std::invalid_argument("make_sp_attention: unknown sequence_parallel_mode");
}

}  // namespace studio::trainer::sp
