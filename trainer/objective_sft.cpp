// stage: sft. The loss is the token cross-entropy summed over the valid targets of the global
// batch and divided by their number (whatever the accumulation, dp and sp), or one of its
// LLaMA-Factory variants: DFT and EAFT weight the tokens, ASFT adds a KL term to a frozen
// reference (use_dft_loss, use_eaft_loss, use_asft_loss).
#include <cmath>
#include <limits>
#include <stdexcept>

#include "objective.h"
#include "studio/trainer/batching/sampler.h"
#include "studio/trainer/loss.h"

namespace studio::trainer {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ASFT's frozen reference (use_asft_loss): its model, its sharding and the KL term's weight.
struct LossReference {
  CausalLM* model = nullptr;
  ShardedState* sharding = nullptr;
  double alpha = 0;
  bool adapters_off = false;  // the reference is the LoRA policy's base (StepModels)

  // The reference's final hidden states and LM head for `b` (its outer weights stay gathered
  // until done()), or nothing without a reference.
  KlReference forward(const Batch& b, const torch::Device& device) const {
    KlReference kl;
    if (model == nullptr) return kl;
    torch::NoGradGuard no_grad;
    std::optional<AdaptersDisabled> base;
    if (adapters_off) base.emplace();
    if (sharding) sharding->begin_forward();
    kl.hidden = (*model)->hidden_states(b.input_ids.to(device), b.position_ids.to(device));
    kl.weight = (*model)->lm_head_weight();
    kl.alpha = alpha;
    kl.softcap = (*model)->info().final_logit_softcapping;
    return kl;
  }
  void done() const {
    // Not while the policy's training micro-batch (whose sharding a base reference shares)
    // still has its backward to run.
    if (model && sharding && !sharding->in_micro_batch()) sharding->end_forward();
  }
  // A ZeRO-3 rank with no batch left gathers as a forward would (after the policy's).
  void idle() const {
    if (model && sharding) sharding->idle_forward();
  }
};

// Mean loss per valid target token over `samples`, no gradients (`weighting`, `reference`: the
// DFT, EAFT or ASFT loss the run trains with). Under SP/DP: this DP rank's share of the samples,
// split along the sequence; sums reduced over the world.
double mean_loss(CausalLM& model, ShardedState* sharding, const std::vector<TokenizedSample>& samples,
                 int64_t batch, int64_t pad_id, const torch::Device& device, const Parallel& par,
                 const TokenWeighting& weighting = {}, const LossReference& reference = {}) {
  torch::NoGradGuard no_grad;
  double sum = 0;
  int64_t valid = 0;
  for (const auto& idx : par.dp_batches(samples.size(), batch)) {
    auto rows = pick(samples, idx);
    for (const auto* r : rows) valid += count_valid_targets(*r);
    Batch b = par.local_batch(model, rows, pad_id);
    if (sharding) sharding->begin_forward();
    auto hidden = model->hidden_states(b.input_ids.to(device), b.position_ids.to(device));
    sum += lm_cross_entropy_sum(hidden, model->lm_head_weight(), b.targets, 0,
                                model->info().final_logit_softcapping, weighting,
                                reference.forward(b, device))
               .item<double>();
    reference.done();
    if (sharding) sharding->end_forward();
  }
  // ZeRO-3 forwards gather over the whole world: every DP rank runs as many.
  if (sharding)
    for (size_t k = par.dp_batches(samples.size(), batch).size();
         k < par.most_dp_batches(samples.size(), batch); ++k) {
      sharding->idle_forward();
      reference.idle();
    }
  // Token sums are partial per SP rank (sum over the world); counts are per sample (over DP).
  sum = par.sum(par.world_group(), {sum}, "eval loss")[0];
  valid = static_cast<int64_t>(par.sum(par.dp_group(), {static_cast<double>(valid)}, "eval tokens")[0]);
  return valid > 0 ? sum / static_cast<double>(valid) : kNaN;
}

class SftObjective final : public Objective {
 public:
  explicit SftObjective(StepModels& m) : m_(m), cfg_(m.cfg), in_(m.in) {}

  void check() const override {
    if (int(cfg_.use_dft_loss) + int(cfg_.use_eaft_loss) + int(cfg_.use_asft_loss) > 1)
      throw std::invalid_argument(
          "more than one of use_dft_loss, use_eaft_loss and use_asft_loss is set: choose one");
  }

