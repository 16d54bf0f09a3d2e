#include "studio/trainer/train_loop.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <stdexcept>

#include "studio/trainer/checkpoint.h"
#include "studio/trainer/data/sampler.h"
#include "studio/trainer/hf_checkpoint.h"
#include "studio/trainer/loss.h"
#include "studio/trainer/metrics/run_reporter.h"
#include "studio/trainer/model/decoder.h"
#include "studio/trainer/model_folder.h"
#include "studio/trainer/optim/adamw.h"
#include "studio/trainer/optim/lr_schedule.h"
#include "studio/trainer/optim/master_weights.h"
#include "studio/trainer/runtime_info.h"

namespace fs = std::filesystem;

namespace studio::trainer {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

torch::Dtype compute_dtype(const RunConfig& cfg) {
  if (cfg.fp16)
    throw std::invalid_argument("fp16: fp16 training needs loss scaling, which studio-train does "
                                "not implement; use bf16: true");
  return cfg.bf16 || cfg.pure_bf16 ? torch::kBFloat16 : torch::kFloat;
}

struct StepStats {
  double loss_sum = 0;
  int64_t valid = 0;
  int64_t tokens = 0;
  double grad_norm = kNaN;
};

// Mean loss per valid target token over `samples`, no gradients.
double mean_loss(CausalLM& model, const std::vector<TokenizedSample>& samples, int64_t batch,
                 int64_t pad_id, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  double sum = 0;
  int64_t valid = 0;
  for (size_t start = 0; start < samples.size(); start += static_cast<size_t>(batch)) {
    std::vector<const TokenizedSample*> rows;
    for (size_t i = start; i < std::min(samples.size(), start + static_cast<size_t>(batch)); ++i)
      rows.push_back(&samples[i]);
    Batch b = make_batch(rows, pad_id);
    auto hidden = model->hidden_states(b.input_ids.to(device), b.position_ids.to(device));
    sum += lm_cross_entropy_sum(hidden, model->lm_head_weight(), b.targets.to(device))
               .item<double>();
    valid += b.valid_tokens;
  }
  return valid > 0 ? sum / static_cast<double>(valid) : kNaN;
}

}  // namespace

struct Trainer::Impl {
  TrainInputs in;
  const RunConfig& cfg;
  torch::Device device{torch::kCPU};
  CausalLM model{nullptr};
  std::unique_ptr<MasterWeights> masters;
  std::unique_ptr<torch::optim::AdamW> optimizer;
  std::unique_ptr<EpochPlanner> planner;
  LrSchedule schedule;
  TrainerState state;
  RunReporter reporter;
  std::string resume_dir;

  explicit Impl(TrainInputs inputs)
      : in(std::move(inputs)),
        cfg(in.config),
        reporter(in.config.output_dir, /*enabled=*/true, in.terminal) {}

  void find_resume_point() {
    if (cfg.resume_from_checkpoint) {
      resume_dir = *cfg.resume_from_checkpoint;
    } else if (!cfg.overwrite_output_dir) {
      // As LLaMA-Factory: an output_dir holding checkpoints continues from the last one.
      if (auto last = last_checkpoint(cfg.output_dir)) resume_dir = *last;
    }
  }

  void build_model() {
    if (torch::cuda::is_available()) device = torch::Device(torch::kCUDA, 0);
    ModelOptions opt;
    opt.dtype = compute_dtype(cfg);
    opt.device = device;
    opt.warn = [this](const std::string& note) { reporter.log("warning", note); };
    model = CausalLM(in.model, opt);
    model->set_gradient_checkpointing(cfg.gradient_checkpointing);
    load_weights(model, resume_dir.empty() ? in.model_dir : resume_dir);
    masters = std::make_unique<MasterWeights>(model->hf_state());
    if (masters->separate() && !resume_dir.empty()) {
      // The checkpoint holds the fp32 masters: take them as saved, not rounded through bf16.
      auto reader = CheckpointReader::open(resume_dir);
      torch::NoGradGuard no_grad;
      for (const auto& [name, p] : masters->params()) p.copy_(reader.tensor(name));
    }
    optimizer = make_adamw(masters->params(), cfg);
  }

