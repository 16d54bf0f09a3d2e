#pragma once
// LibTorch entry points for the fused RMSNorm kernels. Exists only in builds with a CUDA LibTorch
// and nvcc (target studio_kernels_torch). Runs on the tensors' device and its current stream.

#include <ATen/core/Tensor.h>

namespace studio::kernels {

struct RmsNormForwardOutputs {
  at::Tensor y;     // like x
  at::Tensor rstd;  // float32 [rows], rows = x.numel() / x.size(-1): keep it for the backward
};

struct RmsNormBackwardOutputs {
  at::Tensor dx;       // like x
  at::Tensor dweight;  // like weight; undefined when need_dweight is false
};

// x: CUDA, float32 or bfloat16, contiguous, normalised over its last dimension (cols).
// weight: [cols], float32 or bfloat16, contiguous, on x's device.
// Throws c10::Error on a bad argument and studio::kernels::KernelError when a launch fails.
RmsNormForwardOutputs rmsnorm_forward(const at::Tensor& x, const at::Tensor& weight, double eps);

// dy: same shape, dtype and device as x. rstd: the forward's, or undefined to recompute it with
// eps.
RmsNormBackwardOutputs rmsnorm_backward(const at::Tensor& dy, const at::Tensor& x,
                                        const at::Tensor& weight, const at::Tensor& rstd,
                                        double eps, bool need_dweight);

}  // namespace studio::kernels