  size_t train_size() const override { return in_.train.size(); }
  const char* no_train_data() const override { return "no training samples"; }
  // dynamic_padding_free packs each micro-batch's samples into one row, isolated.
  bool isolates_packed_sequences() const override { return pack_micro_batches(); }
  bool batch_lengths(std::vector<int64_t>& lengths) const override {
    if (!cfg_.dynamic_batching()) return false;
    lengths.reserve(in_.train.size());
    for (const auto& sample : in_.train) lengths.push_back(static_cast<int64_t>(sample.input_ids.size()));
    return true;
  }

  // ASFT's KL term runs the reference on every micro-batch.
  bool needs_reference() const override { return cfg_.use_asft_loss; }
  bool keep_reference(CausalLM&) override { return true; }
  bool reference_forward_per_step() const override { return cfg_.use_asft_loss; }

  MicroCounts count(const std::vector<size_t>& micro) const override {
    MicroCounts c;
    for (size_t i : micro) c.normaliser += static_cast<double>(count_valid_targets(in_.train[i]));
    const auto rows = pick(in_.train, micro);  // packed or not: the same tokens and spans
    c.tokens = sample_tokens(rows);
    c.span_term = span_term(rows, m_.par.neat_packing, in_.model);
    return c;
  }

  MicroLoss micro_loss(const std::vector<size_t>& micro) override {
    std::vector<TokenizedSample> packed;
    const auto rows = micro_rows(micro, packed);
    Batch b = m_.par.local_batch(m_.model, rows, in_.pad_id);
    auto hidden = m_.forward_hidden(m_.model, b);
    // ASFT: the reference's forward (after the policy's) and its hidden states, gone before the
    // backward (the loss forms its gradients in the forward).
    const LossReference reference = loss_reference();
    auto sum = lm_cross_entropy_sum(hidden, m_.model->lm_head_weight(), b.targets, 0,
                                    m_.model->info().final_logit_softcapping, token_weighting(),
                                    reference.forward(b, m_.device));
    reference.done();
    return {sum, {}};
  }

  // Token sums are partial per SP rank: the sum over the world.
  void reduce(StepStats& st, double loss_sum, const torch::Tensor&) override {
    st.loss_sum = m_.par.sum(m_.par.world_group(), {loss_sum}, "loss")[0];
  }

  double evaluate() override {
    if (in_.eval.empty()) return kNaN;
    return mean_loss(m_.model, m_.zero.get(), in_.eval, cfg_.per_device_eval_batch_size,
                     in_.pad_id, m_.device, m_.par, token_weighting(), loss_reference());
  }

 private:
  bool pack_micro_batches() const {
    return cfg_.batching_strategy == Batching::DynamicPaddingFree;
  }
  // The rows a micro-batch of samples trains as: the samples, or (pack_micro_batches) one row
  // holding them all, in `storage`.
  std::vector<const TokenizedSample*> micro_rows(const std::vector<size_t>& micro,
                                                 std::vector<TokenizedSample>& storage) const {
    auto rows = pick(in_.train, micro);
    if (!pack_micro_batches() || rows.size() < 2) return rows;
    std::vector<std::vector<size_t>> members;
    storage = pack_samples(rows, sample_tokens(rows), &members);
    return {&storage.front()};
  }
  // ASFT is the DFT loss plus its KL term (loss_reference()).
  TokenWeighting token_weighting() const {
    return {cfg_.use_dft_loss || cfg_.use_asft_loss, cfg_.use_eaft_loss, cfg_.eaft_alpha};
  }
  LossReference loss_reference() const {
    if (!cfg_.use_asft_loss) return {};
    return {&m_.ref_model, m_.ref_sharding(), cfg_.asft_alpha, m_.reference_is_base};
  }

  StepModels& m_;
  const RunConfig& cfg_;
  const TrainInputs& in_;
};

}  // namespace

std::unique_ptr<Objective> make_sft_objective(StepModels& m, RunReporter&) {
  return std::make_unique<SftObjective>(m);
}

double mean_token_loss(CausalLM& model, ShardedState* sharding,
                       const std::vector<TokenizedSample>& samples, int64_t batch, int64_t pad_id,
                       const torch::Device& device, const Parallel& par) {
  return mean_loss(model, sharding, samples, batch, pad_id, device, par);
}

}  // namespace studio::trainer
