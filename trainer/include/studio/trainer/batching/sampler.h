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
  // Dynamic batching (LLaMA-Factory v1's dynamic_batching / dynamic_padding_free), when
  // `lengths` (every sample's tokens) is given: micro-batches are cut from the shuffled order of
  // the whole epoch, each taking samples while they fit `token_budget` tokens, padded to the
  // longest (rows x longest) or, `unpadded`, summed; a micro-batch closes when the next sample
  // would not fit (or, padded, when it is full), so the last one of an epoch may be short. They
  // are dealt to the data-parallel ranks in turn (their count wrapped around to a multiple of
  // dp_size, as the samples are without it), and every rank groups its own `accumulation` at a
  // time. `micro_batch` is then unused.
  std::vector<int64_t> lengths;
  int64_t token_budget = 0;
  bool unpadded = false;
};

// One optimizer step of one rank: its micro-batches, each a list of sample indices.
using StepPlan = std::vector<std::vector<size_t>>;

class EpochPlanner {
 public:
  EpochPlanner(size_t num_samples, SamplerOptions opt);

  // Optimizer steps in one epoch (an incomplete last accumulation group is still a step, as in
  // transformers' Trainer); with dynamic batching, in the first epoch.
  int64_t steps_per_epoch() const;
  // Optimizer steps in `epoch` (dynamic batching: they vary with each epoch's order).
  int64_t steps_in_epoch(int64_t epoch) const;
  // The micro-batches of `epoch` over all ranks, before they are dealt (dynamic batching).
  std::vector<std::vector<size_t>> dynamic_micro_batches(int64_t epoch) const;
  // This rank's steps of `epoch`.
  std::vector<StepPlan> plan(int64_t epoch) const;
  // The shuffled order of all samples in `epoch`, before sharding (exposed for tests).
  std::vector<size_t> order(int64_t epoch) const;

 private:
  size_t num_samples_;
  SamplerOptions opt_;
};

}  // namespace studio::trainer
