#include "studio/trainer/metrics/run_reporter.h"

#include <cmath>
#include <filesystem>
#include <stdexcept>

#include <unistd.h>

#include "studio/config/adapters.h"
#include "studio/config/config_io.h"

namespace studio::trainer {
namespace {

ModelSummary summary(const ModelInfo& m) {
  ModelSummary s;
  s.architecture = m.architecture;
  s.parameters = m.parameter_count();
  s.layers = static_cast<int>(m.num_layers);
  s.hidden_size = static_cast<int>(m.hidden_size);
  s.heads = static_cast<int>(m.num_heads);
  s.kv_heads = static_cast<int>(m.num_kv_heads);
  s.vocab_size = static_cast<int>(m.vocab_size);
  return s;
}

}  // namespace

RunReporter::RunReporter(std::string output_dir, bool enabled, bool terminal)
    : output_dir_(std::move(output_dir)), enabled_(enabled), terminal_(terminal) {}

RunReporter::~RunReporter() {
  if (writer_.is_open()) writer_.close();
}

void RunReporter::check(const std::string& error) {
  if (!error.empty()) throw std::runtime_error(error);
}

void RunReporter::write_status(RunState state, const std::string& reason,
                               std::optional<int> exit_code) {
  RunStatus st;
  st.state = state;
  st.pid = ::getpid();
  st.host = status_host_name();
  st.exit_code = exit_code;
  st.reason = reason;
  st.step = last_step_;
  check(st.write(status_path(output_dir_)));
}

void RunReporter::start(const RunConfig& cfg, const ModelInfo& model, int world_size,
                        int64_t total_steps, int64_t first_step, const std::string& device_name,
                        std::optional<double> peak_tflops) {
  started_ = unix_time_now();
  last_step_ = first_step;
  if (!enabled_) return;
  std::filesystem::create_directories(output_dir_);
  check(writer_.open(events_path(output_dir_)));
  write_status(RunState::Running, "", std::nullopt);
  StartEvent e;
  e.time = started_;
  e.config = config_to_json(cfg);
  e.world_size = world_size;
  e.sequence_parallel_size = static_cast<int>(cfg.sequence_parallel_size);
  e.sequence_parallel_mode = std::string(to_string(cfg.sequence_parallel_mode));
  e.stage = std::string(to_string(cfg.stage));
  e.model = summary(model);
  e.model.trainable_parameters = trained_parameter_count(cfg, model).trained;
  e.total_steps = total_steps;
  e.device_name = device_name;
  e.peak_tflops = peak_tflops.value_or(kNoValue);
  check(writer_.write(e));
  if (reports_to_tensorboard(cfg)) {
    const std::string dir =
        cfg.logging_dir ? *cfg.logging_dir : default_logging_dir(output_dir_, started_, status_host_name());
    check(tensorboard_.open(dir, started_));
  }
  bar_ = std::make_unique<ProgressBar>(total_steps, first_step, terminal_);
}

void RunReporter::tensorboard_step(const StepEvent& e) {
  const double t = std::isfinite(e.time) ? e.time : unix_time_now();
  auto put = [&](const std::string& tag, double v) { check(tensorboard_.scalar(tag, e.step, v, t)); };
  put("train/loss", e.loss);
  put("train/learning_rate", e.lr);
  put("train/grad_norm", e.grad_norm);
  put("train/epoch", e.epoch);
  put("train/tokens_per_sec", e.tokens_per_sec);
  put("train/model_tflops", e.model_tflops);
  put("train/mfu", e.mfu);
  put("train/aux_loss", e.aux_loss);
  if (e.dpo) put_preference(e.step, t, "train/", *e.dpo);
  for (const GpuMemory& g : e.gpus) {
    const std::string rank = "memory/rank" + std::to_string(g.rank) + "/";
    put(rank + "allocated_mib", g.allocated_mib);
    put(rank + "reserved_mib", g.reserved_mib);
    put(rank + "peak_mib", g.peak_mib);
    const std::string gpu = "gpu/rank" + std::to_string(g.rank) + "/";
    put(gpu + "util_percent", g.util_percent);
    put(gpu + "power_w", g.power_w);
  }
  put("memory/rss_mib", e.rss_mib);
  check(tensorboard_.flush());
}

void RunReporter::step(const StepEvent& e, bool log_event) {
  last_step_ = e.step;
  if (!enabled_) return;
  if (log_event) check(writer_.write(e));
  if (log_event && tensorboard_.is_open()) tensorboard_step(e);
  bar_->update({e.step, e.loss, e.tokens_per_sec, e.lr}, unix_time_now() - started_);
}

// The preference metrics under the Trainer's tags (a value that is not a number is left out).
void RunReporter::put_preference(int64_t step, double time, const std::string& prefix,
                                 const DpoMetrics& m) {
  const std::pair<const char*, double> values[] = {
      {"rewards/chosen", m.rewards_chosen},   {"rewards/rejected", m.rewards_rejected},
      {"rewards/accuracies", m.rewards_accuracies}, {"rewards/margins", m.rewards_margins},
      {"logps/chosen", m.logps_chosen},       {"logps/rejected", m.logps_rejected},
      {"kl", m.kl},                           {"sft_loss", m.sft_loss},
      {"odds_ratio_loss", m.odds_ratio_loss}};
  for (const auto& [tag, v] : values) check(tensorboard_.scalar(prefix + tag, step, v, time));
}

void RunReporter::eval(int64_t step, double loss, const std::optional<DpoMetrics>& metrics) {
  if (!enabled_) return;
  check(writer_.write(EvalEvent{step, loss, metrics}));
  if (tensorboard_.is_open()) {
    const double t = unix_time_now();
    check(tensorboard_.scalar("eval/loss", step, loss, t));
    if (metrics) put_preference(step, t, "eval/", *metrics);
    check(tensorboard_.flush());
  }
  char buf[160];
  if (metrics && std::isfinite(metrics->rewards_accuracies))
    std::snprintf(buf, sizeof buf, "eval at step %lld: loss %.4f, accuracy %.4f",
                  static_cast<long long>(step), loss, metrics->rewards_accuracies);
  else
    std::snprintf(buf, sizeof buf, "eval at step %lld: loss %.4f", static_cast<long long>(step),
                  loss);
  bar_->message(buf);
}

void RunReporter::checkpoint(int64_t step, const std::string& path) {
  if (!enabled_) return;
  check(writer_.write(CheckpointEvent{step, path}));
  check(writer_.sync());
  write_status(RunState::Running, "", std::nullopt);
}

void RunReporter::log(const std::string& level, const std::string& message) {
  if (!enabled_) return;
  if (writer_.is_open()) writer_.write(LogEvent{level, 0, message});
  if (bar_)
    bar_->message(level + ": " + message);
  else
    std::fprintf(stderr, "%s: %s\n", level.c_str(), message.c_str());
}

void RunReporter::end(RunState state, const std::string& reason, int exit_code) {
  if (!enabled_) return;
  if (bar_) bar_->finish();
  if (writer_.is_open()) {
    writer_.write(EndEvent{std::string(run_state_name(state)), reason});
    writer_.close();
  }
  tensorboard_.close();
  // A run that fails before start() (a refused setting, a model that does not load) still
  // records why in status.json, rather than losing the reason to a missing folder.
  std::error_code ec;
  std::filesystem::create_directories(output_dir_, ec);
  write_status(state, reason, exit_code);
}

}  // namespace studio::trainer
