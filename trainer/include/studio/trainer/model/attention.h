#pragma once
// Attention for the decoder, in three layers:
//  1. block functions: one (q block) x (k/v block) attention that also returns the row
//     log-sum-exp, and its backward computed from a GIVEN out and lse. These are the pieces the
//     zigzag ring composes: the ring merges block outputs with their lse and later passes the
//     global out/lse back, so every block's gradient is exact (docs/SEQUENCE_PARALLEL.md).
//     fp32/bf16 on CPU: ATen's CPU flash-attention kernel (forward and backward, with the lse).
//     fp16/bf16 on CUDA: ATen's FlashAttention forward/backward ops.
//     Everything else (double, fp32 on CUDA, masks the kernels cannot express) and whatever
//     set_attention_kernel(Math) pins: a chunked math path with fp32 accumulation (fp64 for
//     double inputs), the reference the kernels are tested against.
//  2. LocalAttention: an autograd Function over the block functions (no SP).
//  3. The seam: AttentionFn, called by every decoder layer; SP modes and kernels install theirs.
//
// Shapes: q [B, Hq, S, D], k and v [B, Hkv, Sk, D] with Hq a multiple of Hkv (grouped-query
// attention: q head h uses k/v head h / (Hq / Hkv), as HF's repeat_kv). K/V are never
// repeated: the math path folds the query heads of a group into the query rows.

#include <torch/torch.h>

#include <functional>
#include <optional>

