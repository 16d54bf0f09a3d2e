// stage: rm. A reward model, as LLaMA-Factory's rm stage trains it (its PairwiseTrainer over
// TRL's AutoModelForCausalLMWithValueHead): a value head (v_head.summary, Linear(hidden, 1))
// reads the final hidden state of each sequence's last token (LLaMA-Factory's index:
// attention_mask.sum() - 1), and a pair's loss is -log sigmoid(chosen score - rejected score) in
// fp32, summed over the global batch and divided by its number of pairs (LLaMA-Factory's mean
// per micro-batch, averaged over the accumulation). No LM head runs.
//
// Under SP each sequence's last token lives on one rank: that rank scores it, the others add
// zero, and the scores are summed over the SP group with an identity backward, so the head's
// gradient reaches the one rank that read the row and every rank runs the same collectives.
//
// TRL's value head applies dropout to the hidden states before the head (summary_dropout_prob
// from config.json, else 0.1), active while LLaMA-Factory trains. Here the dropout mask of each
// scored row is drawn from a generator seeded by the run's seed, the pair, which half of it and
// how many times training has scored that pair, so the masks are the same whatever the SP, DP
// and accumulation layout. Evaluation runs without dropout, as model.eval() does.
//
// Metrics: the mean chosen and rejected scores, accuracy (chosen > rejected, as LLaMA-Factory's
// ComputeAccuracy) and margin, in the step events' rewards fields (TRL's RewardTrainer logs the
// same accuracy and margin); evaluation logs its loss and accuracy.
#include <cmath>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <string>

#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>

#include "objective.h"

