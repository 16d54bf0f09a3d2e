#pragma once
// CPU reference for the RMSNorm kernels: plain loops over contiguous [rows, cols] row-major data,
// accumulating in the element type (so the float version shows what fp32 accumulation costs and
// the double version serves as the accurate answer). No CUDA, no Torch.

#include <cstdint>

namespace studio::kernels {

struct RowsCols {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

// y = x * rstd * weight per row, rstd = 1 / sqrt(mean(x^2) + eps). rstd ([rows]) may be null.
// Throws std::invalid_argument for rows < 0, cols <= 0, eps < 0 or not finite, or a null
// required pointer (only checked when rows > 0).
void rmsnorm_forward_ref(const float* x, const float* weight, float* y, float* rstd, RowsCols shape,
                         float eps);
void rmsnorm_forward_ref(const double* x, const double* weight, double* y, double* rstd,
                         RowsCols shape, double eps);

// Gradients of sum(dy * y): dx ([rows, cols]) and dweight ([cols], may be null).
void rmsnorm_backward_ref(const float* dy, const float* x, const float* weight, float* dx,
                          float* dweight, RowsCols shape, float eps);
void rmsnorm_backward_ref(const double* dy, const double* x, const double* weight, double* dx,
                          double* dweight, RowsCols shape, double eps);

}  // namespace studio::kernels
