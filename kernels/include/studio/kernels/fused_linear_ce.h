#pragma once
// Fused LM head + cross-entropy: loss = sum over target tokens of -log softmax(x W^T)[target],
// with its gradients, without ever holding a [tokens x vocab] logits tensor. The tokens are
// processed in chunks; per chunk the logits go into a [chunk x vocab] fp32 buffer, a row kernel
// turns them into the loss and, in place, into dL/dlogits = (softmax - onehot) * grad_scale, and
// two GEMMs immediately form grad_x = dlogits W and accumulate grad_W += dlogits^T x (fp32).
//
// Semantics follow the engine's trainer/loss.h: the loss is a SUM over tokens whose target is not
// ignore_index (-100), and the count of those tokens is returned next to it, because the trainer
// normalises by the valid tokens of the whole global batch (gradient accumulation, DP and SP).
// grad_scale is the upstream gradient of that sum (e.g. 1 / global valid tokens), folded into
// dlogits so that the backward pass has nothing left to do but use the stored gradients.
//
// No CUDA or Torch headers here (see rmsnorm.h for DType and Stream).

#include <cstddef>
#include <cstdint>

#include "studio/kernels/rmsnorm.h"

struct cublasContext;

namespace studio::kernels {

using BlasHandle = cublasContext*;  // == cublasHandle_t

constexpr std::int64_t kCrossEntropyIgnoreIndex = -100;  // PyTorch's and the engine's default

struct LinearCeShape {
  std::int64_t tokens = 0;  // T: rows of x and entries of targets
  std::int64_t hidden = 0;  // H: columns of x and of the weight
  std::int64_t vocab = 0;   // V: rows of the weight (classes)
};

// Chunk rule: one chunk's logits should take about as many elements as the hidden states
// (chunk * V ~ T * H), so the extra memory is bounded by the activations the caller already
// holds: chunk = T / ceil(V / H), rounded up to a power of two (GEMM-friendly row counts).
// But never fewer rows than fill kChunkLogitsFloorBytes of fp32 logits (the largest power of
// two that fits it): every chunk re-reads the head and reads and writes its whole fp32
// gradient [V x H], so at short sequences tiny chunks would spend the step on that traffic
// (Qwen2.5-0.5B at 8k tokens: 64 rows, 128 passes over 545 MB, instead of 1024 rows and 8).
// Clamped to [1, T]. For T = 32k, H = 4096, V = 128k: chunk = 2048 by the floor (a 1 GiB
// fp32 buffer instead of ~17 GB of fp32 logits); for T = 128k, H = 3584, V = 152k: 4096 by the
// ratio. T == 0 gives 0. config/memory_estimate.cpp counts the same chunk.
inline constexpr std::int64_t kChunkLogitsFloorBytes = std::int64_t{1} << 30;
std::int64_t fused_linear_ce_chunk_tokens(LinearCeShape shape);

// Throws std::invalid_argument naming the argument: tokens < 0, hidden or vocab <= 0, vocab or
// hidden so large that a GEMM dimension overflows int, chunk_tokens < 0 (0 means the rule
// above), ignore_index in [0, vocab) (it would hide a real class).
void validate_linear_ce_shape(LinearCeShape shape, std::int64_t chunk_tokens,
                              std::int64_t ignore_index);

// The chunk actually used: chunk_tokens when > 0 (capped at T), else the rule.
std::int64_t effective_chunk_tokens(LinearCeShape shape, std::int64_t chunk_tokens);

struct FusedLinearCeParams {
  const void* x = nullptr;                // [tokens, hidden] row-major contiguous, dtype
  const void* weight = nullptr;           // [vocab, hidden] row-major contiguous, dtype
  const std::int64_t* targets = nullptr;  // [tokens]; ignore_index or a class in [0, vocab)
  LinearCeShape shape;
  std::int64_t ignore_index = kCrossEntropyIgnoreIndex;
  std::int64_t chunk_tokens = 0;  // 0: fused_linear_ce_chunk_tokens(shape)
  float grad_scale = 1.0f;        // dL/d(loss sum) from upstream, folded into dlogits
  // Of x, weight and grad_x. Accumulation is always fp32; with bf16 the dlogits operand of the two
  // backward GEMMs is rounded to bf16, as it is in a bf16 autograd graph.
  DType dtype = DType::kFloat32;

  float* loss_sum = nullptr;             // [1] fp32: sum of -log p(target) over target tokens
  std::int64_t* target_count = nullptr;  // optional [1]: tokens whose target != ignore_index
  float* target_logprobs = nullptr;      // optional [tokens]: log p(target), 0 where ignored
  void* grad_x = nullptr;                // optional [tokens, hidden], dtype
  float* grad_weight = nullptr;          // optional [vocab, hidden] fp32, overwritten
  void* workspace = nullptr;             // see fused_linear_ce_workspace_bytes
  std::size_t workspace_bytes = 0;
};

// Device scratch for one call: the fp32 [chunk x vocab] logits buffer, a [chunk x vocab] copy of
// dlogits in dtype when dtype is not fp32 and gradients are wanted (the GEMM inputs must share a
// type), and one fp32 per token for the per-token log-probabilities. Each part is 256-byte
// aligned.
std::size_t fused_linear_ce_workspace_bytes(LinearCeShape shape, std::int64_t chunk_tokens,
                                            DType dtype, bool with_grads);

// Shape rules above plus: required pointers non-null and aligned to their element size
// (loss_sum, and x/weight/targets when tokens > 0; the workspace to 256 bytes, as cudaMalloc
// returns it), workspace_bytes large enough, a known dtype, a finite grad_scale. Throws
// std::invalid_argument("fused_linear_ce: ...") naming the argument.
void validate(const FusedLinearCeParams& p);

#if STUDIO_KERNELS_WITH_CUDA
// Validate, then enqueue the whole forward + backward on `stream` (asynchronous; deterministic:
// fixed-order reductions, no atomics). `blas` is the cuBLAS handle to use (LibTorch's current one
// in the adapter; its math mode, e.g. TF32, applies); nullptr creates and destroys a private one,
// which synchronises the device (cublasDestroy does): for tests and standalone use.
// A target outside [0, vocab) that is not ignore_index makes its log-prob and the loss NaN (the
// device cannot throw). Throws KernelError when a CUDA or cuBLAS call or a launch fails.
void fused_linear_ce(const FusedLinearCeParams& p, BlasHandle blas, Stream stream);
#endif

}  // namespace studio::kernels
