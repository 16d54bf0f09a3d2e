#include "studio/trainer/model/layers.h"

namespace studio::trainer {
namespace {
thread_local bool g_deferred = false;
}  // namespace

DeferredAllocation::DeferredAllocation() : previous_(g_deferred) { g_deferred = true; }
DeferredAllocation::~DeferredAllocation() { g_deferred = previous_; }

torch::Tensor new_parameter(at::IntArrayRef sizes, const torch::TensorOptions& options) {
  if (!g_deferred) return torch::empty(sizes, options);
  auto t = torch::empty({0}, options);
  t.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
  return t;
}

LinearImpl::LinearImpl(int64_t in_features, int64_t out_features, bool bias,
                       const torch::TensorOptions& options) {
  weight = register_parameter("weight", new_parameter({out_features, in_features}, options));
  if (bias) this->bias = register_parameter("bias", new_parameter({out_features}, options));
}

torch::Tensor LinearImpl::forward(const torch::Tensor& x) {
  return torch::linear(x, weight, bias);
}

EmbeddingImpl::EmbeddingImpl(int64_t vocab, int64_t hidden, int64_t padding_idx,
                             const torch::TensorOptions& options)
    : padding_idx(padding_idx) {
  weight = register_parameter("weight", new_parameter({vocab, hidden}, options));
}

torch::Tensor EmbeddingImpl::forward(const torch::Tensor& ids) {
  return torch::embedding(weight, ids, padding_idx);
}

RMSNormImpl::RMSNormImpl(int64_t dim, double eps, const torch::TensorOptions& options) : eps(eps) {
  weight = register_parameter("weight", new_parameter({dim}, options));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  const auto compute = x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
  const torch::Tensor xc = x.to(compute);
  const torch::Tensor normed = xc * torch::rsqrt(xc.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return weight * normed.to(x.scalar_type());
}

}  // namespace studio::trainer
