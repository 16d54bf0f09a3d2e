#pragma once
// Preference losses as LLaMA-Factory's DPO trainer computes them, as pure functions of per-pair
// log-prob sums: TRL's dpo_loss (sigmoid, ipo, hinge and, from TRL < 0.9, kto_pair), LF's own
// reference-free orpo and simpo, LF's length normalisation for ipo, orpo and simpo, and its SFT
// term.
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
  PrefLoss loss = PrefLoss::Sigmoid;  // sigmoid | ipo | hinge | orpo | simpo | kto_pair
  double beta = 0.1;                  // pref_beta; must be > 0
  double label_smoothing = 0;         // dpo_label_smoothing; applies to sigmoid only (as in TRL)
  double ftx = 0;                     // pref_ftx: weight of the SFT term, added when > 1e-6 (LF)
  double simpo_gamma = 0.5;           // simpo_gamma: SimPO's target reward margin (simpo only)
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
  kSftLoss,        // -(the chosen log-prob per token), summed (LF logs its mean for orpo)
  kOddsRatioLoss,  // (loss - that SFT loss) / beta, summed (LF's orpo odds_ratio_loss)
  kPrefMetricCount
};

struct PrefLossOut {
  torch::Tensor losses;  // [N] per pair, differentiable w.r.t. the policy logps, ftx term included
  // [N] detached: beta * (policy - reference), or beta * policy for orpo and simpo (LF's rewards
  // of its reference-free losses).
  torch::Tensor chosen_rewards, rejected_rewards;
  // [N] detached: the policy log-probs the loss compared. Sums, except for ipo, orpo and simpo,
  // where they are the per-token means (LF logs the normalised ones as logps/chosen, /rejected).
  torch::Tensor chosen_logps, rejected_logps;
  // [kPrefMetricCount] fp64, detached: the metrics summed over the N pairs. All-reduce (SUM)
  // it across DP and divide by the global pair count with dpo_metrics().
  torch::Tensor metric_sums;
};

// The per-pair preference loss, ftx * (-chosen log-prob per token) added to each pair when
// ftx > 1e-6. With c, r the policy's and rc, rr the reference's log-probs of the chosen and
// rejected responses (per-token means for ipo, orpo and simpo, sums otherwise):
//   orpo      -c + beta * -logsigmoid(log_odds),
//             log_odds = (c - r) - (log(1 - exp(c)) - log(1 - exp(r)))
//   simpo     -logsigmoid(beta * ((c - r) - simpo_gamma / beta))
//   kto_pair  (l_chosen + l_rejected) / 2 with l_chosen = 1 - sigmoid(beta * ((c - rc) - KL_r)),
//             l_rejected = 1 - sigmoid(beta * (KL_c - (r - rr))), KL_c = max(0, mean(c - rc)),
//             KL_r = max(0, mean(r - rr)): TRL < 0.9's kto_pair, whose loss is the mean of the
//             2N halves. The means run over the N pairs given here, which makes the pairs'
//             losses depend on each other: pass one micro-batch (TRL: one device batch). The KL
//             terms are not detached (as TRL), so each pair's gradient has a share of the
//             others'.
// orpo and simpo read no reference: `reference` may be undefined for them (it is not read).
// Every other loss throws std::invalid_argument when reference.chosen or .rejected is missing.
//
// Empty responses (no valid tokens, sum 0): the per-token mean is 0 / max(len, 1) = 0, so every
// loss is finite with finite gradients, and an empty chosen response adds no SFT term. For orpo
// a mean of 0 would be probability 1 (odds infinite): a pair with an empty chosen or rejected
// response contributes no odds-ratio term (0, no gradient), only its -c (0 when the chosen one is
// empty). A non-empty response whose mean is exactly 0 (every token at probability 1 in the
// compute precision) counts as mean -m, m the dtype's smallest normal number: its odds are large
// but finite (log m = -708 in fp64).
// log(1 - exp(x)) is computed as log(-expm1(x)): accurate near 0 (c = -1e-9), and for very negative
// means (c = -80) as accurate as it needs to be next to the O(1) terms it is added to.
//
// Throws std::invalid_argument for mismatched shapes or beta <= 0.
PrefLossOut preference_loss(const PairLogps& policy, const PairLogps& reference,
                            const PrefLossOptions& options);

// Per-row sum of the target log-probs ([R, S], e.g. from lm_target_logprobs) over the positions
// whose target is not kIgnoreIndex, and the number of such positions: {sums [R], counts [R] int64}.
// The sums keep the gradient of token_logps.
std::pair<torch::Tensor, torch::Tensor> sequence_logps(const torch::Tensor& token_logps,
                                                       const torch::Tensor& targets);

// The step metrics: metric_sums (all-reduced or not) divided by `pairs`; all kNoValue when
// pairs <= 0. sft_loss and odds_ratio_loss only for `loss` orpo (LF logs them for it alone).
DpoMetrics dpo_metrics(const torch::Tensor& metric_sums, int64_t pairs, PrefLoss loss);

}  // namespace studio::trainer::dpo
