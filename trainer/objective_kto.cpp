// stage: kto. Kahneman-Tversky Optimisation as LLaMA-Factory's stage kto runs it (its
// CustomKTOTrainer over TRL's KTOTrainer): a micro-batch holds examples, each a prompt with a
// response marked desirable or not and the same prompt with a mismatched response (the KL
// sequence, data/dataset.h load_feedback_data). The policy's and the frozen reference's
// log-prob sums of each response give the log-ratios; the KL estimate comes from the mismatched
// responses (policy forward without gradients, as LF's); the losses are dpo/kto_loss.h's.
//
// The loss is LF's: each micro-batch's mean over its examples (plus its SFT term), averaged over
// the global batch's micro-batches (the accumulation and the DP ranks). The KL estimate of a
// micro-batch is the mean over the DP ranks of each rank's micro-batch mean (TRL gathers it
// across processes), so every DP rank runs that all-reduce for every micro-batch, whatever its
// data. As in TRL, the losses of a micro-batch depend on how examples are grouped into
// micro-batches (through the KL term): equal runs need equal per_device_train_batch_size and DP
// layout; SP does not change it.
//
// The reference runs a forward per micro-batch, or (precompute_ref_logps) its sums for every
// example and KL sequence are computed once before training and the reference dropped.
// Evaluation computes each batch's KL from that batch alone (no DP all-reduce: DP ranks hold
// different numbers of evaluation batches) and weights each batch's loss by its examples, as
// Hugging Face's evaluation loop does.
#include <algorithm>
#include <limits>
#include <string>

#include "objective.h"
#include "studio/trainer/dpo/kto_loss.h"
#include "studio/trainer/dpo/preference_loss.h"

namespace studio::trainer {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The targets or the KL sequences of the examples `idx`.
std::vector<const TokenizedSample*> feedback_rows(const std::vector<data::FeedbackSample>& all,
                                                  const std::vector<size_t>& idx, bool kl) {
  std::vector<const TokenizedSample*> rows;
  for (size_t i : idx) rows.push_back(kl ? &all[i].kl : &all[i].target);
  return rows;
}

class KtoObjective final : public Objective {
 public:
  KtoObjective(StepModels& m, RunReporter& reporter)
      : m_(m), cfg_(m.cfg), in_(m.in), reporter_(reporter),
        options_(dpo::KtoOptions::from(m.cfg)) {}

  void check() const override { refuse_sft_losses(cfg_); }

  size_t train_size() const override { return in_.train_feedback.size(); }
  const char* no_train_data() const override { return "no training examples"; }
  bool isolates_packed_sequences() const override { return false; }
  bool batch_lengths(std::vector<int64_t>&) const override { return false; }

  bool needs_reference() const override { return true; }
  bool keep_reference(CausalLM& ref) override {
    if (!cfg_.precompute_ref_logps) return true;
    reporter_.log("info", "precomputing reference log-probs of " +
                              std::to_string(in_.train_feedback.size() + in_.eval_feedback.size()) +
                              " examples and their KL sequences");
    ref_train_ = reference_table(ref, in_.train_feedback);
    ref_eval_ = reference_table(ref, in_.eval_feedback);
    return false;
  }
  bool reference_forward_per_step() const override { return !cfg_.precompute_ref_logps; }

  // The loss is a mean per micro-batch, averaged over the global batch's micro-batches: each
  // counts 1. Tokens: the trained responses' sequences (the KL forward runs without a backward).
  MicroCounts count(const std::vector<size_t>& micro) const override {
    MicroCounts c;
    c.normaliser = 1;
    const auto rows = feedback_rows(in_.train_feedback, micro, /*kl=*/false);
    c.tokens = sample_tokens(rows);
    c.span_term = span_term(rows, /*isolated=*/false, in_.model);
    return c;
  }

  MicroLoss micro_loss(const std::vector<size_t>& micro) override {
    const Scored s = examples_loss(in_.train_feedback, micro, ref_train_, /*dp_kl=*/true);
    return {s.out.loss, torch::cat({s.out.metric_sums, s.kl.reshape({1})})};
  }

  // Micro-batch losses are the same on every rank of an SP group: the sums over DP.
  void reduce(StepStats& st, double loss_sum, const torch::Tensor& metric_sums) override {
    const auto sums = sum_over_dp(m_.par, st, loss_sum, metric_sums, dpo::kKtoMetricCount + 1);
    st.dpo = metrics(sums, st.micro_batches);
  }

