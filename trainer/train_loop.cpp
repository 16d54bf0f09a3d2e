// The step and the loop of steps (train_loop_impl.h), the figures each step event carries
// (memory, rank times, MFU), and Trainer's own members (train_loop.h).
#include "train_loop_impl.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "studio/config/deepspeed.h"
#include "studio/config/memory_estimate.h"
#include "studio/model_facts/model_flops.h"
#include "studio/trainer/fault_injection.h"
#include "studio/trainer/loss.h"
#include "studio/trainer/metrics/gpu_activity.h"
#include "studio/trainer/metrics/profile_capture.h"
#include "studio/trainer/parallel/reduce.h"
#include "studio/trainer/parallel/step_clock.h"
#include "studio/trainer/runtime_info.h"
#include "studio/trainer/tensors/host_allocator.h"

namespace fs = std::filesystem;

namespace studio::trainer {
namespace {

// "the loss is nan and the gradient norm is inf" for the values that are not finite.
std::string nonfinite_text(double loss, double grad_norm) {
  std::vector<std::string> parts;
  auto text = [](double v) { return std::isnan(v) ? std::string("nan") : v > 0 ? "inf" : "-inf"; };
  if (!std::isfinite(loss)) parts.push_back("the loss is " + text(loss));
  if (!std::isfinite(grad_norm)) parts.push_back("the gradient norm is " + text(grad_norm));
  if (parts.empty()) return "the values are finite";
  return parts.size() == 1 ? parts[0] : parts[0] + " and " + parts[1];
}

}  // namespace

std::string Trainer::Impl::out_of_memory(const std::string& torch_message, int64_t step) {
  std::string text = "out of memory on rank " + std::to_string(par.rank()) + " at step " +
                     std::to_string(step) + ", in " + phase + ": " +
                     torch_message.substr(0, torch_message.find('\n'));
  EstimateOptions eo;
  eo.nproc_per_node = par.world();
  eo.cpu = !device.is_cuda();
  if (cfg.deepspeed) {
    std::string error;
    eo.deepspeed = read_deepspeed_json(*cfg.deepspeed, error);
  }
  if (device.is_cuda())
    for (const auto& d : query_runtime_info().devices)
      if (d.index == device.index()) eo.gpu_capacity_bytes = double(d.total_memory_bytes);
  const MemoryEstimate est = estimate_memory(cfg, in.model, eo);
  char line[160];
  std::snprintf(line, sizeof line, ". The memory estimate for this run is %.1f GiB per rank",
                est.bytes.total() / (1024.0 * 1024.0 * 1024.0));
  text += line;
  if (eo.gpu_capacity_bytes > 0) {
    std::snprintf(line, sizeof line, " of the GPU's %.1f GiB",
                  eo.gpu_capacity_bytes / (1024.0 * 1024.0 * 1024.0));
    text += line;
  }
  std::vector<std::string> options;
  if (const auto sp = smallest_fitting_sp(cfg, in.model, eo);
      sp && *sp > cfg.sequence_parallel_size)
    options.push_back("sequence_parallel_size: " + std::to_string(*sp));
  if (const auto cutoff = longest_fitting_cutoff(cfg, in.model, eo);
      cutoff && *cutoff < cfg.cutoff_len)
    options.push_back("cutoff_len: " + std::to_string(*cutoff));
  if (!cfg.gradient_checkpointing) options.push_back("gradient_checkpointing: true");
  if (zero_options.stage < 3) options.push_back("ZeRO stage 3 (zero_stage: 3)");
  if (!cfg.offload_optimizer) options.push_back("offload_optimizer: true");
  if (!cfg.tiled_mlp) options.push_back("tiled_mlp: true");
  if (cfg.per_device_train_batch_size > 1)
    options.push_back("per_device_train_batch_size: 1 with more gradient_accumulation_steps");
  text += "; what lowers it (studio-train estimate shows each): ";
  for (size_t i = 0; i < options.size(); ++i) text += (i ? ", " : "") + options[i];
  if (options.empty()) text += "a larger sequence_parallel_size or a shorter cutoff_len";
  return text;
}

StepStats Trainer::Impl::train_step(const StepPlan& plan) {
  StepStats st;
  // The normaliser of the whole global batch (valid tokens, or pairs), summed over DP: each
  // micro-batch's backward is then a share of the loss of one big batch, whatever the
  // accumulation, dp and sp.
  double local_norm = 0, local_spans = 0;
  int64_t local_tokens = 0;
  const auto local_micro = static_cast<double>(plan.size());
  {
    const dist::StepClock::Span counted_as(dist::StepTime::Data);
    for (const auto& micro : plan) {
      const MicroCounts c = objective->count(micro);
      local_norm += c.normaliser;
      local_tokens += c.tokens;
      local_spans += c.span_term;
    }
  }
  const auto totals = par.sum(
      par.dp_group(), {local_norm, static_cast<double>(local_tokens), local_spans, local_micro},
      "batch size");
  st.normaliser = totals[0];
  st.tokens = static_cast<int64_t>(totals[1]);
  st.span_term = totals[2];
  st.micro_batches = totals[3];
  // The aux loss of the step: the mean over the global batch's micro-batches (each one's aux
  // over its whole sequences, whatever SP splits), times the coefficient.
  aux_weight = aux_coef > 0 && st.micro_batches > 0 ? aux_coef / st.micro_batches : 0;
  torch::Tensor aux_acc;  // this rank's sum of its micro-batches' aux

  // Loss and metric sums stay on the device until the whole step is queued: the host waits
  // for the device once per step, at the end (docs/PERFORMANCE.md, "Host-device syncs").
  torch::Tensor metric_sums;  // the objective's metrics summed over this rank's micro-batches
  torch::Tensor loss_acc;     // this rank's loss sum
  auto accumulate = [](torch::Tensor& acc, const torch::Tensor& v) {
    acc = acc.defined() ? acc + v.detach() : v.detach();
  };
  for (const auto& micro : plan) {
    if (st.normaliser <= 0) break;
    const std::string of = " of micro-batch " + std::to_string(st.micro_losses.size() + 1) +
                           " of " + std::to_string(plan.size());
    // Every rank's gradient covers its own tokens of its own samples: their sum over the
    // world (the ZeRO stage's reduction) is the gradient of the global batch's loss
    // (= SUM over SP of MEAN-over-DP shares).
    zero->begin_micro_batch(&micro == &plan.back());
    // The MoE auxiliary loss a forward starts ends with this micro-batch, however it ends.
    const std::unique_ptr<StepModels, void (*)(StepModels*)> aux_guard(
        &m, [](StepModels* models) { models->end_aux(); });
    phase = "the forward" + of;
    if (fault_requested("oom", state.global_step + 1, par.rank()))
      TORCH_CHECK_WITH(OutOfMemoryError, false,
                       "CUDA out of memory. Tried to allocate 2.00 GiB (injected by "
                       "STUDIO_INJECT_FAULT=oom)");
    MicroLoss out = objective->micro_loss(micro);
    auto sum = out.sum;
    if (fault_requested("loss.nan", state.global_step + 1, par.rank()))
      sum = sum * std::numeric_limits<double>::quiet_NaN();
    st.micro_losses.push_back(sum.detach());
    phase = "the backward" + of;
    (sum / st.normaliser).backward();
    accumulate(loss_acc, sum);
    if (out.metrics.defined()) accumulate(metric_sums, out.metrics);
    if (aux_weight > 0) accumulate(aux_acc, m.aux_value);
    zero->end_backward();
  }
  measure_model_states();
  torch::Tensor grad_norm;
  phase = "the gradient clipping and optimizer step";
  if (st.normaliser > 0) {
    const double max_norm =
        cfg.max_grad_norm > 0 ? cfg.max_grad_norm : std::numeric_limits<double>::infinity();
    grad_norm = zero->clip_gradients(max_norm);
    if (cfg.skip_nonfinite_steps > 0) {
      // Skipping is decided before the update: one more wait for the device, and every rank
      // learns whether any rank's loss is not finite (the norm is the same everywhere).
      const double local_loss = loss_acc.defined() ? loss_acc.item<double>() : 0.0;
      const double bad_loss =
          par.sum(par.world_group(), {std::isfinite(local_loss) ? 0.0 : 1.0}, "finite loss")[0];
      st.skipped = bad_loss > 0 || !std::isfinite(grad_norm.item<double>());
    }
    if (st.skipped)
      zero->skip_step();
    else
      zero->step(cfg.learning_rate * schedule.factor(state.global_step));
  }
  // The step's one wait for the device: its loss, metrics and gradient norm, read together.
  const double loss_sum = loss_acc.defined() ? loss_acc.item<double>() : 0.0;
  if (grad_norm.defined()) st.grad_norm = grad_norm.item<double>();
  if (aux_weight > 0) {
    // Every rank of an SP group holds the same aux per micro-batch: the mean over DP.
    const double local_aux = aux_acc.defined() ? aux_acc.item<double>() : 0.0;
    st.aux_loss = par.sum(par.dp_group(), {local_aux}, "MoE auxiliary loss")[0] / st.micro_batches;
    st.aux_term = aux_coef * st.aux_loss;
  }
  // The objective's sums over the grid (every rank runs them, whatever its data).
  objective->reduce(st, loss_sum, metric_sums);
  return st;
}

std::string Trainer::Impl::nonfinite_where(const StepStats& st) {
  const int world = par.world();
  std::vector<double> slots(2 * static_cast<size_t>(world), 0.0);
  if (!st.micro_losses.empty()) {
    const auto bad =
        torch::isfinite(torch::stack(st.micro_losses)).logical_not().to(torch::kCPU).nonzero();
    if (bad.numel() > 0) slots[2 * par.rank()] = double(bad[0][0].item<int64_t>() + 1);
    slots[2 * par.rank() + 1] = double(st.micro_losses.size());
  }
  const auto all = par.sum(par.world_group(), slots, "non-finite micro-batch");
  for (int r = 0; r < world; ++r)
    if (all[2 * r] > 0)
      return " (first on rank " + std::to_string(r) + ", in the loss of micro-batch " +
             std::to_string(int64_t(all[2 * r])) + " of " +
             std::to_string(int64_t(all[2 * r + 1])) + ")";
  return " (every micro-batch's loss was finite on every rank: the gradients overflowed)";
}

void Trainer::Impl::agree(const std::string& error, const std::string& what) {
  const double failed = error.empty() ? 0.0 : 1.0;
  if (par.sum(par.world_group(), {failed}, what)[0] == 0) return;
  throw std::runtime_error(!error.empty() ? error
                                          : what + " failed on another rank (see its error)");
}

double Trainer::Impl::allocated_mib_now() const {
  if (device.is_cuda()) {
    const auto m = cuda_memory_stats(device.index());
    return m ? m->allocated_mib : kNaN;
  }
  return static_cast<double>(host_allocator_stats().allocated) / kMiB;
}

void Trainer::Impl::measure_model_states() {
  if (!std::isnan(model_states_mib)) return;
  // A backend may drop an operation's buffers only some time after its wait returns (Gloo's
  // worker thread releases the finished work after waking the waiter, and on a loaded
  // machine it may not run for a while): the steady state is measured, the smallest of
  // samples 10 ms apart, once the same value has been seen three times in a row (at most
  // one second). A barrier first, so that no peer's collective is still being served.
  if (par.world_group()) par.world_group()->barrier("model-state measurement");
  double least = allocated_mib_now();
  for (int same = 1, k = 0; same < 3 && k < 100; ++k) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const double now = allocated_mib_now();
    same = now == least ? same + 1 : 1;
    least = std::min(least, now);
  }
  model_states_mib = least - states_baseline_mib;
  offloaded_mib = device.is_cuda() ? static_cast<double>(zero->bytes().offloaded) / kMiB
                                   : static_cast<double>(host_allocator_stats().offloaded) / kMiB;
  reporter.log("info", "model states on rank " + std::to_string(par.rank()) + ": " +
                           format_mib(model_states_mib) + " MiB measured (ZeRO stage " +
                           std::to_string(zero_options.stage) + " over " +
                           std::to_string(zero->shards()) + " rank(s); " +
                           format_mib(offloaded_mib) + " MiB of it offloaded)");
}

