#pragma once
// DPO preference losses as LLaMA-Factory's DPO trainer computes them (TRL's dpo_loss plus LF's
// length normalisation for ipo and its SFT term), as pure functions of per-pair log-prob sums.
//
// Under sequence parallelism each rank holds part of every response: the caller all-reduces the
// partial sums and the valid-token counts across the SP group (identity backward) and then calls
// preference_loss() with the GLOBAL numbers on every rank. Nothing here divides by a local length.
#include <cstdint>
#include <utility>

#include <torch/torch.h>

#include "studio/runs/events.h"
#include "studio/config/run_config.h"

namespace studio::trainer::dpo {

struct PrefLossOptions {
  PrefLoss loss = PrefLoss::Sigmoid;  // sigmoid | ipo | hinge
  double beta = 0.1;                  // pref_beta; must be > 0
  double label_smoothing = 0;         // dpo_label_smoothing; applies to sigmoid only (as in TRL)
  double ftx = 0;                     // pref_ftx: weight of the SFT term added to each pair's loss
  static PrefLossOptions from(const RunConfig& cfg);
};

// One model's view of N pairs. All four are [N]: sums of target log-probs over each response
// (for the policy: differentiable) and the number of valid target tokens summed (any dtype).
struct PairLogps {
  torch::Tensor chosen, rejected;
  torch::Tensor chosen_len, rejected_len;
};

// Positions in PrefLossOut::metric_sums, in docs/events.md order.
enum PrefMetric : int64_t {
  kRewardsChosen,
  kRewardsRejected,
  kRewardsAccuracies,  // count of pairs whose chosen reward beats the rejected one
  kRewardsMargins,
  kLogpsChosen,
  kLogpsRejected,
  kPrefMetricCount
};

struct PrefLossOut {
  torch::Tensor losses;  // [N] per pair, differentiable w.r.t. the policy logps, ftx term included
  torch::Tensor chosen_rewards, rejected_rewards;  // [N] beta * (policy - reference), detached
  // [N] detached: the policy log-probs the loss compared. Sums, except for ipo, where they are
  // the per-token means (LF's logps/chosen and logps/rejected for ipo are the normalised ones).
  torch::Tensor chosen_logps, rejected_logps;
  // [kPrefMetricCount] fp64, detached: the six metrics summed over the N pairs. All-reduce (SUM)
  // it across DP and divide by the global pair count with dpo_metrics().
  torch::Tensor metric_sums;
};

// The per-pair DPO loss. A response without valid tokens has log-prob sum 0 and is normalised as
// 0 / max(len, 1) = 0, so it gives finite losses and gradients (and no SFT term) instead of NaN.
// Throws std::invalid_argument for mismatched shapes or beta <= 0.
PrefLossOut preference_loss(const PairLogps& policy, const PairLogps& reference,
                            const PrefLossOptions& options);

// Per-row sum of the target log-probs ([R, S], e.g. from lm_target_logprobs) over the positions
// whose target is not kIgnoreIndex, and the number of such positions: {sums [R], counts [R] int64}.
// The sums keep the gradient of token_logps.
std::pair<torch::Tensor, torch::Tensor> sequence_logps(const torch::Tensor& token_logps,
                                                       const torch::Tensor& targets);

// The six step metrics: metric_sums (all-reduced or not) divided by `pairs`; all kNoValue when
// pairs <= 0.
DpoMetrics dpo_metrics(const torch::Tensor& metric_sums, int64_t pairs);

}  // namespace studio::trainer::dpo