  // The eval examples' mean loss: each batch's loss weighted by its examples (this DP rank's
  // batches, summed over DP).
  double evaluate() override {
    eval_metrics_.reset();
    if (in_.eval_feedback.empty()) return kNaN;
    torch::NoGradGuard no_grad;
    // On the device until the end: the metric sums, each batch's KL, the loss x examples.
    torch::Tensor acc;
    double count = 0, kl_batches = 0;
    const auto batches =
        m_.par.dp_batches(in_.eval_feedback.size(), cfg_.per_device_eval_batch_size);
    for (const auto& idx : batches) {
      const Scored s = examples_loss(in_.eval_feedback, idx, ref_eval_, /*dp_kl=*/false);
      const auto here = torch::cat(
          {s.out.metric_sums.to(torch::kDouble), s.kl.to(torch::kDouble).reshape({1}),
           (s.out.loss.detach().to(torch::kDouble) * static_cast<double>(idx.size())).reshape({1})});
      acc = acc.defined() ? acc + here : here;
      count += static_cast<double>(idx.size());
      ++kl_batches;
    }
    // ZeRO-3 forwards gather over the whole world: every DP rank runs as many (the policy's two
    // and, without a table, the reference's two per batch).
    for (size_t k = batches.size();
         k < m_.par.most_dp_batches(in_.eval_feedback.size(), cfg_.per_device_eval_batch_size);
         ++k)
      for (int f = 0; f < 2; ++f) {
        m_.zero->idle_forward();
        if (!ref_eval_.defined() && m_.ref_model) m_.ref_sharding()->idle_forward();
      }
    // Metrics, KL, loss x examples, examples, batches.
    const auto sums =
        eval_sums_over_dp(m_.par, acc, dpo::kKtoMetricCount + 2, {count, kl_batches});
    const double n = sums[dpo::kKtoMetricCount + 2];
    if (n <= 0) return kNaN;
    eval_metrics_ = metrics(sums, sums[dpo::kKtoMetricCount + 3]);
    return sums[dpo::kKtoMetricCount + 1] / n;
  }
  std::optional<DpoMetrics> eval_metrics() const override { return eval_metrics_; }

  void add_to_window(const StepStats& st) override { window_.add(st.dpo); }
  void write_window(StepEvent& e, int64_t steps) const override { window_.write(e, steps); }
  void reset_window() override { window_.reset(); }

 private:
  struct Scored {
    dpo::KtoLossOut out;
    torch::Tensor kl;  // 0-dim fp64: the KL estimate the loss used
  };

  // The step's metrics from the DP sums of the micro-batches' metric sums (and their KL): the
  // means over the desirable (chosen) and undesirable (rejected) examples, LF's margin (their
  // difference), no accuracy, the KL's mean over the micro-batches.
  static DpoMetrics metrics(const std::vector<double>& s, double micro_batches) {
    auto per = [](double sum, double n) { return n > 0 ? sum / n : kNaN; };
    const double nc = s[dpo::kKtoCountChosen], nr = s[dpo::kKtoCountRejected];
    DpoMetrics d;
    d.rewards_chosen = per(s[dpo::kKtoRewardsChosen], nc);
    d.rewards_rejected = per(s[dpo::kKtoRewardsRejected], nr);
    d.rewards_margins = d.rewards_chosen - d.rewards_rejected;
    d.logps_chosen = per(s[dpo::kKtoLogpsChosen], nc);
    d.logps_rejected = per(s[dpo::kKtoLogpsRejected], nr);
    d.kl = per(s[dpo::kKtoMetricCount], micro_batches);
    return d;
  }

  // Log-prob sums [n] of `rows` under `m`, summed over the SP group (identity backward).
  torch::Tensor sequence_sums(CausalLM& m, const std::vector<const TokenizedSample*>& rows) {
    const auto [token_logps, b] = m_.target_logprobs(m, rows);
    return m_.sp_sum(dpo::sequence_logps(token_logps, b.targets.to(m_.device)).first)
        .to(torch::kDouble);
  }