  void plan_run() {
    SamplerOptions s;
    s.seed = static_cast<uint64_t>(cfg.seed);
    s.micro_batch = cfg.per_device_train_batch_size;
    s.accumulation = cfg.gradient_accumulation_steps;
    planner = std::make_unique<EpochPlanner>(in.train.size(), s);
    const int64_t per_epoch = planner->steps_per_epoch();
    const int64_t total =
        cfg.max_steps > 0
            ? cfg.max_steps
            : static_cast<int64_t>(std::ceil(cfg.num_train_epochs * static_cast<double>(per_epoch)));
    std::string error;
    schedule = make_lr_schedule(cfg, total, error);
    if (!error.empty()) throw std::invalid_argument(error);
    state.total_steps = schedule.total_steps;
    state.steps_per_epoch = per_epoch;
    state.seed = static_cast<uint64_t>(cfg.seed);
    if (resume_dir.empty()) return;
    state = load_trainer_state(resume_dir, optimizer.get());
    if (state.steps_per_epoch != per_epoch)
      reporter.log("warning", "the data changed since " + resume_dir + " (" +
                                  std::to_string(state.steps_per_epoch) + " steps per epoch then, " +
                                  std::to_string(per_epoch) + " now): the run does not continue "
                                  "exactly");
    state.steps_per_epoch = per_epoch;
    state.total_steps = schedule.total_steps;
  }

  StepStats train_step(const StepPlan& plan) {
    StepStats st;
    for (const auto& micro : plan)
      for (size_t i : micro) st.valid += count_valid_targets(in.train[i]);
    for (const auto& micro : plan) {
      std::vector<const TokenizedSample*> rows;
      for (size_t i : micro) rows.push_back(&in.train[i]);
      Batch b = make_batch(rows, in.pad_id);
      st.tokens += b.tokens;
      if (b.valid_tokens == 0) continue;
      auto hidden = model->hidden_states(b.input_ids.to(device), b.position_ids.to(device));
      auto sum = lm_cross_entropy_sum(hidden, model->lm_head_weight(), b.targets.to(device));
      // Normalised by the valid tokens of the whole step, so accumulation gives the loss of one
      // big batch (and SP=k the loss of SP=1).
      (sum / static_cast<double>(st.valid)).backward();
      st.loss_sum += sum.item<double>();
    }
    if (st.valid > 0) {
      masters->gather_grads();
      std::vector<torch::Tensor> params;
      for (const auto& [name, p] : masters->params()) params.push_back(p);
      const double max_norm = cfg.max_grad_norm > 0 ? cfg.max_grad_norm
                                                    : std::numeric_limits<double>::infinity();
      st.grad_norm = torch::nn::utils::clip_grad_norm_(params, max_norm);
      set_learning_rate(*optimizer, cfg.learning_rate * schedule.factor(state.global_step));
      optimizer->step();
    }
    optimizer->zero_grad();
    masters->scatter_weights();
    model->zero_grad();
    return st;
  }

  void save(int64_t step) {
    CheckpointData data;
    data.model = &masters->params();
    data.optimizer = cfg.save_only_model ? nullptr : optimizer.get();
    data.state = state;
    data.source_model_dir = in.model_dir;
    data.dtype = torch::kFloat;
    const std::string path = save_checkpoint(cfg.output_dir, data);
    if (cfg.save_total_limit) rotate_checkpoints(cfg.output_dir, *cfg.save_total_limit);
    reporter.checkpoint(step, path);
  }

  void save_final_model() {
    HfSaveOptions opt;
    opt.source_dir = in.model_dir;
    save_hf_model(cfg.output_dir, masters->params(), opt);
  }

  double evaluate() {
    if (in.eval.empty()) return kNaN;
    return mean_loss(model, in.eval, cfg.per_device_eval_batch_size, in.pad_id, device);
  }

  TrainResult run(const std::atomic<bool>* stop);
};