namespace studio::trainer {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// TRL's ValueHead: config.summary_dropout_prob when config.json has it (null or 0: none), else
// 0.1.
double summary_dropout(const std::string& model_dir) {
  std::ifstream in(model_dir + "/config.json");
  if (!in) return 0.1;
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("summary_dropout_prob")) return 0.1;
  const auto& p = j["summary_dropout_prob"];
  if (p.is_null()) return 0;
  if (!p.is_number() || p.get<double>() < 0 || p.get<double>() >= 1)
    throw std::invalid_argument(model_dir + "/config.json: summary_dropout_prob must be a number "
                                "in [0, 1) (the value head's dropout), got " + p.dump());
  return p.get<double>();
}

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class RmObjective final : public Objective {
 public:
  RmObjective(StepModels& m, RunReporter& reporter)
      : m_(m), cfg_(m.cfg), in_(m.in), reporter_(reporter),
        dropout_(summary_dropout(m.in.model_dir)), visits_(m.in.train_pairs.size(), 0) {}

  void check() const override { refuse_sft_losses(cfg_); }

  size_t train_size() const override { return in_.train_pairs.size(); }
  const char* no_train_data() const override { return "no training pairs"; }
  bool isolates_packed_sequences() const override { return false; }
  bool batch_lengths(std::vector<int64_t>&) const override { return false; }

  bool needs_reference() const override { return false; }
  bool keep_reference(CausalLM&) override { return false; }
  bool reference_forward_per_step() const override { return false; }

  MicroCounts count(const std::vector<size_t>& micro) const override {
    MicroCounts c;
    c.normaliser = static_cast<double>(micro.size());
    const auto rows = pair_rows(in_.train_pairs, micro);
    c.tokens = sample_tokens(rows);
    c.span_term = span_term(rows, /*isolated=*/false, in_.model);
    return c;
  }

  MicroLoss micro_loss(const std::vector<size_t>& micro) override {
    const Scored s = pair_scores(in_.train_pairs, micro, /*train=*/true);
    return {s.losses.sum(), s.metric_sums};
  }

  // Pair losses are the same on every rank of an SP group: the sums over DP.
  void reduce(StepStats& st, double loss_sum, const torch::Tensor& metric_sums) override {
    const auto sums = sum_over_dp(m_.par, st, loss_sum, metric_sums, kMetrics);
    st.dpo = score_metrics(sums, st.normaliser > 0 ? st.normaliser : kNaN);
  }

  // Mean pair loss over the eval pairs (this DP rank's share, summed over DP); the accuracy is
  // logged beside it.
  double evaluate() override {
    eval_metrics_.reset();
    if (in_.eval_pairs.empty()) return kNaN;
    torch::NoGradGuard no_grad;
    // The metrics' and losses' sums on the device until the end: one host copy.
    torch::Tensor acc;  // [kMetrics + 1]: the metrics, then the loss
    double count = 0;
    const auto batches = m_.par.dp_batches(in_.eval_pairs.size(), cfg_.per_device_eval_batch_size);
    for (const auto& idx : batches) {
      const Scored s = pair_scores(in_.eval_pairs, idx, /*train=*/false);
      const auto here = torch::cat({s.metric_sums.to(torch::kDouble),
                                    s.losses.sum().to(torch::kDouble).reshape({1})});
      acc = acc.defined() ? acc + here : here;
      count += static_cast<double>(idx.size());
    }
    // ZeRO-3 forwards gather over the whole world: every DP rank runs as many.
    for (size_t k = batches.size();
         k < m_.par.most_dp_batches(in_.eval_pairs.size(), cfg_.per_device_eval_batch_size); ++k)
      m_.zero->idle_forward();
    const auto v = eval_sums_over_dp(m_.par, acc, kMetrics + 1, {count});
    const double pairs = v[kMetrics + 1];
    if (pairs <= 0) return kNaN;
    reporter_.log("info", "eval: reward accuracy " + c10::str(v[2] / pairs) + " over " +
                              std::to_string(static_cast<int64_t>(pairs)) +
                              " pairs (chosen scored higher), mean scores " +
                              c10::str(v[0] / pairs) + " chosen, " + c10::str(v[1] / pairs) +
                              " rejected");
    eval_metrics_ = score_metrics(v, pairs);
    return v[kMetrics] / pairs;
  }
  std::optional<DpoMetrics> eval_metrics() const override { return eval_metrics_; }

  // The scores' means from their sums over `n` pairs: chosen, rejected, accuracy and margin (no
  // log-probs: unknown).
  static DpoMetrics score_metrics(const std::vector<double>& sums, double n) {
    DpoMetrics m;
    m.rewards_chosen = sums[0] / n;
    m.rewards_rejected = sums[1] / n;
    m.rewards_accuracies = sums[2] / n;
    m.rewards_margins = sums[3] / n;
    return m;
  }

  void add_to_window(const StepStats& st) override { window_.add(st.dpo); }
  void write_window(StepEvent& e, int64_t steps) const override { window_.write(e, steps); }
  void reset_window() override { window_.reset(); }

 private:
  // Sums of the chosen scores, rejected scores, correct pairs and margins.
  static constexpr int64_t kMetrics = 4;

  struct Scored {
    torch::Tensor losses;       // [n] fp32, with the graph when training
    torch::Tensor metric_sums;  // [kMetrics] fp64, no graph
  };

  // The scores of the pairs `idx` (chosen rows, then rejected: [2n] fp32), every rank of the SP
  // group holding all of them, and their losses and metrics.
  Scored pair_scores(const std::vector<data::PairSample>& pairs, const std::vector<size_t>& idx,
                     bool train) {
    const auto rows = pair_rows(pairs, idx);
    const auto n = static_cast<int64_t>(idx.size());
    Batch b = m_.par.local_batch(m_.model, rows, in_.pad_id);
    ShardedState* sharding = m_.zero.get();
    if (sharding) sharding->begin_forward();
    const torch::Tensor hidden = m_.forward_hidden(m_.model, b);  // [2n, S_local, hidden]
    // The last token of each row, by its global position; on this rank or not (host tensors:
    // no wait for the device).
    std::vector<int64_t> last;
    for (const auto* r : rows) last.push_back(static_cast<int64_t>(r->input_ids.size()) - 1);
    const torch::Tensor here =
        b.token_mask & (b.position_ids == torch::tensor(last, torch::kLong).unsqueeze(1));
    const torch::Tensor at = here.nonzero();  // [k, 2]: (row, local column)
    const torch::Tensor row = at.select(1, 0).contiguous(), col = at.select(1, 1).contiguous();
    const torch::Tensor row_here = row.to(m_.device);
    torch::Tensor picked = hidden.index({row_here, col.to(m_.device)});  // [k, hidden]
    if (train && dropout_ > 0) picked = picked.to(torch::kFloat) * dropout_mask(idx, row);
    const torch::Tensor scored = m_.model->v_head(picked);  // [k] fp32
    torch::Tensor local = torch::zeros({2 * n}, torch::TensorOptions().dtype(torch::kFloat)
                                                     .device(m_.device))
                              .index_put({row_here}, scored);
    // Without a backward to come the weights go now (training: after its backward).
    if (sharding && !torch::GradMode::is_enabled()) sharding->end_forward();
    const torch::Tensor scores = m_.sp_sum(local);
    if (train)
      for (size_t i : idx) ++visits_[i];
    const torch::Tensor chosen = scores.narrow(0, 0, n), rejected = scores.narrow(0, n, n);
    Scored out;
    out.losses = -torch::log_sigmoid(chosen - rejected);
    torch::NoGradGuard no_grad;
    const torch::Tensor c = chosen.detach().to(torch::kDouble),
                        r = rejected.detach().to(torch::kDouble);
    out.metric_sums =
        torch::stack({c.sum(), r.sum(), (c > r).to(torch::kDouble).sum(), (c - r).sum()});
    return out;
  }

  // TRL's dropout on the scored rows `row` (indexes into the micro-batch's chosen-then-rejected
  // rows): each row's mask from its own generator, scaled by 1 / (1 - p) [k, hidden] fp32.
  torch::Tensor dropout_mask(const std::vector<size_t>& idx, const torch::Tensor& row) const {
    const auto n = static_cast<int64_t>(idx.size());
    const int64_t hidden = in_.model.hidden_size;
    const auto k = row.size(0);
    torch::Tensor mask = torch::empty({k, hidden}, torch::kFloat);
    const auto* rows = row.data_ptr<int64_t>();
    for (int64_t j = 0; j < k; ++j) {
      const int64_t r = rows[j];
      const size_t pair = idx[static_cast<size_t>(r % n)];
      const uint64_t half = r < n ? 0 : 1;
      const uint64_t seed = mix(mix(mix(static_cast<uint64_t>(cfg_.seed)) ^ pair) ^
                                (static_cast<uint64_t>(visits_[pair]) << 1 | half));
      at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
      mask[j].bernoulli_(1.0 - dropout_, gen);
    }
    return (mask / (1.0 - dropout_)).to(m_.device);
  }

  StepModels& m_;
  const RunConfig& cfg_;
  const TrainInputs& in_;
  RunReporter& reporter_;
  double dropout_;
  std::vector<uint32_t> visits_;  // per training pair: how many times training scored it
  RewardWindow window_;
  std::optional<DpoMetrics> eval_metrics_;  // of the last evaluate()
};

}  // namespace

std::unique_ptr<Objective> make_rm_objective(StepModels& m, RunReporter& reporter) {
  return std::make_unique<RmObjective>(m, reporter);
}

}  // namespace studio::trainer
