#include "studio/trainer/dpo/preference_loss.h"

#include <stdexcept>
#include <string>

#include "studio/trainer/batching/batch.h"

namespace studio::trainer::dpo {
namespace {

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

}  // namespace

PrefLossOptions PrefLossOptions::from(const RunConfig& cfg) {
  PrefLossOptions o;
  o.loss = cfg.pref_loss;
  o.beta = cfg.pref_beta;
  o.label_smoothing = cfg.dpo_label_smoothing;
  o.ftx = cfg.pref_ftx;
  return o;
}

PrefLossOut preference_loss(const PairLogps& policy, const PairLogps& reference,
                            const PrefLossOptions& options) {
  if (!policy.chosen.defined() || policy.chosen.dim() != 1)
    throw std::invalid_argument("preference_loss: policy.chosen must be a defined [N] tensor");
  const int64_t n = policy.chosen.size(0);
  check_pairs(policy, "policy", n);
  check_pairs(reference, "reference", n);
  if (!(options.beta > 0))
    throw std::invalid_argument("preference_loss: pref_beta must be > 0, got " +
                                std::to_string(options.beta));

  const auto opts = compute_options(policy.chosen);
  auto pc = policy.chosen.to(opts);
  auto pr = policy.rejected.to(opts);
  auto rc = reference.chosen.detach().to(opts);
  auto rr = reference.rejected.detach().to(opts);
  // LF's SFT term is the policy's mean log-prob per chosen token, whatever the loss type.
  const auto chosen_mean = per_token(pc, policy.chosen_len);
  if (options.loss == PrefLoss::Ipo) {
    // LF normalises by the response length before the loss for ipo (for both models).
    pc = chosen_mean;
    pr = per_token(pr, policy.rejected_len);
    rc = per_token(rc, reference.chosen_len);
    rr = per_token(rr, reference.rejected_len);
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
  }
  if (options.ftx > 0) losses = losses - options.ftx * chosen_mean;

  PrefLossOut out;
  out.losses = losses;
  out.chosen_rewards = (beta * (pc - rc)).detach();
  out.rejected_rewards = (beta * (pr - rr)).detach();
  out.chosen_logps = pc.detach();
  out.rejected_logps = pr.detach();
  auto f64 = [](const torch::Tensor& t) { return t.to(torch::kDouble).sum(); };
  out.metric_sums = torch::stack({f64(out.chosen_rewards), f64(out.rejected_rewards),
                                  f64(out.chosen_rewards > out.rejected_rewards),
                                  f64(out.chosen_rewards - out.rejected_rewards),
                                  f64(out.chosen_logps), f64(out.rejected_logps)});
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

DpoMetrics dpo_metrics(const torch::Tensor& metric_sums, int64_t pairs) {
  if (metric_sums.numel() != kPrefMetricCount)
    throw std::invalid_argument("dpo_metrics: expected the six metric sums of preference_loss");
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
  return m;
}

}  // namespace studio::trainer::dpo
