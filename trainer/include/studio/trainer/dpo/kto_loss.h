#pragma once
// KTO's loss as LLaMA-Factory's stage kto computes it (its CustomKTOTrainer over TRL 0.24's
// KTOTrainer.kto_loss), as a pure function of per-example log-prob sums of one micro-batch.
//
// With beta = pref_beta, c / r the policy's minus the reference's log-prob sums of a desirable /
// undesirable example's response (TRL's chosen / rejected log-ratios), and z the KL estimate:
//   desirable     kto_chosen_weight   * (1 - sigmoid(beta * (c - z)))
//   undesirable   kto_rejected_weight * (1 - sigmoid(beta * (z - r)))
//   z = max(0, mean over the DP ranks of mean over the rank's micro-batch of
//           (policy - reference) log-prob sums of the mismatched (KL) responses), detached
// The micro-batch's loss is the mean of its examples' losses (LF: nanmean), plus, when pref_ftx
// > 1e-6 and there is a desirable example, pref_ftx x the mean over the desirable examples of
// -(their log-prob per response token) x n / n_desirable (LF's rescaling: n the micro-batch's
// examples). Rewards: beta x the log-ratios, detached.
//
// Under sequence parallelism the caller sums every rank's partial log-prob sums over the SP group
// (identity backward) first; the KL needs every DP rank's micro-batch mean (a DP all-reduce the
// caller runs, every rank, every micro-batch).
#include <cstdint>

#include <torch/torch.h>

#include "studio/config/run_config.h"

namespace studio::trainer::dpo {

struct KtoOptions {
  double beta = 0.1;             // pref_beta; > 0
  double chosen_weight = 1.0;    // kto_chosen_weight
  double rejected_weight = 1.0;  // kto_rejected_weight
  double ftx = 0;                // pref_ftx, added when > 1e-6 (LF)
  static KtoOptions from(const RunConfig& cfg);
};

// One micro-batch of n examples, every tensor [n].
struct KtoBatch {
  torch::Tensor policy;      // log-prob sums of each example's response (differentiable)
  torch::Tensor reference;   // the reference's
  torch::Tensor length;      // valid response tokens of each example
  torch::Tensor desirable;   // bool
};

// Positions in KtoLossOut::metric_sums.
enum KtoMetric : int64_t {
  kKtoRewardsChosen,    // sum of beta x log-ratio over the desirable examples
  kKtoRewardsRejected,  // over the undesirable ones
  kKtoLogpsChosen,      // sum of the policy's log-prob sums, desirable
  kKtoLogpsRejected,    // undesirable
  kKtoCountChosen,      // desirable examples
  kKtoCountRejected,    // undesirable examples
  kKtoMetricCount
};

struct KtoLossOut {
  torch::Tensor loss;         // 0-dim: the micro-batch's loss (a mean, as LF's), differentiable
  torch::Tensor losses;       // [n] each example's weighted loss, differentiable
  torch::Tensor rewards;      // [n] beta x log-ratio, detached
  torch::Tensor metric_sums;  // [kKtoMetricCount] fp64, detached
};

// The KL estimate from one micro-batch: mean(policy_kl - reference_kl), detached ([n] each). The
// caller averages it over the DP ranks and passes it, clamped at 0 (kto_kl_clamp), to kto_loss.
torch::Tensor kto_kl_local(const torch::Tensor& policy_kl, const torch::Tensor& reference_kl);
torch::Tensor kto_kl_clamp(const torch::Tensor& kl_mean);

// Throws std::invalid_argument for mismatched shapes, an empty batch or beta <= 0.
KtoLossOut kto_loss(const KtoBatch& batch, const torch::Tensor& kl, const KtoOptions& options);

}  // namespace studio::trainer::dpo
