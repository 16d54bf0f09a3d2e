#pragma once
// The SFT training loop of one process: optimizer steps over planned micro-batches, loss
// normalised by the valid target tokens of the whole step, clipping, the schedule, evaluation,
// checkpoints, resume, and the run's events. Distributed execution plugs in through the
// communicator seam later; with one process it is an ordinary trainer.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "studio/config/model_info.h"
#include "studio/config/run_config.h"
#include "studio/trainer/data/batch.h"

namespace studio::trainer {

struct TrainInputs {
  RunConfig config;                    // normalized (see studio::normalized)
  std::string model_dir;               // the source model folder (weights, config, tokenizer)
  ModelInfo model;                     // its config.json
  std::vector<TokenizedSample> train;
  std::vector<TokenizedSample> eval;   // empty: no evaluation
  int64_t pad_id = 0;
  bool terminal = false;               // draw the progress bar in place
  std::string config_path;             // for messages
  // Called after every optimizer step (tests, embedding callers); may set the stop flag.
  std::function<void(int64_t step, double loss)> on_step;
};

struct TrainResult {
  int64_t steps = 0;                   // global step reached
  std::vector<double> step_losses;     // loss of every step this process ran
  double eval_loss = 0;                // last evaluation, NaN when none ran
  std::string final_state;             // finished | stopped
};

class Trainer {
 public:
  explicit Trainer(TrainInputs in);
  ~Trainer();
  // Trains until the planned steps are done or `stop` becomes true. Throws on failure after
  // recording it in events.jsonl and status.json.
  TrainResult run(const std::atomic<bool>* stop = nullptr);
  // Mean loss per valid token over the eval samples.
  double evaluate();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Mean token loss of `samples` under the model in `model_dir` (what `studio-train eval` prints).
double evaluate_model(const std::string& model_dir, const std::vector<TokenizedSample>& samples,
                      int64_t batch_size, int64_t pad_id);

}  // namespace studio::trainer