std::string Trainer::Impl::format_mib(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

void Trainer::Impl::count_step_time(double wall_s) {
  const auto parts = dist::StepClock::instance().take();
  double counted = 0;
  for (double p : parts) counted += p;
  window_time[0] += std::max(0.0, wall_s - counted);
  window_time[1] += parts[static_cast<size_t>(dist::StepTime::SpComm)];
  window_time[2] += parts[static_cast<size_t>(dist::StepTime::GradComm)];
  window_time[3] += parts[static_cast<size_t>(dist::StepTime::Data)];
  window_time[4] += parts[static_cast<size_t>(dist::StepTime::Wait)];
  ++window_timed_steps;
}

std::vector<GpuMemory> Trainer::Impl::rank_stats(std::vector<RankTime>& times) {
  std::vector<GpuMemory> out;
  std::vector<double> v;
  if (device.is_cuda()) {
    // This rank's own device, explicitly (not whatever is current on this thread).
    auto mine = cuda_memory_stats(device.index());
    reset_cuda_peak_memory(device.index());  // peak_mib: since the previous step event
    v = {mine ? mine->allocated_mib : kNaN, mine ? mine->reserved_mib : kNaN,
         mine ? mine->peak_allocated_mib : kNaN, mine ? mine->total_mib : kNaN,
         static_cast<double>(device.index())};
  } else {
    const auto h = host_allocator_stats();
    reset_host_allocator_peak();
    const auto rss = host_memory_stats();
    // The "device side", as a GPU run counts its GPU: what offload put in host memory
    // (optimizer states, activations) is not in allocated or peak but in offloaded_mib. No
    // capacity line: the machine's memory is shared with everything else on it.
    v = {static_cast<double>(h.allocated - h.offloaded) / kMiB, rss ? rss->rss_mib : kNaN,
         static_cast<double>(h.device_peak) / kMiB, kNaN, -1.0};
  }
  v.push_back(model_states_mib);
  v.push_back(offloaded_mib);
  const auto activity = device.is_cuda() ? gpu_activity(device.index()) : std::nullopt;
  v.push_back(activity ? activity->util_percent : kNaN);
  v.push_back(activity ? activity->power_w : kNaN);
  v.push_back(activity && activity->power_limit_w > 0 ? activity->power_limit_w : kNaN);
  const auto steps = static_cast<double>(std::max<int64_t>(1, window_timed_steps));
  for (double t : window_time) v.push_back(t / steps);
  window_time = {};
  window_timed_steps = 0;
  const int world = par.world();
  const auto cols = static_cast<int64_t>(v.size());
  auto all = torch::zeros({world, cols}, torch::kDouble);
  all[par.rank()] = torch::tensor(v, torch::kDouble);
  if (par.world_group() && world > 1) {
    auto here = device.is_cuda() ? all.to(device) : all;
    par.world_group()->all_reduce_sum(here, "memory stats");
    all = here.cpu();
  }
  const auto a = all.accessor<double, 2>();  // host values, read in place
  for (int r = 0; r < world; ++r) {
    // The columns of v above, in GpuMemory's and RankTime's member order.
    out.push_back(GpuMemory{r, static_cast<int>(a[r][4]), a[r][0], a[r][1], a[r][2], a[r][3],
                            a[r][5], a[r][6], a[r][7], a[r][8], a[r][9]});
    times.push_back(RankTime{r, a[r][10], a[r][11], a[r][12], a[r][13], a[r][14]});
  }
  return out;
}

void Trainer::Impl::find_peak() {
  if (device.is_cuda())
    for (const auto& d : query_runtime_info().devices)
      if (d.index == device.index()) device_name_ = d.name;
  peak_tflops_ = peak_tflops(device_name_, torch_dtype_name(compute_dtype(cfg)));
}

TrainResult Trainer::Impl::run(const std::atomic<bool>* stop) {
  TrainResult result;
  result.eval_loss = kNaN;
  double window_loss = 0, window_aux = 0;
  int64_t window_steps = 0, window_tokens = 0, window_aux_steps = 0;
  int64_t window_diverged = 0;  // steps of the window whose loss was not finite
  double window_spans = 0;
  double window_start = unix_time_now();
  const double run_start = window_start;
  const int64_t eval_every = cfg.eval_steps.value_or(cfg.logging_steps);
  int64_t nonfinite_in_a_row = 0;
  last_saved_dir = resume_dir;
  if (!batching_note.empty()) reporter.log("info", batching_note);

  // STUDIO_CUDA_MEMORY_SNAPSHOT (metrics/profile_capture.h): the first two steps' allocations.
  CudaMemorySnapshot snapshot(
      device, par.rank(), state.global_step + 2,
      [this](const std::string& level, const std::string& line) { reporter.log(level, line); });

  while (state.global_step < state.total_steps) {
    const auto plan = planner->plan(state.data_epoch);
    state.steps_per_epoch = std::max<int64_t>(1, static_cast<int64_t>(plan.size()));
    while (state.step_in_epoch < static_cast<int64_t>(plan.size()) &&
           state.global_step < state.total_steps) {
      // The step's time, from here to its loss being known (count_step_time).
      const auto step_began = std::chrono::steady_clock::now();
      dist::StepClock::instance().take();  // what came after the previous step is not its
      if (par.comm) par.comm->set_step(state.global_step);
      if (fault_requested("stall", state.global_step + 1, par.rank())) ::raise(SIGSTOP);
      if (fault_requested("slow", state.global_step + 1, par.rank()))
        std::this_thread::sleep_for(std::chrono::seconds(1));
      if (fault_requested("crash", state.global_step + 1, par.rank())) ::raise(SIGKILL);
      // A stop request on any rank stops all of them at the same step; a checkpoint request
      // (in.checkpoint_stop) on any rank makes every rank save first.
      // The same sum tells whether every rank has written its part of a background save.
      const double stop_here = stop && stop->load() ? 1.0 : 0.0;
      const double save_here = in.checkpoint_stop && in.checkpoint_stop->load() ? 1.0 : 0.0;
      const auto flags =
          par.sum(par.world_group(), {stop_here, save_here, save_written()}, "stop flag");
      if (pending_save && flags[2] == static_cast<double>(par.world())) finish_save();
      if (flags[0] > 0) {
        finish_save();
        result.final_state = "stopped";
        result.steps = state.global_step;
        // save_on_stop: the step every rank has just finished, as a checkpoint to resume from
        // (none before the first step; the one already there when this step was saved).
        if ((cfg.save_on_stop || flags[1] > 0) && state.global_step > 0) {
          const std::string dir =
              (fs::path(cfg.output_dir) / checkpoint_name(state.global_step)).string();
          if (last_saved_dir != dir) save(state.global_step, /*finish=*/true);
          result.stop_checkpoint = dir;
        }
        return result;
      }
      if (fault_requested("stop", state.global_step + 1, par.rank())) {
        if (std::getenv("STUDIO_LAUNCHED")) ::kill(::getppid(), SIGTERM);
        ::raise(SIGTERM);
      }
      const double lr = cfg.learning_rate * schedule.factor(state.global_step);
      StepStats st;
      try {
        st = train_step(plan[static_cast<size_t>(state.step_in_epoch)]);
      } catch (const c10::OutOfMemoryError& e) {
        throw std::runtime_error(out_of_memory(e.what_without_backtrace(), state.global_step + 1));
      }
      count_step_time(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - step_began).count());
      snapshot.after_step(state.global_step + 1);
      const double loss = st.normaliser > 0 ? st.loss_sum / st.normaliser + st.aux_term : kNaN;
      // Not finite: every rank sees the same global loss and norm, so all decide alike.
      if (st.normaliser > 0 && (!std::isfinite(loss) || !std::isfinite(st.grad_norm))) {
        const std::string what = "step " + std::to_string(state.global_step + 1) + ": " +
                                 nonfinite_text(loss, st.grad_norm) + nonfinite_where(st);
        if (++nonfinite_in_a_row > cfg.skip_nonfinite_steps) {
          finish_save();  // every rank is here: the checkpoint being written is kept
          throw std::runtime_error(
              what +
              (cfg.skip_nonfinite_steps > 0
                   ? " (" + std::to_string(nonfinite_in_a_row) + " such steps in a row, " +
                         "more than skip_nonfinite_steps: " +
                         std::to_string(cfg.skip_nonfinite_steps) + ")"
                   : std::string()) +
              ": training stopped, and nothing of this step was saved" +
              (last_saved_dir.empty() ? std::string("; no checkpoint was saved yet")
                                      : "; the last checkpoint is " + last_saved_dir) +
              ". Lower learning_rate or set max_grad_norm, look for a bad sample in the data, or "
              "set skip_nonfinite_steps to skip such steps");
        }
        reporter.log("warning", what + ": skipped, no update (" +
                                    std::to_string(nonfinite_in_a_row) + " in a row of at most " +
                                    std::to_string(cfg.skip_nonfinite_steps) + ")");
      } else {
        nonfinite_in_a_row = 0;
      }
      ++state.global_step;
      ++state.step_in_epoch;
      state.tokens_seen += st.tokens;
      result.step_losses.push_back(loss);
      window_loss += std::isnan(loss) ? 0 : loss;
      if (std::isfinite(st.aux_loss)) window_aux += st.aux_loss, ++window_aux_steps;
      window_steps += std::isnan(loss) ? 0 : 1;
      window_diverged += st.normaliser > 0 && !std::isfinite(loss) ? 1 : 0;
      window_tokens += st.tokens;
      window_spans += st.span_term;
      objective->add_to_window(st);

      const double now = unix_time_now();
      const bool last = state.global_step == state.total_steps;
      StepEvent e;
      e.step = state.global_step;
      e.epoch = state.epoch();
      e.loss = window_steps > 0 ? window_loss / static_cast<double>(window_steps) : kNaN;
      if (window_aux_steps > 0) e.aux_loss = window_aux / static_cast<double>(window_aux_steps);
      e.lr = lr;
      e.grad_norm = st.grad_norm;
      // A diverged step's loss or norm is written as such (NaN, Infinity), not as "no value".
      if (window_diverged > 0 && !std::isfinite(e.loss)) e.set_not_finite(StepValue::Loss);
      if (st.normaliser > 0 && !std::isfinite(st.grad_norm)) e.set_not_finite(StepValue::GradNorm);
      e.tokens = window_tokens;
      e.tokens_per_sec = static_cast<double>(window_tokens) / std::max(1e-9, now - window_start);
      e.model_tflops = training_flops(in.model, static_cast<double>(window_tokens), window_spans,
                                      objective->reference_forward_per_step()) /
                       std::max(1e-9, now - window_start) / par.world() / 1e12;
      e.mfu = peak_tflops_ ? e.model_tflops / *peak_tflops_ : kNaN;
      e.elapsed = now - run_start;
      e.time = now;
      objective->write_window(e, window_steps);
      if (auto mem = host_memory_stats()) {
        e.rss_mib = mem->rss_mib;
        e.peak_rss_mib = mem->peak_rss_mib;
      }
      const bool log_now = state.global_step % cfg.logging_steps == 0 || last;
      if (log_now) e.gpus = rank_stats(e.rank_times);
      if (in.on_step) in.on_step(state.global_step, loss);
      reporter.step(e, log_now);
      if (log_now) {
        window_loss = 0;
        window_steps = 0;
        window_diverged = 0;
        window_aux = 0;
        window_aux_steps = 0;
        window_tokens = 0;
        window_spans = 0;
        objective->reset_window();
        window_start = now;
      }
      if (cfg.eval_strategy == EvalStrategy::Steps && state.global_step % eval_every == 0) {
        result.eval_loss = evaluate();
        reporter.eval(state.global_step, result.eval_loss, objective->eval_metrics());
      }
      if (state.global_step % cfg.save_steps == 0 && !last) save(state.global_step);
    }
    if (state.step_in_epoch >= static_cast<int64_t>(plan.size())) {
      ++state.data_epoch;
      state.step_in_epoch = 0;
      if (cfg.eval_strategy == EvalStrategy::Epoch) {
        result.eval_loss = evaluate();
        reporter.eval(state.global_step, result.eval_loss, objective->eval_metrics());
      }
    }
  }
  save(state.global_step, /*finish=*/true);
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
    if (t.objective->train_size() == 0) throw std::invalid_argument(t.objective->no_train_data());
    torch::manual_seed(static_cast<uint64_t>(t.cfg.seed));
    t.find_resume_point();
    install_counting_host_allocator();
    t.select_device();
    t.states_baseline_mib = t.allocated_mib_now();
    dist::StepClock::instance().start(t.device);
    const std::unique_ptr<dist::StepClock, void (*)(dist::StepClock*)> clock_stops(
        &dist::StepClock::instance(), [](dist::StepClock* c) { c->stop(); });
    t.resuming([&] { t.build_model(); });
    t.resuming([&] { t.plan_run(); });
    t.find_peak();
    t.reporter.start(t.cfg, t.in.model, t.par.world(), t.state.total_steps, t.state.global_step,
                     t.device_name_, t.peak_tflops_);
    for (const auto& note : t.start_notes) t.reporter.log("info", note);
    for (const auto& note : t.start_warnings) t.reporter.log("warning", note);
    if (!t.resume_dir.empty())
      t.reporter.log("info", "resuming from " + t.resume_dir + " at step " +
                                 std::to_string(t.state.global_step));
    TrainResult r = t.run(stop);
    if (r.final_state == "stopped")
      t.reporter.end(
          RunState::Stopped,
          "stopped at step " + std::to_string(r.steps) +
              (!r.stop_checkpoint.empty()
                   ? "; saved to resume from: resume_from_checkpoint: " + r.stop_checkpoint
               : t.cfg.save_on_stop ? "; no step done, nothing to save"
                                    : std::string()),
          130);  // what the process exits with when stopped, as after Ctrl-C
    else
      t.reporter.end(RunState::Finished, "trained " + std::to_string(r.steps) + " steps", 0);
    return r;
  } catch (const dist::CollectiveError& e) {
    // A peer failed or hung. Under studio-train's launcher the end record is left to it: it
    // knows which rank failed first, and why (this rank only sees a broken connection) -- unless
    // this rank timed out and its watchdog named who stalls, which no launcher can tell.
    t.salvage_pending_save();
    t.reporter.log("error", e.what());
    // (A launcher that is gone, killed, records nothing: this process was orphaned.)
    if (!std::getenv("STUDIO_LAUNCHED") || ::getppid() != t.parent_at_start ||
        std::string_view(e.what()).find("; watchdog: ") != std::string_view::npos)
      t.reporter.end(RunState::Failed, e.what(), 1);
    throw;
  } catch (const std::exception& e) {
    // A background save that failed is the cause even when the step met its consequence first
    // (a full disk: the save took the room, then an event could not be appended).
    const std::string save_failure = t.salvage_pending_save();
    if (save_failure.empty() ||
        std::string_view(e.what()).find(save_failure) != std::string_view::npos) {
      t.reporter.log("error", e.what());
      t.reporter.end(RunState::Failed, e.what(), 1);
      throw;
    }
    const std::string reason = save_failure + " (then: " + e.what() + ")";
    t.reporter.log("error", reason);
    t.reporter.end(RunState::Failed, reason, 1);
    throw std::runtime_error(reason);
  }
}

double Trainer::evaluate() {
  return impl_->evaluate();
}

double evaluate_model(const std::string& model_dir, const std::vector<TokenizedSample>& samples,
                      int64_t batch_size, int64_t pad_id) {
  CausalLM model = load_model_folder(model_dir);
  return mean_token_loss(model, nullptr, samples, std::max<int64_t>(1, batch_size), pad_id,
                         torch::kCPU, Parallel{});
}

}  // namespace studio::trainer
