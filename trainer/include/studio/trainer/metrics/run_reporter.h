#pragma once
// Everything a run tells the outside world: events.jsonl and status.json in OUTPUT_DIR (the
// studio reads them, live or after a restart), TensorBoard event files in logging_dir with
// report_to: tensorboard, and the progress bar on the terminal. Only the reporting rank writes;
// other ranks' reporters are silent.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "studio/runs/events.h"
#include "studio/model_facts/model_info.h"
#include "studio/config/run_config.h"
#include "studio/trainer/metrics/tensorboard_writer.h"
#include "studio/trainer/metrics/progress.h"

namespace studio::trainer {

class RunReporter {
 public:
  RunReporter(std::string output_dir, bool enabled, bool terminal);
  ~RunReporter();

  // `device_name` and `peak_tflops` (nullopt: unknown) go into the start event for MFU.
  void start(const RunConfig& cfg, const ModelInfo& model, int world_size, int64_t total_steps,
             int64_t first_step, const std::string& device_name = "cpu",
             std::optional<double> peak_tflops = std::nullopt);
  // Every step: the progress bar; the event only when `log_event` (logging_steps).
  void step(const StepEvent& e, bool log_event);
  // `metrics`: a preference stage's metrics over the evaluation examples.
  void eval(int64_t step, double loss, const std::optional<DpoMetrics>& metrics = std::nullopt);
  void checkpoint(int64_t step, const std::string& path);
  void log(const std::string& level, const std::string& message);
  // state: finished | failed | stopped
  void end(RunState state, const std::string& reason, int exit_code);

 private:
  void write_status(RunState state, const std::string& reason, std::optional<int> exit_code);
  void check(const std::string& error);
  // The step's scalars under Hugging Face Trainer's tags (train/loss, ...), and memory per rank.
  void tensorboard_step(const StepEvent& e);
  void put_preference(int64_t step, double time, const std::string& prefix, const DpoMetrics& m);

  std::string output_dir_;
  bool enabled_;
  bool terminal_;
  EventWriter writer_;
  TensorBoardWriter tensorboard_;
  std::unique_ptr<ProgressBar> bar_;
  double started_ = 0;
  int64_t last_step_ = 0;
};

}  // namespace studio::trainer
