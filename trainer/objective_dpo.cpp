// stage: dpo. A micro-batch holds preference pairs; the loss of a pair compares its chosen and
// rejected sequences' log-prob sums under the policy with the frozen reference's (dpo/: sigmoid,
// ipo, hinge, kto_pair), or the policy's alone (orpo, simpo: no reference model is built),
// summed over the global batch and divided by its number of pairs. The reference runs a forward
// per micro-batch, or (precompute_ref_logps) its sums are computed once before training and the
// reference model dropped.
#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "objective.h"
#include "studio/trainer/dpo/preference_loss.h"

namespace studio::trainer {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

class DpoObjective final : public Objective {
 public:
  DpoObjective(StepModels& m, RunReporter& reporter)
      : m_(m), cfg_(m.cfg), in_(m.in), reporter_(reporter),
        pref_(dpo::PrefLossOptions::from(m.cfg)) {}

  void check() const override { refuse_sft_losses(cfg_); }

  size_t train_size() const override { return in_.train_pairs.size(); }
  const char* no_train_data() const override { return "no training pairs"; }
  // Packed DPO sequences are always isolated: a sequence's log-prob must not depend on its
  // neighbours.
  bool isolates_packed_sequences() const override { return pack_pairs(); }
  bool batch_lengths(std::vector<int64_t>&) const override { return false; }

  bool needs_reference() const override { return cfg_.uses_reference(); }
  bool keep_reference(CausalLM& ref) override {
    if (!cfg_.precompute_ref_logps) return true;
    reporter_.log("info", "precomputing reference log-probs of " +
                              std::to_string(in_.train_pairs.size() + in_.eval_pairs.size()) +
                              " pairs");
    ref_train_ = reference_table(ref, in_.train_pairs);
    ref_eval_ = reference_table(ref, in_.eval_pairs);
    return false;
  }
  bool reference_forward_per_step() const override {
    return cfg_.uses_reference() && !cfg_.precompute_ref_logps;
  }

  MicroCounts count(const std::vector<size_t>& micro) const override {
    MicroCounts c;
    c.normaliser = static_cast<double>(micro.size());
    const auto rows = pair_rows(in_.train_pairs, micro);  // chosen and rejected: one span each
    c.tokens = sample_tokens(rows);
    c.span_term = span_term(rows, /*isolated=*/false, in_.model);
    return c;
  }

  MicroLoss micro_loss(const std::vector<size_t>& micro) override {
    auto out = pair_losses(in_.train_pairs, micro, ref_train_);
    return {out.losses.sum(), out.metric_sums};
  }

  // Pair losses are the same on every rank of an SP group: the sums over DP.
  void reduce(StepStats& st, double loss_sum, const torch::Tensor& metric_sums) override {
    const auto sums = sum_over_dp(m_.par, st, loss_sum, metric_sums, dpo::kPrefMetricCount);
    st.dpo = dpo::dpo_metrics(torch::tensor(sums, torch::kDouble),
                              static_cast<int64_t>(st.normaliser), pref_.loss);
  }

  // Mean preference loss over the eval pairs (this DP rank's share, summed over DP), and the
  // metrics over them (LF's eval_rewards/*, eval_logps/*).
  double evaluate() override {
    eval_metrics_.reset();
    if (in_.eval_pairs.empty()) return kNaN;
    torch::NoGradGuard no_grad;
    // The metrics' and losses' sums stay on the device until the end: one host copy.
    torch::Tensor acc;  // [kPrefMetricCount + 1]: the metrics, then the loss
    double count = 0;
    const auto batches = m_.par.dp_batches(in_.eval_pairs.size(), cfg_.per_device_eval_batch_size);
    for (const auto& idx : batches) {
      const auto out = pair_losses(in_.eval_pairs, idx, ref_eval_);
      const auto here = torch::cat({out.metric_sums.to(torch::kDouble),
                                    out.losses.sum().to(torch::kDouble).reshape({1})});
      acc = acc.defined() ? acc + here : here;
      count += static_cast<double>(idx.size());
    }
    // As pair_losses would: the policy's forward, then the reference's (ZeRO-3 gathers).
    for (size_t k = batches.size();
         k < m_.par.most_dp_batches(in_.eval_pairs.size(), cfg_.per_device_eval_batch_size); ++k) {
      m_.zero->idle_forward();
      if (!ref_eval_.defined() && cfg_.uses_reference() && m_.ref_model)
        m_.ref_sharding()->idle_forward();
    }
    // Metrics, loss, pairs.
    const auto sums = eval_sums_over_dp(m_.par, acc, dpo::kPrefMetricCount + 1, {count});
    const double pairs = sums.back();
    if (pairs <= 0) return kNaN;
    eval_metrics_ = dpo::dpo_metrics(
        torch::tensor(std::vector<double>(sums.begin(), sums.begin() + dpo::kPrefMetricCount),
                      torch::kDouble),
        static_cast<int64_t>(pairs), pref_.loss);
    return sums[dpo::kPrefMetricCount] / pairs;
  }
  std::optional<DpoMetrics> eval_metrics() const override { return eval_metrics_; }

