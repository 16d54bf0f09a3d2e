#include "studio/trainer/optim/master_weights.h"

namespace studio::trainer {

MasterWeights::MasterWeights(const NamedTensors& model_params) : model_(model_params) {
  for (const auto& [name, p] : model_)
    if (p.scalar_type() != torch::kFloat) separate_ = true;
  if (!separate_) {
    masters_ = model_;
    return;
  }
  torch::NoGradGuard no_grad;
  for (const auto& [name, p] : model_)
    masters_.emplace_back(name, p.detach().to(torch::kFloat).clone().requires_grad_(true));
}

void MasterWeights::accumulate_grads() {
  if (!separate_) return;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < model_.size(); ++i) {
    auto& p = model_[i].second;
    const torch::Tensor g = p.grad();
    if (!g.defined()) continue;
    auto& master = masters_[i].second;
    if (master.grad().defined())
      master.mutable_grad().add_(g);  // bf16 -> fp32 in the add, no bf16 sum
    else
      master.mutable_grad() = g.to(torch::kFloat);
    p.mutable_grad() = torch::Tensor();
  }
}

void MasterWeights::scatter_weights() {
  if (!separate_) return;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < model_.size(); ++i) {
    auto& p = model_[i].second;
    p.copy_(masters_[i].second);
    p.mutable_grad() = torch::Tensor();
  }
}

}  // namespace studio::trainer
