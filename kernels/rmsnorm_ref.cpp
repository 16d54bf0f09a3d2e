#include "studio/kernels/rmsnorm_ref.h"

#include <cmath>
#include <initializer_list>
#include <stdexcept>

namespace studio::kernels {
namespace {

template <typename T>
void check(RowsCols shape, T eps, std::initializer_list<const void*> required) {
  if (shape.rows < 0) throw std::invalid_argument("rmsnorm_ref: rows must be >= 0");
  if (shape.cols <= 0) throw std::invalid_argument("rmsnorm_ref: cols must be > 0");
  if (!std::isfinite(eps) || eps < T(0)) {
    throw std::invalid_argument("rmsnorm_ref: eps must be finite and >= 0");
  }
  if (shape.rows == 0) return;
  for (const void* p : required) {
    if (p == nullptr) throw std::invalid_argument("rmsnorm_ref: null pointer");
  }
}

template <typename T>
T row_rstd(const T* x, std::int64_t cols, T eps) {
  T sum_sq = 0;
  for (std::int64_t c = 0; c < cols; ++c) sum_sq += x[c] * x[c];
  return T(1) / std::sqrt(sum_sq / static_cast<T>(cols) + eps);
}

template <typename T>
void forward(const T* x, const T* w, T* y, T* rstd, RowsCols s, T eps) {
  check(s, eps, {x, w, y});
  for (std::int64_t r = 0; r < s.rows; ++r) {
    const T* xr = x + r * s.cols;
    const T inv = row_rstd(xr, s.cols, eps);
    if (rstd != nullptr) rstd[r] = inv;
    for (std::int64_t c = 0; c < s.cols; ++c) y[r * s.cols + c] = xr[c] * inv * w[c];
  }
}

// With r = rstd and g = dy * w:  dx = r * g - x * r^3 * sum(g * x) / cols  (r depends on every
// x of the row through mean(x^2), hence the second term), dw = sum over rows of dy * x * r.
template <typename T>
void backward(const T* dy, const T* x, const T* w, T* dx, T* dw, RowsCols s, T eps) {
  check(s, eps, {dy, x, w, dx});
  if (dw != nullptr) {
    for (std::int64_t c = 0; c < s.cols; ++c) dw[c] = 0;
  }
  for (std::int64_t r = 0; r < s.rows; ++r) {
    const T* xr = x + r * s.cols;
    const T* dyr = dy + r * s.cols;
    const T inv = row_rstd(xr, s.cols, eps);
    T dot = 0;
    for (std::int64_t c = 0; c < s.cols; ++c) dot += dyr[c] * w[c] * xr[c];
    const T coef = inv * inv * inv * dot / static_cast<T>(s.cols);
    for (std::int64_t c = 0; c < s.cols; ++c) {
      dx[r * s.cols + c] = inv * dyr[c] * w[c] - xr[c] * coef;
      if (dw != nullptr) dw[c] += dyr[c] * xr[c] * inv;
    }
  }
}

}  // namespace

void rmsnorm_forward_ref(const float* x, const float* weight, float* y, float* rstd, RowsCols shape,
                         float eps) {
  forward(x, weight, y, rstd, shape, eps);
}

void rmsnorm_forward_ref(const double* x, const double* weight, double* y, double* rstd,
                         RowsCols shape, double eps) {
  forward(x, weight, y, rstd, shape, eps);
}

void rmsnorm_backward_ref(const float* dy, const float* x, const float* weight, float* dx,
                          float* dweight, RowsCols shape, float eps) {
  backward(dy, x, weight, dx, dweight, shape, eps);
}

void rmsnorm_backward_ref(const double* dy, const double* x, const double* weight, double* dx,
                          double* dweight, RowsCols shape, double eps) {
  backward(dy, x, weight, dx, dweight, shape, eps);
}

}  // namespace studio::kernels
