#pragma once
// LibTorch entry point for the fused linear + cross-entropy kernel (fused_linear_ce.h). Exists
// only in builds with a CUDA LibTorch and nvcc (target studio_kernels_torch). Runs on the
// tensors' device, on its current stream, with LibTorch's cuBLAS handle (its math mode applies).

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "studio/kernels/fused_linear_ce.h"

namespace studio::kernels {

struct FusedLinearCeTorchOutputs {
  at::Tensor loss_sum;         // [] fp32: sum of -log p(target) over the targets not ignored
  at::Tensor target_logprobs;  // [tokens] fp32, 0 where ignored; undefined unless asked
  at::Tensor grad_x;           // like x; undefined unless asked
  at::Tensor grad_weight;      // [vocab, hidden] fp32; undefined unless asked
};

struct FusedLinearCeWants {
  bool grad_x = false, grad_weight = false, logprobs = false;
};

// x [tokens, hidden] and weight [vocab, hidden]: CUDA, both float32 or both bfloat16,
// contiguous, on one device; targets [tokens] int64 on that device, ignore_index or a class.
// Gradients are those of the loss sum times grad_scale. chunk_tokens 0: the kernel's rule.
// Throws c10::Error on a bad argument and KernelError when a launch fails.
FusedLinearCeTorchOutputs fused_linear_ce(const at::Tensor& x, const at::Tensor& weight,
                                          const at::Tensor& targets, FusedLinearCeWants wants,
                                          std::int64_t chunk_tokens = 0,
                                          double grad_scale = 1.0,
                                          std::int64_t ignore_index = kCrossEntropyIgnoreIndex);

}  // namespace studio::kernels
