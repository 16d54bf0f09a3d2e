#include "studio/trainer/dpo/kto_loss.h"

#include <stdexcept>

namespace studio::trainer::dpo {

KtoOptions KtoOptions::from(const RunConfig& cfg) {
  KtoOptions o;
  o.beta = cfg.pref_beta;
  o.chosen_weight = cfg.kto_chosen_weight;
  o.rejected_weight = cfg.kto_rejected_weight;
  o.ftx = cfg.pref_ftx;
  return o;
}

torch::Tensor kto_kl_local(const torch::Tensor& policy_kl, const torch::Tensor& reference_kl) {
  if (policy_kl.sizes() != reference_kl.sizes() || policy_kl.numel() == 0)
    throw std::invalid_argument("kto_kl_local: the policy's and the reference's KL log-probs "
                                "must be non-empty and of one shape");
  return (policy_kl.detach().to(torch::kDouble) - reference_kl.detach().to(torch::kDouble)).mean();
}

torch::Tensor kto_kl_clamp(const torch::Tensor& kl_mean) { return kl_mean.clamp_min(0); }

KtoLossOut kto_loss(const KtoBatch& b, const torch::Tensor& kl, const KtoOptions& o) {
  if (o.beta <= 0) throw std::invalid_argument("kto_loss: beta must be positive");
  const auto n = b.policy.numel();
  if (n == 0 || b.reference.numel() != n || b.length.numel() != n || b.desirable.numel() != n)
    throw std::invalid_argument("kto_loss: policy, reference, length and desirable must be "
                                "non-empty [n] tensors of one size");
  const torch::Tensor policy = b.policy.to(torch::kDouble);
  const torch::Tensor ratio = policy - b.reference.to(policy.device(), torch::kDouble).detach();
  const torch::Tensor z = kl.to(policy.device(), torch::kDouble).detach();
  const torch::Tensor good = b.desirable.to(policy.device(), torch::kBool);
  const torch::Tensor chosen = o.chosen_weight * (1 - torch::sigmoid(o.beta * (ratio - z)));
  const torch::Tensor rejected = o.rejected_weight * (1 - torch::sigmoid(o.beta * (z - ratio)));
  KtoLossOut out;
  out.losses = torch::where(good, chosen, rejected);
  out.loss = out.losses.mean();
  const torch::Tensor goodf = good.to(torch::kDouble);
  const torch::Tensor n_good = goodf.sum();
  if (o.ftx > 1e-6) {
    // LF: ftx * nanmean(-chosen_logps / chosen_len) / n_chosen * n, only with desirable examples
    // (added as 0 otherwise). A response without tokens is 0/0 there, left out by the nanmean.
    const torch::Tensor len = b.length.to(policy.device(), torch::kDouble);
    const torch::Tensor counted = goodf * (len > 0).to(torch::kDouble);
    const torch::Tensor sft =
        (-(policy / len.clamp_min(1)) * counted).sum() / counted.sum().clamp_min(1);
    out.loss = out.loss +
               torch::where(n_good > 0, o.ftx * sft / n_good.clamp_min(1) * static_cast<double>(n),
                            torch::zeros_like(sft));
  }
  torch::NoGradGuard no_grad;
  out.rewards = (o.beta * ratio).detach();
  const torch::Tensor badf = 1 - goodf;
  const torch::Tensor p = policy.detach();
  out.metric_sums = torch::stack({(out.rewards * goodf).sum(), (out.rewards * badf).sum(),
                                  (p * goodf).sum(), (p * badf).sum(), n_good, badf.sum()})
                        .to(torch::kDouble);
  return out;
}

}  // namespace studio::trainer::dpo
