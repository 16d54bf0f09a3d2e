#pragma once
// What a training stage optimises, behind one interface (private to studio_trainer). The train
// loop (train_loop.cpp) owns the step skeleton: planning micro-batches, the global normaliser,
// backward, ZeRO's reductions, clipping, the update, events, evaluation and checkpoints. An
// Objective says what a micro-batch holds, runs its forward and gives its loss sum and metrics,
// says whether it needs a frozen reference and how it uses it (a forward per micro-batch, or
// log-probs precomputed once), and reduces its step's numbers over the grid. One objective per
// stage: objective_sft.cpp (stage sft: the token loss, with DFT/EAFT/ASFT), objective_dpo.cpp
// (stage dpo: the preference losses), objective_rm.cpp (stage rm: a reward model's pairwise loss),
// objective_kto.cpp (stage kto: desirable and undesirable examples).
//
// Collectives: every rank runs the same ones in the same order whatever its data, so the
// methods that reduce (count's caller, reduce, evaluate) are called on every rank.
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "studio/config/run_config.h"
#include "studio/runs/events.h"
#include "studio/trainer/metrics/run_reporter.h"
#include "studio/trainer/optim/zero.h"
#include "studio/trainer/train_loop.h"
#include "parallel_layout.h"

namespace studio::trainer {

// One optimizer step's numbers (the global batch's, after reduce).
struct StepStats {
  double loss_sum = 0;      // SFT: token CE sum; DPO: pair loss sum (global batch)
  double normaliser = 0;    // SFT: valid target tokens; DPO: pairs (global batch)
  int64_t tokens = 0;       // input tokens of the global batch
  double span_term = 0;     // sum of S * (S + 1) over its attention spans (model_flops.h)
  double grad_norm = std::numeric_limits<double>::quiet_NaN();
  std::optional<DpoMetrics> dpo;
  double micro_batches = 0;  // of the global batch, summed over DP
  double aux_loss = std::numeric_limits<double>::quiet_NaN();  // MoE: mean auxiliary loss
  double aux_term = 0;   // MoE: what the loss adds for it (coefficient x aux_loss)
  bool skipped = false;  // skip_nonfinite_steps: not finite, so no update was made
  // This rank's micro-batch loss sums (detached, on the device): read only when the step is not
  // finite, to say where (no work on the step's path).
  std::vector<torch::Tensor> micro_losses;
};

// A micro-batch's share of the step, on this rank, before any reduction.
struct MicroCounts {
  double normaliser = 0;  // what the loss sum is divided by (valid target tokens, pairs)
  int64_t tokens = 0;     // input tokens
  double span_term = 0;   // attention spans for the FLOPs count
};

// A micro-batch's loss on this rank: `sum` carries the graph (the loop divides it by the global
// normaliser and runs backward); `metrics` are sums the objective reduces at the end of the step
// (undefined: none). Both stay on the device until the step's one host sync.
struct MicroLoss {
  torch::Tensor sum;
  torch::Tensor metrics;
};

// The models of the run and the forwards every objective uses. Owned by the train loop, which
// builds the models into it; objectives read it.
struct StepModels {
  const RunConfig& cfg;
  const TrainInputs& in;
  Parallel& par;
  torch::Device device{torch::kCPU};
  CausalLM model{nullptr};
  CausalLM ref_model{nullptr};  // a reference kept for forwards during the steps
  std::unique_ptr<ShardedState> zero;      // the policy's states, sharded as the ZeRO stage says
  std::unique_ptr<ShardedState> ref_zero;  // the frozen reference's (weights only; stage 3)
  // MoE models: the weight the next policy forward's auxiliary loss gets (coefficient /
  // micro-batches of the global batch; 0: off), and the last such forward's aux (0-dim fp64).
  double aux_weight = 0;
  torch::Tensor aux_value;

  StepModels(const RunConfig& c, const TrainInputs& i, Parallel& p) : cfg(c), in(i), par(p) {}

  // finetuning_type lora without ref_model: the reference is the policy itself with its adapters
  // switched off (PEFT's disable_adapter(), as LLaMA-Factory's DPO and KTO trainers use it):
  // ref_model is `model`, ref_zero is null, and every reference forward runs inside
  // reference_scope().
  bool reference_is_base = false;

  // The sharding of `m`: the policy's or the reference's.
  ShardedState* sharding_of(const CausalLM& m) const {
    return m.ptr() == model.ptr() ? zero.get() : ref_zero.get();
  }
  ShardedState* ref_sharding() const { return sharding_of(ref_model); }
  // Held around a reference forward: the adapters off when the reference is the base (null
  // otherwise: nothing to switch).
  std::unique_ptr<AdaptersDisabled> reference_scope() const {
    return reference_is_base ? std::make_unique<AdaptersDisabled>() : nullptr;
  }
  // The final hidden states of a local batch under `m`. The policy's forwards that train
  // (gradients on, the MoE auxiliary loss on) record the routing of the micro-batch: its aux,
  // over the whole sequence of the SP group, goes to aux_value and its gradient into the
  // backward that follows (end_aux after it).
  torch::Tensor forward_hidden(CausalLM& m, const Batch& b);
  void end_aux();
  // Per-token target log-probs of this rank's share of `rows` under `m` ([B, S_local], 0 where
  // ignored), with the local batch they were computed on.
  std::pair<torch::Tensor, Batch> target_logprobs(CausalLM& m,
                                                  const std::vector<const TokenizedSample*>& rows);
  // Partial sums of this rank's tokens, summed over the SP group with an identity backward.
  torch::Tensor sp_sum(const torch::Tensor& sums) const;
};

// The preference metrics of a logging window (DPO's rewards and log-probs, a reward model's
// scores, KTO's rewards and KL): each field the mean of the steps' values that are numbers. A
// field no step of the window has (a stage without it, or KTO steps without undesirable
// examples) is written as unknown.
class RewardWindow {
 public:
  void add(const std::optional<DpoMetrics>& m) {
    if (!m) return;
    for (std::size_t i = 0; i < kFields.size(); ++i)
      if (const double v = (*m).*kFields[i]; !std::isnan(v)) sum_[i] += v, ++count_[i];
  }
  void write(StepEvent& e, int64_t steps) const {
    if (steps <= 0) return;
    DpoMetrics mean;
    for (std::size_t i = 0; i < kFields.size(); ++i)
      mean.*kFields[i] =
          count_[i] > 0 ? sum_[i] / count_[i] : std::numeric_limits<double>::quiet_NaN();
    e.dpo = mean;
  }
  void reset() {
    sum_.fill(0);
    count_.fill(0);
  }

