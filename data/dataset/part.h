#pragma once
// One dataset, tokenized: the unit that is cached and concatenated.
#include <cstdint>
#include <vector>

#include "studio/data/dataset.h"

namespace studio::data::detail {

struct SampleOrigin {
  int64_t row = 0;          // 1-based row in its file(s)
  int64_t full_length = 0;  // tokens before cutoff_len truncation
};

template <class Sample>
struct Part {
  std::vector<Sample> samples;
  std::vector<SampleOrigin> origins;  // parallel to samples
  DataStats stats;
};

}  // namespace studio::data::detail