namespace studio::trainer {

// Which keys a query sees, and how scores are shaped. Key j is visible to query i iff !causal or
// kpos(j) <= qpos(i), where qpos(i) = q_start + i and kpos(j) = k_start + j unless q_pos/k_pos
// give the positions ([Sq] and [Sk] int64 on q's device; both or neither); causal with equal
// starts is the usual (top-left aligned) causal mask.
// With window > 0 (sliding-window attention, HF's sliding mask) also qpos(i) - kpos(j) < window.
// With segments (neat packing: several samples in one row), key j is visible to query i only if
// they also belong to the same sample: q_segments[b, i] == k_segments[b, j] ([B, Sq] and [B, Sk]
// int64 on the device of q). Rows may then see no key at all inside one block (0, -inf).
// With softcap > 0 (Gemma 2) the scaled scores s become softcap * tanh(s / softcap) before the
// mask and the softmax; lse is over those.
struct BlockMask {
  bool causal = false;
  int64_t q_start = 0;
  int64_t k_start = 0;
  torch::Tensor q_segments{}, k_segments{};  // both undefined: no segment isolation
  int64_t window = 0;
  torch::Tensor q_pos{}, k_pos{};  // both undefined: the starts above
  double softcap = 0.0;
  bool segmented() const { return q_segments.defined(); }
  bool positioned() const { return q_pos.defined(); }
};

struct AttnBlockOut {
  torch::Tensor out;  // [B, Hq, S, D], q's dtype; rows that see no key are 0
  torch::Tensor lse;  // [B, Hq, S], fp32 (fp64 for double inputs); -inf for rows that see no key
};

struct AttnBlockGrads {
  // In the accumulation dtype (fp32; fp64 for double inputs), shaped like q, k, v, so that a
  // ring can sum block gradients without rounding them to bf16 on every step.
  torch::Tensor dq, dk, dv;
};

// Auto: the fastest kernel that applies (bench/attention measures them: docs/PERFORMANCE.md);
// Math: the math path everywhere (tests and benchmarks pin it). Process-wide.
enum class AttentionKernel { Auto, Math };
void set_attention_kernel(AttentionKernel kernel);

// softmax(scale * q k^T + mask) v, and lse = logsumexp over the keys of scale * q k^T + mask.
AttnBlockOut attention_block_forward(const torch::Tensor& q, const torch::Tensor& k,
                                     const torch::Tensor& v, const BlockMask& mask, double scale);
inline AttnBlockOut attention_block_forward(const torch::Tensor& q, const torch::Tensor& k,
                                            const torch::Tensor& v, bool causal, double scale) {
  return attention_block_forward(q, k, v, BlockMask{causal}, scale);
}

// Gradients of the block for the upstream gradient `dout`, with P = exp(scale q k^T - lse) and
// D = rowsum(dout * out) taken from the given out/lse (a ring passes the merged ones). In fp32
// (what a ring sums its blocks in), or, with `native`, in the dtype the kernel produced them
// (the flash kernels: q's; the math path: fp32) for a caller that wants q's dtype anyway.
AttnBlockGrads attention_block_backward(const torch::Tensor& dout, const torch::Tensor& q,
                                        const torch::Tensor& k, const torch::Tensor& v,
                                        const torch::Tensor& out, const torch::Tensor& lse,
                                        const BlockMask& mask, double scale, bool native = false);
inline AttnBlockGrads attention_block_backward(const torch::Tensor& dout, const torch::Tensor& q,
                                               const torch::Tensor& k, const torch::Tensor& v,
                                               const torch::Tensor& out, const torch::Tensor& lse,
                                               bool causal, double scale) {
  return attention_block_backward(dout, q, k, v, out, lse, BlockMask{causal}, scale);
}

// The CPU math path alone (the block functions use it wherever FlashAttention does not apply);
// exposed so tests and benchmarks can pin it. `query_chunk` rows of q are processed at a time
// (0: chosen so that one chunk's fp32 scores stay near 128 MiB).
AttnBlockOut math_block_forward(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, const BlockMask& mask, double scale,
                                int64_t query_chunk = 0);
AttnBlockGrads math_block_backward(const torch::Tensor& dout, const torch::Tensor& q,
                                   const torch::Tensor& k, const torch::Tensor& v,
                                   const torch::Tensor& out, const torch::Tensor& lse,
                                   const BlockMask& mask, double scale, int64_t query_chunk = 0);

// Numerically stable merge of a new block into a running (out, lse), in place, in fp32/fp64:
// lse' = logaddexp(lse, lse_b); out' = exp(lse - lse') out + exp(lse_b - lse') out_b.
// `out` must be in the accumulation dtype; rows where both are -inf stay (0, -inf).
void merge_attention_blocks(torch::Tensor& out, torch::Tensor& lse, const torch::Tensor& out_b,
                            const torch::Tensor& lse_b);

// The score shaping of a layer (AttentionCall): a sliding window (0: none) and logit
// soft-capping (0: none).
struct ScoreShape {
  int64_t window = 0;
  double softcap = 0.0;
};

// Differentiable attention over one rank's whole sequence: the block functions under autograd.
// Saves q, k, v, out and lse; the backward returns gradients in the inputs' dtypes.
// `segments` [B, S] (undefined: none) isolates packed samples from each other.
struct LocalAttention : torch::autograd::Function<LocalAttention> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q,
                               const torch::Tensor& k, const torch::Tensor& v, bool causal,
                               double scale, const std::optional<torch::Tensor>& segments,
                               int64_t window, double softcap);
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads);
};

// LocalAttention::apply(q, k, v, causal, scale): out [B, Hq, S, D] in q's dtype; the default
// of the seam.
torch::Tensor local_attention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, bool causal, double scale,
                              const torch::Tensor& segments = {}, ScoreShape shape = {});

// What a decoder layer tells the attention implementation besides q, k, v (after RoPE).
struct AttentionCall {
  int64_t layer = 0;  // decoder layer index
  bool causal = true;
  double scale = 1.0;  // head_dim^-0.5 (Gemma: query_pre_attn_scalar^-0.5)
  // Neat packing: the sample index of every token of the WHOLE (global, unsplit) sequence,
  // [B, S_global] int64 on the model's device, -1 on padding; undefined otherwise. SP modes cut
  // from it the segments of whichever tokens meet in a block.
  torch::Tensor segments{};
  ScoreShape shape{};  // the layer's sliding window and soft-capping
};

// The seam: every decoder layer calls one of these with q [B, Hq, S, D], k/v [B, Hkv, S, D]
// (its rank's tokens) and expects out [B, Hq, S, D]; it must be differentiable.
using AttentionFn = std::function<torch::Tensor(const torch::Tensor& q, const torch::Tensor& k,
                                                const torch::Tensor& v, const AttentionCall& call)>;

// local_attention behind the seam's signature.
AttentionFn default_attention();

}  // namespace studio::trainer