  void add_to_window(const StepStats& st) override { window_.add(st.dpo); }
  void write_window(StepEvent& e, int64_t steps) const override { window_.write(e, steps); }
  void reset_window() override { window_.reset(); }

 private:
  // DPO packs each micro-batch's sequences (always isolated).
  bool pack_pairs() const { return cfg_.packing || cfg_.neat_packing; }

  // Reference sums for every pair: each DP rank computes its share (SP-split), then the table
  // is summed over DP so that every rank holds all of it.
  torch::Tensor reference_table(CausalLM& ref, const std::vector<data::PairSample>& pairs) {
    torch::NoGradGuard no_grad;
    auto table = torch::zeros({static_cast<int64_t>(pairs.size()), 2}, torch::kDouble);
    const auto batches = m_.par.dp_batches(pairs.size(), cfg_.per_device_eval_batch_size);
    for (const auto& idx : batches) {
      auto sums = pair_logps(ref, pairs, idx).to(torch::kDouble).cpu();
      const auto n = static_cast<int64_t>(idx.size());
      for (int64_t j = 0; j < n; ++j) {
        table[static_cast<int64_t>(idx[static_cast<size_t>(j)])][0] = sums[j];
        table[static_cast<int64_t>(idx[static_cast<size_t>(j)])][1] = sums[n + j];
      }
    }
    // ZeRO-3 forwards gather over the whole world: every DP rank runs as many.
    for (size_t k = batches.size();
         k < m_.par.most_dp_batches(pairs.size(), cfg_.per_device_eval_batch_size); ++k)
      m_.sharding_of(ref)->idle_forward();
    if (m_.par.dp_group() && m_.par.dp_group()->size() > 1)
      m_.par.dp_group()->all_reduce_sum(table, "reference log-probs");
    return table;
  }

  // Sequence log-prob sums [2n] (chosen rows, then rejected) of the pairs `idx` under `m`,
  // summed over the SP group with an identity backward (each rank's partial sum gets dL/dS).
  torch::Tensor pair_logps(CausalLM& m, const std::vector<data::PairSample>& pairs,
                           const std::vector<size_t>& idx) {
    auto rows = pair_rows(pairs, idx);
    if (!pack_pairs()) {
      const auto [token_logps, b] = m_.target_logprobs(m, rows);
      return m_.sp_sum(dpo::sequence_logps(token_logps, b.targets.to(m_.device)).first);
    }
    // DPO with packing: the micro-batch's chosen and rejected sequences packed into as few rows
    // as the knapsack allows (rows of at most cutoff_len tokens), attention isolated per
    // sequence, and the token log-probs summed per packed sequence: the same sums as unpacked,
    // with less padding.
    int64_t capacity = cfg_.cutoff_len;
    for (const auto* r : rows) capacity = std::max(capacity, static_cast<int64_t>(r->input_ids.size()));
    std::vector<std::vector<size_t>> members;
    const auto packs = pack_samples(rows, capacity, &members);
    std::vector<const TokenizedSample*> packed;
    int64_t most = 1;
    for (size_t r = 0; r < packs.size(); ++r) {
      packed.push_back(&packs[r]);
      most = std::max<int64_t>(most, static_cast<int64_t>(members[r].size()));
    }
    // Sequence k lives at (row r, segment j): slot r * most + j; padding goes to a last slot.
    std::vector<int64_t> slot_of(rows.size(), -1);
    for (size_t r = 0; r < members.size(); ++r)
      for (size_t j = 0; j < members[r].size(); ++j)
        slot_of[members[r][j]] = static_cast<int64_t>(r) * most + static_cast<int64_t>(j);
    if (!pack_reported_) {  // once, so that a run shows what packing does to its batches
      reporter_.log("info", "dpo packing: " + std::to_string(rows.size()) + " sequences in " +
                                std::to_string(packs.size()) + " rows of at most " +
                                std::to_string(capacity) + " tokens (first micro-batch)");
      pack_reported_ = true;
    }
    const auto [token_logps, b] = m_.target_logprobs(m, packed);
    const int64_t slots = static_cast<int64_t>(packs.size()) * most;
    auto seg = b.segment_ids.to(m_.device);
    auto row = torch::arange(seg.size(0), seg.options()).unsqueeze(1).expand_as(seg);
    auto slot = torch::where(seg >= 0, row * most + seg, torch::full_like(seg, slots));
    auto per_slot = torch::zeros({slots + 1}, token_logps.options())
                        .index_add(0, slot.reshape({-1}), token_logps.reshape({-1}));
    return m_.sp_sum(per_slot.index_select(0, torch::tensor(slot_of, torch::kLong).to(m_.device)));
  }

