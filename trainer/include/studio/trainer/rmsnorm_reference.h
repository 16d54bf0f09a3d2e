#pragma once
// RMSNorm written with plain ATen ops: y = x * rsqrt(mean(x^2, -1) + eps) * weight.
// The fallback where the fused kernel is unavailable (CPU, no nvcc) and the answer the kernel
// tests compare against; autograd supplies its backward.

#include <ATen/core/Tensor.h>

namespace studio::trainer {

// Normalises over the last dimension; weight is [x.size(-1)]. Computes in float32 (float64 for
// double input), like the fused kernel, and returns x's dtype.
at::Tensor rms_norm_reference(const at::Tensor& x, const at::Tensor& weight, double eps);

}  // namespace studio::trainer
