#include "studio/trainer/dpo/preference_loss.h"

#include <limits>
#include <stdexcept>
#include <string>

#include "studio/trainer/batching/batch.h"

namespace studio::trainer::dpo {
namespace {

// LF adds the SFT term when pref_ftx > 1e-6.
constexpr double kFtxThreshold = 1e-6;

void check_pairs(const PairLogps& p, const char* which, int64_t n) {
  const std::pair<const torch::Tensor*, const char*> parts[] = {
      {&p.chosen, "chosen"}, {&p.rejected, "rejected"},
      {&p.chosen_len, "chosen_len"}, {&p.rejected_len, "rejected_len"}};
  for (const auto& [t, name] : parts) {
    if (!t->defined() || t->dim() != 1 || t->size(0) != n)
      throw std::invalid_argument(std::string("preference_loss: ") + which + "." + name +
                                  " must be a defined [N] tensor with N = " + std::to_string(n));
  }
}

// Where and how the sums are compared: the policy's device, fp64 when given fp64, otherwise fp32
// (never bf16).
torch::TensorOptions compute_options(const torch::Tensor& t) {
  return t.options().dtype(t.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat);
}

// An empty response counts as length 1 so its (zero) sum normalises to 0, not NaN.
torch::Tensor per_token(const torch::Tensor& sum, const torch::Tensor& len) {
  return sum / len.to(sum.options()).clamp_min(1);
}

// LF's loss types that compare per-token means instead of sums (its concatenated_forward).
bool per_token_loss(PrefLoss loss) {
  return loss == PrefLoss::Ipo || loss == PrefLoss::Orpo || loss == PrefLoss::Simpo;
}

// LF's use_ref_model: orpo and simpo read the policy alone.
bool reads_reference(PrefLoss loss) { return loss != PrefLoss::Orpo && loss != PrefLoss::Simpo; }

// ORPO's per-pair -logsigmoid(log odds ratio) on per-token means c, r (see the header for empty
// responses). log(1 - exp(x)) as log(-expm1(x)): no cancellation near 0, and its absolute error
// stays at rounding level for very negative x, which is what matters next to c - r.
torch::Tensor odds_ratio_term(const torch::Tensor& c, const torch::Tensor& r,
                              const torch::Tensor& empty_pair) {
  // A mean of 0 (an empty response, or every token at probability 1) moves to the dtype's
  // smallest normal number below 0: log(1 - exp(x)) stays finite, and so does its gradient,
  // which the clamp stops there (an empty pair's term is dropped below anyway).
  const double below_zero = -(c.scalar_type() == torch::kDouble
                                  ? std::numeric_limits<double>::min()
                                  : static_cast<double>(std::numeric_limits<float>::min()));
  const auto sc = c.clamp_max(below_zero), sr = r.clamp_max(below_zero);
  auto log1mexp = [](const torch::Tensor& x) { return torch::log(-torch::expm1(x)); };
  const auto log_odds = (sc - sr) - (log1mexp(sc) - log1mexp(sr));
  return (-torch::log_sigmoid(log_odds)).masked_fill(empty_pair, 0);
}

// TRL < 0.9's kto_pair on sums, as the per-pair mean of its chosen and rejected halves.
torch::Tensor kto_pair_losses(const torch::Tensor& chosen_logratios,
                              const torch::Tensor& rejected_logratios, double beta) {
  const auto chosen_kl = chosen_logratios.mean().clamp_min(0);
  const auto rejected_kl = rejected_logratios.mean().clamp_min(0);
  const auto chosen_half = 1 - torch::sigmoid(beta * (chosen_logratios - rejected_kl));
  const auto rejected_half = 1 - torch::sigmoid(beta * (chosen_kl - rejected_logratios));
  return (chosen_half + rejected_half) / 2;
}

}  // namespace

PrefLossOptions PrefLossOptions::from(const RunConfig& cfg) {
  PrefLossOptions o;
  o.loss = cfg.pref_loss;
  o.beta = cfg.pref_beta;
  o.label_smoothing = cfg.dpo_label_smoothing;
  o.ftx = cfg.pref_ftx;
  o.simpo_gamma = cfg.simpo_gamma;
  return o;
}

PrefLossOut preference_loss(const PairLogps& policy, const PairLogps& reference,
                            const PrefLossOptions& options) {
  if (!policy.chosen.defined() || policy.chosen.dim() != 1)
    throw std::invalid_argument("preference_loss: policy.chosen must be a defined [N] tensor");
  const int64_t n = policy.chosen.size(0);
  check_pairs(policy, "policy", n);
  const bool with_reference = reads_reference(options.loss);
  if (with_reference) {
    if (!reference.chosen.defined() || !reference.rejected.defined())
      throw std::invalid_argument(
          "preference_loss: this pref_loss compares the policy with the reference model, but "
          "reference.chosen or reference.rejected is undefined (only orpo and simpo run without "
          "a reference)");
    check_pairs(reference, "reference", n);
  }
  if (!(options.beta > 0))
    throw std::invalid_argument("preference_loss: pref_beta must be > 0, got " +
                                std::to_string(options.beta));

  const auto opts = compute_options(policy.chosen);
  auto pc = policy.chosen.to(opts);
  auto pr = policy.rejected.to(opts);
  // orpo and simpo: a zero reference, so that the rewards below are beta * policy (LF's).
  auto rc = with_reference ? reference.chosen.detach().to(opts) : torch::zeros_like(pc);
  auto rr = with_reference ? reference.rejected.detach().to(opts) : torch::zeros_like(pr);
  // LF's SFT term is the policy's mean log-prob per chosen token, whatever the loss type.
  const auto chosen_mean = per_token(pc, policy.chosen_len);
  if (per_token_loss(options.loss)) {
    // LF normalises by the response length before the loss (for both models).
    pc = chosen_mean;
    pr = per_token(pr, policy.rejected_len);
    if (with_reference) {
      rc = per_token(rc, reference.chosen_len);
      rr = per_token(rr, reference.rejected_len);
    }
  }

  const double beta = options.beta;
  const auto logits = (pc - pr) - (rc - rr);
  torch::Tensor losses;
  switch (options.loss) {
    case PrefLoss::Sigmoid: {
      const double ls = options.label_smoothing;
      losses = -torch::log_sigmoid(beta * logits) * (1 - ls) -
               torch::log_sigmoid(-beta * logits) * ls;
      break;
    }
    case PrefLoss::Hinge:
      losses = torch::relu(1 - beta * logits);
      break;
    case PrefLoss::Ipo:
      losses = (logits - 1 / (2 * beta)).pow(2);
      break;
    case PrefLoss::Orpo: {
      const auto empty_pair = (policy.chosen_len.to(pc.device()) <= 0)
                                  .logical_or(policy.rejected_len.to(pc.device()) <= 0);
      losses = -pc + beta * odds_ratio_term(pc, pr, empty_pair);
      break;
    }
    case PrefLoss::Simpo:
      losses = -torch::log_sigmoid(beta * ((pc - pr) - options.simpo_gamma / beta));
      break;
    case PrefLoss::KtoPair:
      losses = kto_pair_losses(pc - rc, pr - rr, beta);
      break;
  }
  if (options.ftx > kFtxThreshold) losses = losses - options.ftx * chosen_mean;

  PrefLossOut out;
  out.losses = losses;
  out.chosen_rewards = (beta * (pc - rc)).detach();
  out.rejected_rewards = (beta * (pr - rr)).detach();
  out.chosen_logps = pc.detach();
  out.rejected_logps = pr.detach();
  auto f64 = [](const torch::Tensor& t) { return t.to(torch::kDouble).sum(); };
  // LF's sft_loss and odds_ratio_loss (it logs them for orpo): -chosen_mean and
  // (loss - sft_loss) / beta, the pref_ftx term included as LF's losses include it.
  const auto sft = (-chosen_mean).detach();
  out.metric_sums = torch::stack({f64(out.chosen_rewards), f64(out.rejected_rewards),
                                  f64(out.chosen_rewards > out.rejected_rewards),
                                  f64(out.chosen_rewards - out.rejected_rewards),
                                  f64(out.chosen_logps), f64(out.rejected_logps), f64(sft),
                                  f64((losses.detach() - sft) / beta)});
  return out;
}

std::pair<torch::Tensor, torch::Tensor> sequence_logps(const torch::Tensor& token_logps,
                                                       const torch::Tensor& targets) {
  if (token_logps.dim() != 2 || token_logps.sizes() != targets.sizes())
    throw std::invalid_argument("sequence_logps: token_logps and targets must both be [R, S]");
  const auto valid = targets != kIgnoreIndex;
  // masked_fill, not a product: an ignored position may hold anything (even -inf) and must not
  // leak into the sum or its gradient.
  auto sums = token_logps.masked_fill(valid.logical_not(), 0).sum(1);
  return {sums, valid.sum(1).to(torch::kLong)};
}

DpoMetrics dpo_metrics(const torch::Tensor& metric_sums, int64_t pairs, PrefLoss loss) {
  if (metric_sums.numel() != kPrefMetricCount)
    throw std::invalid_argument("dpo_metrics: expected the metric sums of preference_loss");
  const auto s = metric_sums.detach().to(torch::kCPU, torch::kDouble).contiguous();
  const double* v = s.data_ptr<double>();
  DpoMetrics m;  // no pairs: every field stays kNoValue
  if (pairs <= 0) return m;
  const double d = static_cast<double>(pairs);
  m.rewards_chosen = v[kRewardsChosen] / d;
  m.rewards_rejected = v[kRewardsRejected] / d;
  m.rewards_accuracies = v[kRewardsAccuracies] / d;
  m.rewards_margins = v[kRewardsMargins] / d;
  m.logps_chosen = v[kLogpsChosen] / d;
  m.logps_rejected = v[kLogpsRejected] / d;
  if (loss == PrefLoss::Orpo) {
    m.sft_loss = v[kSftLoss] / d;
    m.odds_ratio_loss = v[kOddsRatioLoss] / d;
  }
  return m;
}

}  // namespace studio::trainer::dpo
