#pragma once
// Which samples each optimizer step trains on: a deterministic shuffle per epoch (seeded by the
// run's seed and the epoch), sharded over data-parallel ranks, cut into micro-batches and
// accumulation groups. A plan is a pure function of its inputs, so a resumed run recomputes the
// same plan and continues at (epoch, step_in_epoch).
#include <cstdint>
#include <vector>

namespace studio::trainer {

struct SamplerOptions {
  uint64_t seed = 42;
  bool shuffle = true;
  int dp_rank = 0;
  int dp_size = 1;
  int64_t micro_batch = 1;   // per_device_train_batch_size
  int64_t accumulation = 1;  // gradient_accumulation_steps
};

// One optimizer step of one rank: its micro-batches, each a list of sample indices.
using StepPlan = std::vector<std::vector<size_t>>;

class EpochPlanner {
 public:
  EpochPlanner(size_t num_samples, SamplerOptions opt);

  // Optimizer steps in one epoch (an incomplete last accumulation group is still a step, as in
  // transformers' Trainer).
  int64_t steps_per_epoch() const;
  // This rank's steps of `epoch`.
  std::vector<StepPlan> plan(int64_t epoch) const;
  // The shuffled order of all samples in `epoch`, before sharding (exposed for tests).
  std::vector<size_t> order(int64_t epoch) const;

 private:
  size_t num_samples_;
  SamplerOptions opt_;
};

}  // namespace studio::trainer