  // Valid target counts of the pairs (global: from the samples, not the local chunks).
  torch::Tensor pair_lengths(const std::vector<data::PairSample>& pairs,
                             const std::vector<size_t>& idx, bool chosen) const {
    std::vector<double> n;
    for (size_t i : idx)
      n.push_back(static_cast<double>(count_valid_targets(chosen ? pairs[i].chosen : pairs[i].rejected)));
    return torch::tensor(n, torch::kDouble).to(m_.device);
  }

  // Policy and reference log-prob sums of a micro-batch of pairs and their preference losses.
  dpo::PrefLossOut pair_losses(const std::vector<data::PairSample>& pairs,
                               const std::vector<size_t>& idx, const torch::Tensor& table) {
    const auto n = static_cast<int64_t>(idx.size());
    auto policy_sums = pair_logps(m_.model, pairs, idx).to(torch::kDouble);
    dpo::PairLogps policy{policy_sums.narrow(0, 0, n), policy_sums.narrow(0, n, n),
                          pair_lengths(pairs, idx, true), pair_lengths(pairs, idx, false)};
    dpo::PairLogps reference{torch::Tensor(), torch::Tensor(), policy.chosen_len,
                             policy.rejected_len};
    if (!cfg_.uses_reference()) {
      // orpo, simpo: the policy alone (reference.chosen / rejected stay undefined).
    } else if (table.defined()) {
      std::vector<int64_t> rows(idx.begin(), idx.end());
      auto picked = table.index_select(0, torch::tensor(rows, torch::kLong)).to(m_.device);
      reference.chosen = picked.select(1, 0);
      reference.rejected = picked.select(1, 1);
    } else {
      torch::NoGradGuard no_grad;
      const auto base = m_.reference_scope();
      auto ref_sums = pair_logps(m_.ref_model, pairs, idx).to(torch::kDouble);
      reference.chosen = ref_sums.narrow(0, 0, n);
      reference.rejected = ref_sums.narrow(0, n, n);
    }
    return dpo::preference_loss(policy, reference, pref_);
  }

  StepModels& m_;
  const RunConfig& cfg_;
  const TrainInputs& in_;
  RunReporter& reporter_;
  dpo::PrefLossOptions pref_;
  // precompute_ref_logps: per pair (chosen, rejected) reference sums, [n, 2] fp64.
  torch::Tensor ref_train_, ref_eval_;
  bool pack_reported_ = false;
  RewardWindow window_;
  std::optional<DpoMetrics> eval_metrics_;  // of the last evaluate()
};

}  // namespace

std::unique_ptr<Objective> make_dpo_objective(StepModels& m, RunReporter& reporter) {
  return std::make_unique<DpoObjective>(m, reporter);
}

}  // namespace studio::trainer
