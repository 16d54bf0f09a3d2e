// Adapts tensors to the fused linear + cross-entropy kernel: checks what the core cannot see
// (device, dtype, shape, contiguity), allocates its outputs and workspace from the caching
// allocator on the current stream, and enqueues there with LibTorch's cuBLAS handle.
#include "studio/kernels/fused_linear_ce_torch.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cmath>

namespace studio::kernels {
namespace {

void check_cuda(const at::Tensor& t, const char* name, const at::Tensor& x) {
  TORCH_CHECK(t.defined(), "fused_linear_ce: ", name, " is undefined");
  TORCH_CHECK(t.is_cuda(), "fused_linear_ce: ", name, " must be a CUDA tensor, got ", t.device());
  TORCH_CHECK(t.device() == x.device(), "fused_linear_ce: ", name, " is on ", t.device(),
              " but x is on ", x.device());
  TORCH_CHECK(t.is_contiguous(), "fused_linear_ce: ", name, " must be contiguous");
}

}  // namespace

FusedLinearCeTorchOutputs fused_linear_ce(const at::Tensor& x, const at::Tensor& weight,
                                          const at::Tensor& targets, FusedLinearCeWants wants,
                                          std::int64_t chunk_tokens,
                                          double grad_scale, std::int64_t ignore_index) {
  check_cuda(x, "x", x);
  check_cuda(weight, "weight", x);
  check_cuda(targets, "targets", x);
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && x.size(1) == weight.size(1),
              "fused_linear_ce: x ", x.sizes(), " and weight ", weight.sizes(),
              " must be [tokens, hidden] and [vocab, hidden]");
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == x.size(0), "fused_linear_ce: targets ",
              targets.sizes(), " must be [", x.size(0), "]");
  TORCH_CHECK(targets.scalar_type() == at::kLong, "fused_linear_ce: targets must be int64");
  TORCH_CHECK(x.scalar_type() == weight.scalar_type() &&
                  (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16),
              "fused_linear_ce: x and weight must both be float32 or both bfloat16, got ",
              x.scalar_type(), " and ", weight.scalar_type());
  TORCH_CHECK(std::isfinite(grad_scale), "fused_linear_ce: grad_scale must be finite");
  const c10::cuda::CUDAGuard guard(x.device());

  FusedLinearCeParams p;
  p.shape = {x.size(0), x.size(1), weight.size(0)};
  p.ignore_index = ignore_index;
  p.chunk_tokens = chunk_tokens;
  p.grad_scale = static_cast<float>(grad_scale);
  p.dtype = x.scalar_type() == at::kFloat ? DType::kFloat32 : DType::kBFloat16;
  const bool with_grads = wants.grad_x || wants.grad_weight;
  const auto f32 = x.options().dtype(at::kFloat);
  FusedLinearCeTorchOutputs out;
  out.loss_sum = at::empty({}, f32);
  if (wants.logprobs) out.target_logprobs = at::empty({p.shape.tokens}, f32);
  if (wants.grad_x) out.grad_x = at::empty_like(x, at::MemoryFormat::Contiguous);
  if (wants.grad_weight) out.grad_weight = at::empty({p.shape.vocab, p.shape.hidden}, f32);
  if (p.shape.tokens == 0) {  // no launch for no rows; the sums are well-defined zeros
    out.loss_sum.zero_();
    if (wants.grad_weight) out.grad_weight.zero_();
    return out;
  }
  validate_linear_ce_shape(p.shape, p.chunk_tokens, p.ignore_index);
  p.workspace_bytes = fused_linear_ce_workspace_bytes(p.shape, p.chunk_tokens, p.dtype, with_grads);
  // From the caching allocator on the current stream: handed out again only in stream order.
  const at::Tensor workspace = at::empty(
      {static_cast<std::int64_t>((p.workspace_bytes + 255) / 256 * 256)}, x.options().dtype(at::kByte));
  p.workspace = workspace.data_ptr();
  p.x = x.data_ptr();
  p.weight = weight.data_ptr();
  p.targets = targets.data_ptr<std::int64_t>();
  p.loss_sum = out.loss_sum.data_ptr<float>();
  if (wants.logprobs) p.target_logprobs = out.target_logprobs.data_ptr<float>();
  if (wants.grad_x) p.grad_x = out.grad_x.data_ptr();
  if (wants.grad_weight) p.grad_weight = out.grad_weight.data_ptr<float>();
  fused_linear_ce(p, at::cuda::getCurrentCUDABlasHandle(),
                  c10::cuda::getCurrentCUDAStream().stream());
  return out;
}

}  // namespace studio::kernels