 private:
  static constexpr std::array<double DpoMetrics::*, 9> kFields = {
      &DpoMetrics::rewards_chosen, &DpoMetrics::rewards_rejected,
      &DpoMetrics::rewards_accuracies, &DpoMetrics::rewards_margins,
      &DpoMetrics::logps_chosen, &DpoMetrics::logps_rejected,
      &DpoMetrics::kl, &DpoMetrics::sft_loss,
      &DpoMetrics::odds_ratio_loss};
  std::array<double, kFields.size()> sum_ = {};
  std::array<int64_t, kFields.size()> count_ = {};
};

class Objective {
 public:
  virtual ~Objective() = default;

  // Throws std::invalid_argument for a key the stage does not take (called as the model is
  // built).
  virtual void check() const = 0;
  // Training examples (samples, pairs) and the error when there are none.
  virtual size_t train_size() const = 0;
  virtual const char* no_train_data() const = 0;
  // Attention isolates the sequences packed into a row (their log-probs must not mix).
  virtual bool isolates_packed_sequences() const = 0;
  // Dynamic batching over these lengths (one per training example), or false: fixed-size
  // micro-batches.
  virtual bool batch_lengths(std::vector<int64_t>& lengths) const = 0;

  // Whether the run builds a frozen reference (cfg.ref_model, else the initial policy), and,
  // once built, whether it stays for the steps (true) or the objective took what it needs from
  // it now (precomputed log-probs: every rank runs the same collectives) and it can go.
  virtual bool needs_reference() const = 0;
  virtual bool keep_reference(CausalLM& ref) = 0;
  // Whether each step runs a reference forward too (counted in the FLOPs).
  virtual bool reference_forward_per_step() const = 0;

  // This rank's share of the step, before the forwards (no collective).
  virtual MicroCounts count(const std::vector<size_t>& micro) const = 0;
  // The forward of one training micro-batch.
  virtual MicroLoss micro_loss(const std::vector<size_t>& micro) = 0;
  // The step's loss (this rank's `loss_sum`) and metric sums reduced over the grid into `st`.
  virtual void reduce(StepStats& st, double loss_sum, const torch::Tensor& metric_sums) = 0;
  // The mean evaluation loss (NaN without evaluation data); collective.
  virtual double evaluate() = 0;
  // The preference metrics over the evaluation examples of the last evaluate() (dpo, rm, kto),
  // for the eval event; nullopt for the others.
  virtual std::optional<DpoMetrics> eval_metrics() const { return std::nullopt; }

  // The metrics of the logging window (steps since the last step event), averaged into `e`.
  virtual void add_to_window(const StepStats& st) { (void)st; }
  virtual void write_window(StepEvent& e, int64_t steps) const { (void)e, (void)steps; }
  virtual void reset_window() {}
};

// The step's loss and `count` metric sums (this rank's, on the device; undefined: zeros) summed
// over DP, for the objectives whose micro-batch losses are the same on every rank of an SP group
// (preference pairs): `loss_sum` goes into st.loss_sum, the metric sums are returned.
std::vector<double> sum_over_dp(const Parallel& par, StepStats& st, double loss_sum,
                                const torch::Tensor& metric_sums, int64_t count);

// An evaluation's sums: `device_sums` (this rank's batches' sums accumulated on the device,
// `width` values; undefined: zeros), copied to the host once, then `tail` (host counts) after
// them, all summed over DP ("eval loss"); collective.
std::vector<double> eval_sums_over_dp(const Parallel& par, const torch::Tensor& device_sums,
                                      int64_t width, const std::vector<double>& tail);

// Throws std::invalid_argument naming use_dft_loss, use_eaft_loss or use_asft_loss when `cfg`
// sets one for a stage other than sft (they replace the SFT loss).
void refuse_sft_losses(const RunConfig& cfg);

// The objective of cfg.stage over `m` (which outlives it), reporting through `reporter`; one
// factory per stage.
std::unique_ptr<Objective> make_objective(StepModels& m, RunReporter& reporter);
std::unique_ptr<Objective> make_sft_objective(StepModels& m, RunReporter& reporter);
std::unique_ptr<Objective> make_dpo_objective(StepModels& m, RunReporter& reporter);
std::unique_ptr<Objective> make_rm_objective(StepModels& m, RunReporter& reporter);
std::unique_ptr<Objective> make_kto_objective(StepModels& m, RunReporter& reporter);

// Mean loss per valid target token over `samples`, no gradients, the plain token loss (what
// `studio-train eval` prints). Under SP/DP: this DP rank's share, split along the sequence;
// sums reduced over the world.
double mean_token_loss(CausalLM& model, ShardedState* sharding,
                       const std::vector<TokenizedSample>& samples, int64_t batch, int64_t pad_id,
                       const torch::Device& device, const Parallel& par);

}  // namespace studio::trainer
