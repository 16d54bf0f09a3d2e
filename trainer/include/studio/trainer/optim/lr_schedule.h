#pragma once
// Learning-rate schedules with the exact formulas of Hugging Face transformers (what
// LLaMA-Factory runs), so a loss curve here lines up with one from LLaMA-Factory.
#include <cstdint>
#include <string>

#include "studio/config/run_config.h"

namespace studio::trainer {

struct LrSchedule {
  LrScheduler kind = LrScheduler::Linear;
  int64_t total_steps = 1;    // optimizer steps of the whole run
  int64_t warmup_steps = 0;
  double num_cycles = 0.5;    // cosine schedules: half a cosine wave by default
  double min_lr_rate = 0.0;   // cosine_with_min_lr: the floor as a share of the peak

  // The multiplier of the peak learning rate for the optimizer step that follows `completed`
  // steps (0 for the first step): transformers' LambdaLR evaluated at that step.
  double factor(int64_t completed) const;
};

// warmup_steps when > 0, else ceil(total * warmup_ratio) (transformers' get_warmup_steps).
int64_t warmup_steps_for(const RunConfig& cfg, int64_t total_steps);

// Builds the schedule of a run config; `error` is set for an unusable combination (validated
// configs never hit it).
LrSchedule make_lr_schedule(const RunConfig& cfg, int64_t total_steps, std::string& error);

}  // namespace studio::trainer
