#include "studio/trainer/optim/adamw.h"

namespace studio::trainer {

bool decays(const std::string& name) {
  const bool bias = name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
  const bool norm = name.find("norm") != std::string::npos;
  return !bias && !norm;
}

std::unique_ptr<torch::optim::AdamW> make_adamw(const NamedTensors& params, const RunConfig& cfg) {
  std::vector<torch::Tensor> with_decay, without_decay;
  for (const auto& [name, p] : params) {
    if (!p.requires_grad()) continue;
    (decays(name) ? with_decay : without_decay).push_back(p);
  }
  auto options = [&](double decay) {
    auto o = std::make_unique<torch::optim::AdamWOptions>(cfg.learning_rate);
    o->betas({cfg.adam_beta1, cfg.adam_beta2}).eps(cfg.adam_epsilon).weight_decay(decay);
    return o;
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  if (!with_decay.empty()) groups.emplace_back(with_decay, options(cfg.weight_decay));
  if (!without_decay.empty()) groups.emplace_back(without_decay, options(0.0));
  auto defaults = torch::optim::AdamWOptions(cfg.learning_rate);
  defaults.betas({cfg.adam_beta1, cfg.adam_beta2}).eps(cfg.adam_epsilon).weight_decay(0.0);
  return std::make_unique<torch::optim::AdamW>(std::move(groups), defaults);
}

void set_learning_rate(torch::optim::Optimizer& opt, double lr) {
  for (auto& group : opt.param_groups())
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
}

}  // namespace studio::trainer
