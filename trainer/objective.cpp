#include "objective.h"

#include <algorithm>

#include <stdexcept>
#include <string>

#include "studio/trainer/loss.h"
#include "studio/trainer/parallel/reduce.h"

namespace studio::trainer {

torch::Tensor StepModels::forward_hidden(CausalLM& m, const Batch& b) {
  MoeAuxLoss* aux = aux_weight > 0 && m.ptr() == model.ptr() && torch::GradMode::is_enabled()
                        ? m->moe_aux()
                        : nullptr;
  torch::Tensor ids, positions;
  {
    const dist::StepClock::Span counted_as(dist::StepTime::Data);
    if (aux) aux->begin(b.token_mask.to(device));
    ids = b.input_ids.to(device);
    positions = b.position_ids.to(device);
  }
  auto hidden = m->hidden_states(ids, positions);
  if (aux) {
    dist::Group* sp = par.sequence_parallel() ? par.sp_group() : nullptr;
    aux_value = aux->finish(aux_weight, [sp](torch::Tensor& t) {
      if (sp) sp->all_reduce_sum(t, "MoE auxiliary loss counts");
    });
  }
  return hidden;
}

void StepModels::end_aux() {
  if (MoeAuxLoss* aux = model->moe_aux()) aux->end();
}

std::pair<torch::Tensor, Batch> StepModels::target_logprobs(
    CausalLM& m, const std::vector<const TokenizedSample*>& rows) {
  Batch b = par.local_batch(m, rows, in.pad_id);
  ShardedState* sharding = sharding_of(m);
  if (sharding) sharding->begin_forward();
  auto hidden = forward_hidden(m, b);
  auto logps = lm_target_logprobs(hidden, m->lm_head_weight(), b.targets, 0,
                                  m->info().final_logit_softcapping);
  // Without a backward to come the weights go now (training: after its backward) -- unless this
  // was the base-model reference of a LoRA run inside a training micro-batch, whose policy
  // backward still needs the outer weights the policy's forward gathered.
  if (sharding && !torch::GradMode::is_enabled() && !sharding->in_micro_batch())
    sharding->end_forward();
  return {logps, std::move(b)};
}

torch::Tensor StepModels::sp_sum(const torch::Tensor& sums) const {
  return par.sequence_parallel()
             ? dist::all_reduce_sum_identity_grad(sums.contiguous(), *par.sp_group(),
                                                  "sequence log-probs")
             : sums;
}

std::vector<double> sum_over_dp(const Parallel& par, StepStats& st, double loss_sum,
                                const torch::Tensor& metric_sums, int64_t count) {
  std::vector<double> sums(static_cast<size_t>(count) + 1, 0.0);
  if (metric_sums.defined()) {
    const auto host = metric_sums.to(torch::kCPU, torch::kDouble).contiguous();
    for (int64_t i = 0; i < count; ++i) sums[static_cast<size_t>(i)] = host[i].item<double>();
  }
  sums.back() = loss_sum;
  sums = par.sum(par.dp_group(), sums, "loss");
  st.loss_sum = sums.back();
  sums.pop_back();
  return sums;
}

std::vector<double> eval_sums_over_dp(const Parallel& par, const torch::Tensor& device_sums,
                                      int64_t width, const std::vector<double>& tail) {
  std::vector<double> sums(static_cast<size_t>(width), 0.0);
  if (device_sums.defined()) {
    const auto host = device_sums.to(torch::kCPU, torch::kDouble).contiguous();
    std::copy(host.data_ptr<double>(), host.data_ptr<double>() + width, sums.begin());
  }
  sums.insert(sums.end(), tail.begin(), tail.end());
  return par.sum(par.dp_group(), sums, "eval loss");
}

void refuse_sft_losses(const RunConfig& cfg) {
  if (cfg.use_dft_loss || cfg.use_eaft_loss || cfg.use_asft_loss)
    throw std::invalid_argument(std::string(cfg.use_dft_loss    ? "use_dft_loss"
                                            : cfg.use_eaft_loss ? "use_eaft_loss"
                                                                : "use_asft_loss") +
                                ": applies to stage sft only (it replaces the SFT loss); remove "
                                "it for stage " + std::string(to_string(cfg.stage)));
}

std::unique_ptr<Objective> make_objective(StepModels& m, RunReporter& reporter) {
  switch (m.cfg.stage) {
    case Stage::Dpo:
      return make_dpo_objective(m, reporter);
    case Stage::Rm:
      return make_rm_objective(m, reporter);
    case Stage::Kto:
      return make_kto_objective(m, reporter);
    case Stage::Pt:  // LLaMA-Factory's pt trainer is the causal-LM loss on texts whose every
                     // token is a label: the SFT objective on those samples (app: load_pt_data)
    case Stage::Sft:
      break;
  }
  return make_sft_objective(m, reporter);
}

}  // namespace studio::trainer
