// Adapts tensors to the RMSNorm kernel core: checks what the core cannot see (device, dtype,
// shape, contiguity), selects the tensors' device, and enqueues on PyTorch's current stream so
// the kernels order correctly with the surrounding ATen work and the caching allocator.
#include "studio/kernels/rmsnorm_torch.h"

#include "studio/kernels/rmsnorm.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cmath>

namespace studio::kernels {
namespace {

DType kernel_dtype(const at::Tensor& t, const char* name) {
  if (t.scalar_type() == at::kFloat) return DType::kFloat32;
  TORCH_CHECK(t.scalar_type() == at::kBFloat16, "rmsnorm: ", name,
              " must be float32 or bfloat16, got ", t.scalar_type());
  return DType::kBFloat16;
}

void check_on_device_of(const at::Tensor& t, const char* name, const at::Tensor& x) {
  TORCH_CHECK(t.defined(), "rmsnorm: ", name, " is undefined");
  TORCH_CHECK(t.is_cuda(), "rmsnorm: ", name, " must be a CUDA tensor, got ", t.device());
  TORCH_CHECK(t.device() == x.device(), "rmsnorm: ", name, " is on ", t.device(), " but x is on ",
              x.device());
  TORCH_CHECK(t.is_contiguous(), "rmsnorm: ", name, " must be contiguous");
}

// Returns cols after checking x and weight; rows follow as x.numel() / cols.
std::int64_t check_x_and_weight(const at::Tensor& x, const at::Tensor& weight) {
  check_on_device_of(x, "x", x);
  check_on_device_of(weight, "weight", x);
  TORCH_CHECK(x.dim() >= 1, "rmsnorm: x must have at least one dimension");
  const std::int64_t cols = x.size(-1);
  TORCH_CHECK(cols > 0, "rmsnorm: the last dimension of x must be > 0");
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == cols, "rmsnorm: weight must be [", cols,
              "], got ", weight.sizes());
  return cols;
}

Stream current_stream() {
  // The caller's device guard has made x's device current; -1 means "current device".
  return c10::cuda::getCurrentCUDAStream().stream();
}

float checked_eps(double eps) {
  TORCH_CHECK(std::isfinite(eps) && eps >= 0.0, "rmsnorm: eps must be finite and >= 0, got ", eps);
  return static_cast<float>(eps);
}

at::Tensor contiguous_like(const at::Tensor& t) {
  return at::empty_like(t, at::MemoryFormat::Contiguous);
}

}  // namespace

RmsNormForwardOutputs rmsnorm_forward(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const std::int64_t cols = check_x_and_weight(x, weight);
  const c10::cuda::CUDAGuard guard(x.device());
  const std::int64_t rows = x.numel() / cols;
  RmsNormForwardOutputs out{contiguous_like(x), at::empty({rows}, x.options().dtype(at::kFloat))};
  RmsNormForwardParams p;
  p.eps = checked_eps(eps);
  p.dtype = kernel_dtype(x, "x");
  p.weight_dtype = kernel_dtype(weight, "weight");
  p.x = x.data_ptr();
  p.weight = weight.data_ptr();
  p.y = out.y.data_ptr();
  p.rstd = out.rstd.data_ptr<float>();
  p.rows = rows;
  p.cols = cols;
  p.x_row_stride = p.y_row_stride = cols;
  rmsnorm_forward(p, current_stream());
  return out;
}

RmsNormBackwardOutputs rmsnorm_backward(const at::Tensor& dy, const at::Tensor& x,
                                        const at::Tensor& weight, const at::Tensor& rstd,
                                        double eps, bool need_dweight) {
  const std::int64_t cols = check_x_and_weight(x, weight);
  check_on_device_of(dy, "dy", x);
  TORCH_CHECK(dy.sizes() == x.sizes(), "rmsnorm: dy ", dy.sizes(), " must match x ", x.sizes());
  TORCH_CHECK(dy.scalar_type() == x.scalar_type(), "rmsnorm: dy and x must share a dtype");
  const c10::cuda::CUDAGuard guard(x.device());
  const std::int64_t rows = x.numel() / cols;
  RmsNormBackwardParams p;
  p.eps = checked_eps(eps);
  p.dtype = kernel_dtype(x, "x");
  p.weight_dtype = kernel_dtype(weight, "weight");
  if (rstd.defined()) {
    check_on_device_of(rstd, "rstd", x);
    TORCH_CHECK(rstd.scalar_type() == at::kFloat && rstd.numel() == rows,
                "rmsnorm: rstd must be float32 with ", rows, " elements");
    p.rstd = rstd.data_ptr<float>();
  }
  RmsNormBackwardOutputs out{contiguous_like(x),
                             need_dweight ? contiguous_like(weight) : at::Tensor()};
  if (rows == 0) {
    // No kernel runs for an empty batch, but the weight's gradient is a well-defined zero.
    if (need_dweight) out.dweight.zero_();
    return out;
  }
  at::Tensor workspace;
  if (need_dweight) {
    p.workspace_bytes = rmsnorm_backward_workspace_bytes(rows, cols);
    // From the caching allocator on the current stream: it is handed out again only in stream
    // order, i.e. after the kernels below have finished with it.
    workspace = at::empty({static_cast<std::int64_t>(p.workspace_bytes / sizeof(float))},
                          x.options().dtype(at::kFloat));
    p.workspace = workspace.data_ptr();
    p.dweight = out.dweight.data_ptr();
  }
  p.dy = dy.data_ptr();
  p.x = x.data_ptr();
  p.weight = weight.data_ptr();
  p.dx = out.dx.data_ptr();
  p.rows = rows;
  p.cols = cols;
  p.dy_row_stride = p.x_row_stride = p.dx_row_stride = cols;
  rmsnorm_backward(p, current_stream());
  return out;
}

}  // namespace studio::kernels
