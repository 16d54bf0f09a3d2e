#include "studio/trainer/model/layers.h"

#include <stdexcept>

#if STUDIO_TRAINER_FUSED_KERNELS
#include "studio/kernels/rmsnorm_torch.h"
#endif

namespace studio::trainer {
namespace {
thread_local bool g_deferred = false;
thread_local bool g_adapters_off = false;
}  // namespace

AdaptersDisabled::AdaptersDisabled() : previous_(g_adapters_off) { g_adapters_off = true; }
AdaptersDisabled::~AdaptersDisabled() { g_adapters_off = previous_; }
bool adapters_disabled() { return g_adapters_off; }

DeferredAllocation::DeferredAllocation() : previous_(g_deferred) { g_deferred = true; }
DeferredAllocation::~DeferredAllocation() { g_deferred = previous_; }

torch::Tensor new_parameter(at::IntArrayRef sizes, const torch::TensorOptions& options) {
  if (!g_deferred) return torch::empty(sizes, options);
  auto t = torch::empty({0}, options);
  t.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
  return t;
}

int64_t allocate_deferred(torch::nn::Module& module) {
  torch::NoGradGuard no_grad;
  int64_t count = 0;
  for (auto& p : module.parameters(/*recurse=*/true)) {
    const auto needed = static_cast<size_t>(p.numel()) * p.element_size();
    if (needed == 0 || (p.storage() && p.storage().nbytes() >= needed)) continue;
    p.set_data(torch::empty(p.sizes(), p.options()));
    ++count;
  }
  return count;
}

LinearImpl::LinearImpl(int64_t in_features, int64_t out_features, bool bias,
                       const torch::TensorOptions& options)
    : in_features_(in_features), out_features_(out_features), options_(options) {
  weight = register_parameter("weight", new_parameter({out_features, in_features}, options));
  if (bias) this->bias = register_parameter("bias", new_parameter({out_features}, options));
}

void LinearImpl::quantize_weight(const Quant4Options& opt, const torch::Tensor& source) {
  if (quant) return;
  if (source.sizes() != weight.sizes())
    throw std::invalid_argument("quantize_weight: the source is " + c10::str(source.sizes()) +
                                ", the weight " + c10::str(weight.sizes()));
  set_quantized_weight(Quant4Weight::quantize(source, opt, weight.device()));
}

void LinearImpl::set_quantized_weight(c10::intrusive_ptr<Quant4Weight> q) {
  if (quant) throw std::invalid_argument("set_quantized_weight: the weight is quantized already");
  if (q->shape() != std::vector<int64_t>{out_features_, in_features_})
    throw std::invalid_argument("set_quantized_weight: the 4-bit weight is " +
                                c10::str(c10::IntArrayRef(q->shape())) + ", the weight [" +
                                std::to_string(out_features_) + ", " +
                                std::to_string(in_features_) + "]");
  quant = std::move(q);
  parameters_.erase("weight");
  weight = torch::Tensor();
}

torch::Tensor LinearImpl::base_product(const torch::Tensor& x) {
  return quant ? quant4_linear(x, quant) : torch::linear(x, weight);
}

torch::Tensor LinearImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = quant ? (bias.defined() ? quant4_linear(x, quant) + bias : quant4_linear(x, quant))
                          : torch::linear(x, weight, bias);
  if (!lora_A || g_adapters_off) return y;
  return adapter_forward(x, y);
}

torch::Tensor LinearImpl::adapter_forward(const torch::Tensor& x, const torch::Tensor& y) {
  // Dropout in the forwards that train (HF's train mode); evaluation and reference forwards run
  // without gradients and without it.
  const bool drop = lora_dropout > 0 && torch::GradMode::is_enabled();
  const torch::Tensor xd = drop ? torch::dropout(x, lora_dropout, /*train=*/true) : x;
  const torch::Tensor lora = torch::linear(torch::linear(xd, lora_A->weight), lora_B->weight);
  if (!lora_magnitude_vector.defined()) return y + lora * lora_scaling;
  // DoRA: the norm of every row of W + s BA, detached (as PEFT: no gradient through it).
  torch::Tensor norm;
  {
    torch::NoGradGuard no_grad;
    const torch::Tensor w = quant ? quant->dequantize(torch::kFloat) : weight;
    const auto compute = w.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
    const torch::Tensor merged =
        w.to(compute) + torch::mm(lora_B->weight.to(compute), lora_A->weight.to(compute)) *
                            lora_scaling;
    norm = merged.norm(2, /*dim=*/{1}).to(y.scalar_type());
  }
  const torch::Tensor scale = lora_magnitude_vector / norm;  // [out]
  // Without dropout the base result is y less the bias; with it, x' W^T.
  const torch::Tensor base = drop ? base_product(xd) : (bias.defined() ? y - bias : y);
  return y + (scale - 1) * base + scale * lora * lora_scaling;
}

