#pragma once
// The training loop of one rank (SFT or DPO): optimizer steps over planned micro-batches, the
// loss normalised over the whole global batch, gradients summed over the world, clipping on the
// global norm, the schedule, evaluation, checkpoints, resume, and the run's events. With a
// Communicator the rank is one cell of the dp x sp grid (docs/SEQUENCE_PARALLEL.md): its SP group
// shares each sample (split along the sequence, attention through the SP mode), its DP group
// shares the data. Without one it is an ordinary single-process trainer.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "studio/model_facts/model_info.h"
#include "studio/config/run_config.h"
#include "studio/trainer/batching/batch.h"
#include "studio/trainer/parallel/communicator.h"

namespace studio::trainer {

struct TrainInputs {
  RunConfig config;                    // normalized (see studio::normalized)
  std::string model_dir;               // the source model folder (weights, config, tokenizer)
  ModelInfo model;                     // its config.json
  std::vector<TokenizedSample> train;  // stage sft
  std::vector<TokenizedSample> eval;   // empty: no evaluation
  std::vector<data::PairSample> train_pairs;  // stages dpo and rm
  std::vector<data::PairSample> eval_pairs;
  std::vector<data::FeedbackSample> train_feedback;  // stage kto
  std::vector<data::FeedbackSample> eval_feedback;
  int64_t pad_id = 0;
  bool terminal = false;               // draw the progress bar in place
  std::string config_path;             // for messages
  dist::Communicator* comm = nullptr;  // null: one process
  int local_rank = 0;                  // CUDA device of this rank
  bool share_gpus = false;             // Gloo on CUDA: rank r uses device r mod count
  // Called after every optimizer step (tests, embedding callers); may set the stop flag.
  std::function<void(int64_t step, double loss)> on_step;
  // True (on any rank) together with the stop flag: the stop writes a checkpoint of the step
  // every rank has finished whatever save_on_stop says (SIGUSR1: Slurm's warning before the
  // time limit, so that the requeued job resumes at that step).
  const std::atomic<bool>* checkpoint_stop = nullptr;
};

struct TrainResult {
  int64_t steps = 0;                   // global step reached
  std::vector<double> step_losses;     // loss of every step this process ran
  double eval_loss = 0;                // last evaluation, NaN when none ran (DPO: mean pair loss)
  std::string final_state;             // finished | stopped
  std::string stop_checkpoint;         // the checkpoint written when stopped (save_on_stop,
                                       // checkpoint_stop)
};

class Trainer {
 public:
  explicit Trainer(TrainInputs in);
  ~Trainer();
  // Trains until the planned steps are done or `stop` becomes true. Throws on failure after
  // recording it in events.jsonl and status.json.
  TrainResult run(const std::atomic<bool>* stop = nullptr);
  // SFT: mean loss per valid token over the eval samples; DPO: mean loss per eval pair.
  double evaluate();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Mean token loss of `samples` under the model in `model_dir` (what `studio-train eval` prints).
double evaluate_model(const std::string& model_dir, const std::vector<TokenizedSample>& samples,
                      int64_t batch_size, int64_t pad_id);

}  // namespace studio::trainer