TrainResult Trainer::Impl::run(const std::atomic<bool>* stop) {
  TrainResult result;
  result.eval_loss = kNaN;
  StepEvent window;  // accumulates the logging interval
  double window_loss = 0;
  int64_t window_steps = 0, window_tokens = 0;
  double window_start = unix_time_now();
  const double run_start = window_start;
  const int64_t eval_every = cfg.eval_steps.value_or(cfg.logging_steps);

  while (state.global_step < state.total_steps) {
    const auto plan = planner->plan(state.data_epoch);
    while (state.step_in_epoch < static_cast<int64_t>(plan.size()) &&
           state.global_step < state.total_steps) {
      if (stop && stop->load()) {
        result.final_state = "stopped";
        result.steps = state.global_step;
        return result;
      }
      const double lr = cfg.learning_rate * schedule.factor(state.global_step);
      const StepStats st = train_step(plan[static_cast<size_t>(state.step_in_epoch)]);
      ++state.global_step;
      ++state.step_in_epoch;
      state.tokens_seen += st.tokens;
      const double loss = st.valid > 0 ? st.loss_sum / static_cast<double>(st.valid) : kNaN;
      result.step_losses.push_back(loss);
      window_loss += std::isnan(loss) ? 0 : loss;
      window_steps += std::isnan(loss) ? 0 : 1;
      window_tokens += st.tokens;

      const double now = unix_time_now();
      const bool last = state.global_step == state.total_steps;
      StepEvent e;
      e.step = state.global_step;
      e.epoch = state.epoch();
      e.loss = window_steps > 0 ? window_loss / static_cast<double>(window_steps) : kNaN;
      e.lr = lr;
      e.grad_norm = st.grad_norm;
      e.tokens = window_tokens;
      e.tokens_per_sec = static_cast<double>(window_tokens) / std::max(1e-9, now - window_start);
      e.elapsed = now - run_start;
      e.time = now;
      if (auto mem = host_memory_stats()) {
        e.rss_mib = mem->rss_mib;
        e.peak_rss_mib = mem->peak_rss_mib;
      }
      if (auto gpu = cuda_memory_stats())
        e.gpus.push_back({0, gpu->device, gpu->allocated_mib, gpu->reserved_mib,
                          gpu->peak_allocated_mib, kNaN});
      if (in.on_step) in.on_step(state.global_step, loss);
      const bool log_now = state.global_step % cfg.logging_steps == 0 || last;
      reporter.step(e, log_now);
      if (log_now) {
        window_loss = 0;
        window_steps = 0;
        window_tokens = 0;
        window_start = now;
      }
      if (cfg.eval_strategy == EvalStrategy::Steps && state.global_step % eval_every == 0) {
        result.eval_loss = evaluate();
        reporter.eval(state.global_step, result.eval_loss);
      }
      if (state.global_step % cfg.save_steps == 0 && !last) save(state.global_step);
    }
    if (state.step_in_epoch >= static_cast<int64_t>(plan.size())) {
      ++state.data_epoch;
      state.step_in_epoch = 0;
      if (cfg.eval_strategy == EvalStrategy::Epoch) {
        result.eval_loss = evaluate();
        reporter.eval(state.global_step, result.eval_loss);
      }
    }
  }
  save(state.global_step);
  save_final_model();
  result.steps = state.global_step;
  result.final_state = "finished";
  return result;
}

Trainer::Trainer(TrainInputs in) : impl_(std::make_unique<Impl>(std::move(in))) {}
Trainer::~Trainer() = default;

TrainResult Trainer::run(const std::atomic<bool>* stop) {
  Impl& t = *impl_;
  try {
    if (t.in.train.empty()) throw std::invalid_argument("no training samples");
    torch::manual_seed(static_cast<uint64_t>(t.cfg.seed));
    t.find_resume_point();
    t.build_model();
    t.plan_run();
    t.reporter.start(t.cfg, t.in.model, 1, t.state.total_steps, t.state.global_step);
    if (!t.resume_dir.empty())
      t.reporter.log("info", "resuming from " + t.resume_dir + " at step " +
                                 std::to_string(t.state.global_step));
    TrainResult r = t.run(stop);
    if (r.final_state == "stopped")
      t.reporter.end(RunState::Stopped, "stopped at step " + std::to_string(r.steps), 0);
    else
      t.reporter.end(RunState::Finished, "trained " + std::to_string(r.steps) + " steps", 0);
    return r;
  } catch (const std::exception& e) {
    t.reporter.log("error", e.what());
    t.reporter.end(RunState::Failed, e.what(), 1);
    throw;
  }
}

double Trainer::evaluate() { return impl_->evaluate(); }

double evaluate_model(const std::string& model_dir, const std::vector<TokenizedSample>& samples,
                      int64_t batch_size, int64_t pad_id) {
  CausalLM model = load_model_folder(model_dir);
  return mean_loss(model, samples, std::max<int64_t>(1, batch_size), pad_id, torch::kCPU);
}

}  // namespace studio::trainer
