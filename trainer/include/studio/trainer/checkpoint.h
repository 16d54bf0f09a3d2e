#pragma once
// Training checkpoints: OUTPUT_DIR/checkpoint-STEP/ holds the model in Hugging Face layout (fp32
// masters, so any checkpoint can be loaded by transformers or evaluated, and a resume is exact),
// the optimizer states (one file per rank that owns a piece of them: optimizer-R-of-N), the RNG
// state and trainer_state.json (step, data position, schedule). A checkpoint is staged in a
// temporary folder and renamed into place, so a crash never leaves a half-written one.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "studio/trainer/tensors/safetensors.h"

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

std::string checkpoint_name(int64_t step);  // "checkpoint-STEP"
// STEP of a folder named checkpoint-STEP; -1 for any other name.
int64_t checkpoint_step(const std::string& dir);

// Saving a checkpoint takes three phases, so that every rank of a sharded run can add its own
// files (optimizer states) before the folder is committed:
//   1. checkpoint_staging_dir(): rank 0 creates OUTPUT_DIR/.checkpoint-STEP.saving (empty) and
//      writes the RNG state of the step saved (write_rng_state);
//   2. every rank writes into it (rank 0 the model, with save_hf_model; each rank its
//      optimizer file), then records the size and CRC-32C of what it wrote (write_digests);
//      the training loop does this in the background while the next steps run;
//   3. commit_checkpoint() (rank 0, once every rank's phase 2 is done): manifest.json, then
//      trainer_state.json, whose presence marks a complete checkpoint, then the folder renamed
//      to checkpoint-STEP.
// A crash before the rename leaves at most a .saving folder, which is never taken for a
// checkpoint and is replaced by the next save of that step.
std::string checkpoint_staging_dir(const std::string& output_dir, int64_t step);
// Phase 1: removes a stale staging folder of this step and creates an empty one. Throws
// std::runtime_error naming the folder.
void prepare_checkpoint(const std::string& staging);
// Phase 1, rank 0: the CPU generator's state now, as rng_state.pt.
void write_rng_state(const std::string& staging);
// Phase 2, each rank: `files` (names in `staging`) with their sizes and CRC-32C, into
// .digests-RANK.json. Throws std::runtime_error naming the file.
void write_digests(const std::string& staging, int rank, const std::vector<std::string>& files);
// Phase 3. manifest.json lists every file of the checkpoint but itself, with its size and CRC-32C
// (from the digests, or read now for files without one). Returns the checkpoint's path; an
// existing checkpoint of the same step is replaced.
std::string commit_checkpoint(const std::string& output_dir, const std::string& staging,
                              const TrainerState& state);
// Removes the staging folder after a failed save (no-op when it is gone).
void abandon_checkpoint(const std::string& staging);

// Checkpoint folders of OUTPUT_DIR, oldest step first.
std::vector<std::string> list_checkpoints(const std::string& output_dir);
std::optional<std::string> last_checkpoint(const std::string& output_dir);

// "" when every file manifest.json lists is there with its recorded size and CRC-32C (or when
// the checkpoint has no manifest: written before manifests, it cannot be checked); else what is
// wrong, naming the file: "model.safetensors: 1048576 bytes, manifest.json says 2097152".
// `hashes` false checks sizes only.
std::string verify_checkpoint(const std::string& dir, bool hashes = true);
// The newest checkpoint of OUTPUT_DIR that verifies. Each newer one that does not is skipped,
// and "DIR: PROBLEM" added to `skipped` when given.
std::optional<std::string> last_good_checkpoint(const std::string& output_dir,
                                                std::vector<std::string>* skipped = nullptr);
// Deletes the oldest checkpoints so that at most `limit` remain.
void rotate_checkpoints(const std::string& output_dir, int64_t limit);

// Reads trainer_state.json and restores the RNG (the optimizer states: ShardedState::load).
// Throws std::runtime_error naming the file when something is missing or malformed.
TrainerState load_trainer_state(const std::string& checkpoint_dir);

}  // namespace studio::trainer
