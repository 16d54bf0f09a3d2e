// Host-side rules for the RMSNorm kernel parameters. Plain C++ so that the rules are compiled and
// unit-tested on machines without nvcc, and the .cu only launches what passed them.
#include "studio/kernels/rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace studio::kernels {
namespace {

// Enough blocks to fill an H100/H200 (132 SMs) about twice, while the fp32 workspace stays
// modest: 256 * 8192 cols * 4 B = 8 MiB.
constexpr std::int64_t kMaxBackwardPartials = 256;

[[noreturn]] void fail(const std::string& what) {
  throw std::invalid_argument("rmsnorm: " + what);
}

void check_shape(std::int64_t rows, std::int64_t cols, float eps) {
  if (rows < 0) fail("rows must be >= 0, got " + std::to_string(rows));
  if (cols <= 0) fail("cols must be > 0, got " + std::to_string(cols));
  // eps == 0 is allowed (an all-zero row then gives NaN, as in PyTorch); NaN/inf/negative is not.
  if (!std::isfinite(eps) || eps < 0.0f) fail("eps must be finite and >= 0");
}

void check_stride(const char* name, std::int64_t stride, std::int64_t cols) {
  if (stride < cols) {
    fail(std::string(name) + " (" + std::to_string(stride) + ") must be >= cols (" +
         std::to_string(cols) + ")");
  }
}

void check_pointer(const char* name, const void* ptr, std::size_t alignment) {
  if (ptr == nullptr) fail(std::string(name) + " is null");
  if (reinterpret_cast<std::uintptr_t>(ptr) % alignment != 0) {
    fail(std::string(name) + " is not aligned to " + std::to_string(alignment) + " bytes");
  }
}

}  // namespace

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kBFloat16:
      return "bfloat16";
  }
  return "unknown";
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 4;
    case DType::kBFloat16:
      return 2;
  }
  fail("unknown dtype " + std::to_string(static_cast<int>(dtype)));
}

std::int64_t rmsnorm_backward_partials(std::int64_t rows) {
  return std::clamp<std::int64_t>(rows, 0, kMaxBackwardPartials);
}

std::size_t rmsnorm_backward_workspace_bytes(std::int64_t rows, std::int64_t cols) {
  if (rows <= 0 || cols <= 0) return 0;
  return static_cast<std::size_t>(rmsnorm_backward_partials(rows)) *
         static_cast<std::size_t>(cols) * sizeof(float);
}

void validate(const RmsNormForwardParams& p) {
  check_shape(p.rows, p.cols, p.eps);
  const std::size_t es = dtype_size(p.dtype);
  const std::size_t ws = dtype_size(p.weight_dtype);
  check_stride("x_row_stride", p.x_row_stride, p.cols);
  check_stride("y_row_stride", p.y_row_stride, p.cols);
  if (p.rows == 0) return;  // nothing is touched, so empty tensors may carry null pointers
  check_pointer("x", p.x, es);
  check_pointer("weight", p.weight, ws);
  check_pointer("y", p.y, es);
  if (p.rstd != nullptr) check_pointer("rstd", p.rstd, sizeof(float));
  if (p.y == p.x && p.y_row_stride != p.x_row_stride) {
    fail("in-place y == x needs y_row_stride == x_row_stride");
  }
}

void validate(const RmsNormBackwardParams& p) {
  check_shape(p.rows, p.cols, p.eps);
  const std::size_t es = dtype_size(p.dtype);
  const std::size_t ws = dtype_size(p.weight_dtype);
  check_stride("dy_row_stride", p.dy_row_stride, p.cols);
  check_stride("x_row_stride", p.x_row_stride, p.cols);
  check_stride("dx_row_stride", p.dx_row_stride, p.cols);
  if (p.rows == 0) return;
  check_pointer("dy", p.dy, es);
  check_pointer("x", p.x, es);
  check_pointer("weight", p.weight, ws);
  check_pointer("dx", p.dx, es);
  if (p.rstd != nullptr) check_pointer("rstd", p.rstd, sizeof(float));
  if (p.dweight == nullptr) return;
  check_pointer("dweight", p.dweight, ws);
  check_pointer("workspace", p.workspace, sizeof(float));
  const std::size_t need = rmsnorm_backward_workspace_bytes(p.rows, p.cols);
  if (p.workspace_bytes < need) {
    fail("workspace_bytes " + std::to_string(p.workspace_bytes) + " < required " +
         std::to_string(need));
  }
}

}  // namespace studio::kernels
