#pragma once
// Fused RMSNorm over the last dimension of a [rows, cols] matrix:
//   y = x * rsqrt(mean(x^2) + eps) * weight
// with fp32 accumulation for fp32 and bf16 tensors. No CUDA headers here: the stream is the
// driver's opaque handle type, the same type as cudaStream_t.
//
// Layout: element (r, c) of a matrix lives at base[r * row_stride + c]; columns are contiguous
// and row_stride >= cols (a row stride lets callers normalise views such as a slice of a fused
// projection without a copy). Pointers must be aligned to their element size.

#include <cstddef>
#include <cstdint>

// 1 when studio_kernels was built with nvcc and the launchers below are linked in.
#ifndef STUDIO_KERNELS_WITH_CUDA
#define STUDIO_KERNELS_WITH_CUDA 0
#endif

struct CUstream_st;

namespace studio::kernels {

using Stream = CUstream_st*;  // == cudaStream_t; nullptr is the legacy default stream

enum class DType : int { kFloat32 = 0, kBFloat16 = 1 };

const char* dtype_name(DType dtype);
std::size_t dtype_size(DType dtype);  // throws std::invalid_argument for an unknown value

struct RmsNormForwardParams {
  const void* x = nullptr;       // [rows, cols], dtype, row stride x_row_stride
  const void* weight = nullptr;  // [cols], weight_dtype
  void* y = nullptr;             // [rows, cols], dtype; may be x itself (same stride)
  float* rstd = nullptr;         // optional [rows] fp32: 1/rms of each row, for the backward
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t x_row_stride = 0;
  std::int64_t y_row_stride = 0;
  float eps = 1e-6f;
  DType dtype = DType::kFloat32;
  DType weight_dtype = DType::kFloat32;
};

struct RmsNormBackwardParams {
  const void* dy = nullptr;      // [rows, cols], dtype
  const void* x = nullptr;       // [rows, cols], dtype: the forward's input
  const void* weight = nullptr;  // [cols], weight_dtype
  const float* rstd = nullptr;   // optional [rows] from the forward; recomputed when null
  void* dx = nullptr;            // [rows, cols], dtype
  void* dweight = nullptr;       // optional [cols], weight_dtype; skipped when null
  void* workspace = nullptr;     // fp32 scratch for dweight, see rmsnorm_backward_workspace_bytes
  std::size_t workspace_bytes = 0;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t dy_row_stride = 0;
  std::int64_t x_row_stride = 0;
  std::int64_t dx_row_stride = 0;
  float eps = 1e-6f;  // used only when rstd is null
  DType dtype = DType::kFloat32;
  DType weight_dtype = DType::kFloat32;
};

// dweight is reduced deterministically: each of rmsnorm_backward_partials(rows) blocks sums its
// rows into its own fp32 row of the workspace, then a second kernel adds those rows up in a
// fixed order. So the result does not depend on scheduling, only on the shape.
std::int64_t rmsnorm_backward_partials(std::int64_t rows);
std::size_t rmsnorm_backward_workspace_bytes(std::int64_t rows, std::int64_t cols);

// Throw std::invalid_argument naming the first problem (shape, stride, eps, null or misaligned
// pointer, short workspace). rows == 0 is valid and launches nothing.
void validate(const RmsNormForwardParams& p);
void validate(const RmsNormBackwardParams& p);

#if STUDIO_KERNELS_WITH_CUDA
// Validate, then enqueue on `stream` (asynchronous). Throw KernelError when a launch fails.
void rmsnorm_forward(const RmsNormForwardParams& p, Stream stream);
void rmsnorm_backward(const RmsNormBackwardParams& p, Stream stream);
#endif

}  // namespace studio::kernels
