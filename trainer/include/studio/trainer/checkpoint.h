#pragma once
// Training checkpoints: OUTPUT_DIR/checkpoint-STEP/ holds the model in Hugging Face layout (so any
// checkpoint can be loaded by transformers or evaluated), the optimizer state, the RNG state and
// trainer_state.json (step, data position, schedule). A checkpoint is staged in a temporary folder
// and renamed into place, so a crash never leaves a half-written checkpoint-STEP.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "studio/trainer/safetensors.h"

namespace studio::trainer {

struct TrainerState {
  int64_t global_step = 0;     // optimizer steps done
  int64_t total_steps = 0;     // of the whole run
  int64_t data_epoch = 0;      // where the data continues: epoch ...
  int64_t step_in_epoch = 0;   // ... and optimizer steps already taken in it
  int64_t steps_per_epoch = 1;
  uint64_t seed = 42;
  int64_t tokens_seen = 0;
  double epoch() const;        // fractional epoch, as logged
};

struct CheckpointData {
  const NamedTensors* model = nullptr;
  torch::optim::Optimizer* optimizer = nullptr;  // null: save_only_model
  TrainerState state;
  std::string source_model_dir;                  // config and tokenizer files come from here
  torch::ScalarType dtype = torch::kFloat;       // the training dtype, for an exact resume
};

std::string checkpoint_name(int64_t step);  // "checkpoint-STEP"

// Writes OUTPUT_DIR/checkpoint-STEP atomically and returns its path. Throws std::runtime_error
// naming the folder on failure; an existing checkpoint of the same step is replaced.
std::string save_checkpoint(const std::string& output_dir, const CheckpointData& data);

// Checkpoint folders of OUTPUT_DIR, oldest step first.
std::vector<std::string> list_checkpoints(const std::string& output_dir);
std::optional<std::string> last_checkpoint(const std::string& output_dir);
// Deletes the oldest checkpoints so that at most `limit` remain.
void rotate_checkpoints(const std::string& output_dir, int64_t limit);

// Reads trainer_state.json and, when `optimizer` is given, optimizer.pt; restores the RNG.
// Throws std::runtime_error naming the file when something is missing or malformed.
TrainerState load_trainer_state(const std::string& checkpoint_dir,
                                torch::optim::Optimizer* optimizer);

}  // namespace studio::trainer