EmbeddingImpl::EmbeddingImpl(int64_t vocab, int64_t hidden, int64_t padding_idx,
                             const torch::TensorOptions& options)
    : padding_idx(padding_idx) {
  weight = register_parameter("weight", new_parameter({vocab, hidden}, options));
}

torch::Tensor EmbeddingImpl::forward(const torch::Tensor& ids) {
  return torch::embedding(weight, ids, padding_idx);
}

RMSNormImpl::RMSNormImpl(int64_t dim, double eps, const torch::TensorOptions& options,
                         bool unit_offset)
    : eps(eps), unit_offset(unit_offset) {
  weight = register_parameter("weight", new_parameter({dim}, options));
}

namespace {

torch::ScalarType norm_compute_dtype(const torch::Tensor& x) {
  return x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

#if STUDIO_TRAINER_FUSED_KERNELS
bool norm_kernel_applies(const torch::Tensor& x, const torch::Tensor& w) {
  auto ok = [](const torch::Tensor& t) {
    return t.is_cuda() && (t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kBFloat16);
  };
  return ok(x) && ok(w) && x.device() == w.device();
}
#endif

// HF's LlamaRMSNorm, in the compute dtype: weight * (x * rsqrt(mean(x^2) + eps)).to(x.dtype).
// Returns y and the per-row 1/rms [rows, 1] in the compute dtype.
std::pair<torch::Tensor, torch::Tensor> rms_norm_forward(const torch::Tensor& x,
                                                         const torch::Tensor& w, double eps) {
  const torch::Tensor xc = x.to(norm_compute_dtype(x));
  const torch::Tensor r = torch::rsqrt(xc.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return {w * (xc * r).to(x.scalar_type()), r};
}

// Autograd keeps only the input (in its own dtype: a tensor the model holds anyway, or one
// value per element) and the fp32 1/rms of each row; the backward recomputes the normalised
// rows from them. (Autograd through the ops above would keep an fp32 copy of the input and the
// normalised output as well.) On CUDA, fp32 and bf16 run the fused kernels of kernels/.
struct RmsNormFunction : torch::autograd::Function<RmsNormFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& w, double eps) {
    ctx->saved_data["eps"] = eps;
#if STUDIO_TRAINER_FUSED_KERNELS
    if (norm_kernel_applies(x, w)) {
      const torch::Tensor xc = x.contiguous();
      auto out = kernels::rmsnorm_forward(xc, w.contiguous(), eps);
      ctx->save_for_backward({xc, w, out.rstd});
      return out.y;
    }
#endif
    auto [y, r] = rms_norm_forward(x, w, eps);
    ctx->save_for_backward({x, w, r});
    return y;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w = saved[1], &r = saved[2];
    const double eps = ctx->saved_data["eps"].toDouble();
#if STUDIO_TRAINER_FUSED_KERNELS
    if (norm_kernel_applies(x, w)) {
      auto g = kernels::rmsnorm_backward(grads[0].contiguous(), x, w, r, eps, w.requires_grad());
      return {g.dx, g.dweight, torch::Tensor()};
    }
#endif
    (void)eps;
    const auto compute = norm_compute_dtype(x);
    const torch::Tensor n = x.to(compute) * r;  // the normalised rows, in the compute dtype
    const torch::Tensor dy = grads[0].to(compute);
    torch::Tensor dw;
    if (w.requires_grad()) {
      // y = w * n.to(dtype): the weight's gradient sums dy times the rounded normalised rows.
      const torch::Tensor rounded = n.to(x.scalar_type()).to(compute);
      dw = (dy * rounded).reshape({-1, x.size(-1)}).sum(0).to(w.scalar_type());
    }
    const torch::Tensor dn = dy * w.to(compute);
    const torch::Tensor dx = r * (dn - n * (dn * n).mean(-1, /*keepdim=*/true));
    return {dx.to(x.scalar_type()), dw, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  if (unit_offset) {  // Gemma: the weight multiplies in fp32, before the rounding
    const auto compute = norm_compute_dtype(x);
    const torch::Tensor xc = x.to(compute);
    const torch::Tensor n = xc * torch::rsqrt(xc.pow(2).mean(-1, /*keepdim=*/true) + eps);
    return (n * (weight.to(compute) + 1.0)).to(x.scalar_type());
  }
  if (torch::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad()))
    return RmsNormFunction::apply(x, weight, eps);
#if STUDIO_TRAINER_FUSED_KERNELS
  // The same kernel as with grad: a checkpointed layer's recompute repeats its forward exactly.
  if (norm_kernel_applies(x, weight))
    return kernels::rmsnorm_forward(x.contiguous(), weight.contiguous(), eps).y;
#endif
  return rms_norm_forward(x, weight, eps).first;
}

}  // namespace studio::trainer