  // Reference sums for every example: [n, 2] (its response, its KL sequence), each DP rank
  // computing its share, then summed over DP so that every rank holds all of it.
  torch::Tensor reference_table(CausalLM& ref, const std::vector<data::FeedbackSample>& all) {
    torch::NoGradGuard no_grad;
    auto table = torch::zeros({static_cast<int64_t>(all.size()), 2}, torch::kDouble);
    const auto batches = m_.par.dp_batches(all.size(), cfg_.per_device_eval_batch_size);
    for (const auto& idx : batches) {
      const auto target = sequence_sums(ref, feedback_rows(all, idx, false)).cpu();
      const auto kl = sequence_sums(ref, feedback_rows(all, idx, true)).cpu();
      for (size_t j = 0; j < idx.size(); ++j) {
        table[static_cast<int64_t>(idx[j])][0] = target[static_cast<int64_t>(j)];
        table[static_cast<int64_t>(idx[j])][1] = kl[static_cast<int64_t>(j)];
      }
    }
    for (size_t k = batches.size();
         k < m_.par.most_dp_batches(all.size(), cfg_.per_device_eval_batch_size); ++k)
      for (int f = 0; f < 2; ++f) m_.sharding_of(ref)->idle_forward();
    if (m_.par.dp_group() && m_.par.dp_group()->size() > 1)
      m_.par.dp_group()->all_reduce_sum(table, "reference log-probs");
    return table;
  }

  // The loss of the examples `idx`. The KL sequences first, without gradients (their ZeRO-3
  // gathers end before the training forward starts), then the references, then the policy's
  // responses. dp_kl: the KL estimate averaged over the DP ranks (training).
  Scored examples_loss(const std::vector<data::FeedbackSample>& all,
                       const std::vector<size_t>& idx, const torch::Tensor& table, bool dp_kl) {
    const auto targets = feedback_rows(all, idx, false), kls = feedback_rows(all, idx, true);
    torch::Tensor policy_kl, ref_target, ref_kl;
    {
      torch::NoGradGuard no_grad;
      policy_kl = sequence_sums(m_.model, kls);
      if (table.defined()) {
        std::vector<int64_t> rows(idx.begin(), idx.end());
        const auto picked =
            table.index_select(0, torch::tensor(rows, torch::kLong)).to(m_.device);
        ref_target = picked.select(1, 0);
        ref_kl = picked.select(1, 1);
      } else {
        const auto base = m_.reference_scope();
        ref_target = sequence_sums(m_.ref_model, targets);
        ref_kl = sequence_sums(m_.ref_model, kls);
      }
    }
    Scored s;
    torch::Tensor kl = dpo::kto_kl_local(policy_kl, ref_kl);
    if (dp_kl && m_.par.dp_group() && m_.par.dp_group()->size() > 1) {
      kl = kl.reshape({1}).contiguous();
      m_.par.dp_group()->all_reduce_sum(kl, "KTO KL estimate");
      kl = kl.reshape({}) / static_cast<double>(m_.par.dp_group()->size());
    }
    s.kl = dpo::kto_kl_clamp(kl);
    std::vector<double> length;
    std::vector<uint8_t> desirable;
    for (size_t i : idx) {
      length.push_back(static_cast<double>(count_valid_targets(all[i].target)));
      desirable.push_back(all[i].desirable ? 1 : 0);
    }
    dpo::KtoBatch b;
    b.policy = sequence_sums(m_.model, targets);
    b.reference = ref_target;
    b.length = torch::tensor(length, torch::kDouble).to(m_.device);
    b.desirable = torch::tensor(desirable, torch::kUInt8).to(torch::kBool).to(m_.device);
    s.out = dpo::kto_loss(b, s.kl, options_);
    return s;
  }

  StepModels& m_;
  const RunConfig& cfg_;
  const TrainInputs& in_;
  RunReporter& reporter_;
  dpo::KtoOptions options_;
  // precompute_ref_logps: per example (response, KL sequence) reference sums, [n, 2] fp64.
  torch::Tensor ref_train_, ref_eval_;
  RewardWindow window_;
  std::optional<DpoMetrics> eval_metrics_;  // of the last evaluate()
};

}  // namespace

std::unique_ptr<Objective> make_kto_objective(StepModels& m, RunReporter& reporter) {
  return std::make_unique<KtoObjective>(m, reporter);
}

}  // namespace studio::trainer
