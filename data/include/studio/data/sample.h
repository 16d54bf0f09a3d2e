#pragma once
// Token sequences as training consumes them. Labels follow LLaMA-Factory: aligned with input_ids
// (NOT shifted; the trainer shifts once, globally), kIgnoreIndex where nothing is learned.
#include <cstdint>
#include <vector>

namespace studio::data {

inline constexpr int64_t kIgnoreIndex = -100;

struct TokenizedSample {
  std::vector<int64_t> input_ids;
  std::vector<int64_t> labels;  // same length as input_ids; kIgnoreIndex where not learned
  // packing: the lengths of the samples packed into this sequence, in order (they sum to its
  // length); empty: one sample. The first label of every packed sample is kIgnoreIndex, so the
  // global shift never makes a sample's last token predict the next sample's first.
  std::vector<int64_t> segment_lengths;
};

// A DPO pair: chosen and rejected both start with the same prompt_len prompt tokens (masked in
// their labels), followed by their own response.
struct PairSample {
  TokenizedSample chosen;
  TokenizedSample rejected;
  int64_t prompt_len = 0;
};

// A KTO example (stage kto), as LLaMA-Factory's FeedbackDatasetProcessor builds it: `target` is
// the prompt with the row's own response, `kl` the same prompt with another row's response (the
// mismatched pair TRL's KTO estimates its KL reference point from). Both mask the prompt.
struct FeedbackSample {
  TokenizedSample target;
  TokenizedSample kl;
  bool desirable = false;  // target's response is desirable (kto_tag true), else undesirable
};

}  // namespace studio::data
