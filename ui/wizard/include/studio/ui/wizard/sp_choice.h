#pragma once
// The sequence-parallel choices the Parallelism page offers and the Memory page's button makes:
// the valid SP sizes for the mode and model (memory_estimate's valid_sp_sizes), why the other
// divisors of the world size are left out (validate's ulysses_heads rule), and setting a size
// together with the usp degrees it needs.
#include <vector>

#include <QString>

#include "studio/model_facts/model_info.h"
#include "studio/config/run_config.h"

namespace studio::ui {

struct ExcludedSpSize {
  int size = 0;
  QString reason;  // e.g. "28 query heads are not divisible by 8"
};

struct SpChoices {
  std::vector<int> valid;              // ascending; contains 1
  std::vector<ExcludedSpSize> excluded;  // divisors of the world size left out
};

// Without a model every divisor of the world size is offered (the heads are unknown).
SpChoices spChoices(const studio::RunConfig& config, const studio::ModelInfo* model,
                    int worldSize);

// Sets sequence_parallel_size; for usp also the Ulysses x ring degrees (the largest Ulysses degree
// that works, as smallest_fitting_sp assumes).
void setSpSize(studio::RunConfig& config, const studio::ModelInfo* model, int sp);

}  // namespace studio::ui
