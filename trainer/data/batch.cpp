#include "studio/trainer/data/batch.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace studio::trainer {

int64_t count_valid_targets(const TokenizedSample& s) {
  int64_t n = 0;
  for (size_t i = 1; i < s.labels.size(); ++i) n += s.labels[i] != kIgnoreIndex;
  return n;
}

Batch make_batch(const std::vector<const TokenizedSample*>& samples, int64_t pad_id,
                 int64_t pad_multiple) {
  if (samples.empty()) throw std::invalid_argument("make_batch: no samples");
  size_t longest = 0;
  for (const auto* s : samples) {
    if (s->labels.size() != s->input_ids.size())
      throw std::invalid_argument("make_batch: labels and input_ids differ in length (" +
                                  std::to_string(s->labels.size()) + " vs " +
                                  std::to_string(s->input_ids.size()) + ")");
    longest = std::max(longest, s->input_ids.size());
  }
  const int64_t m = std::max<int64_t>(1, pad_multiple);
  const int64_t S = std::max<int64_t>(m, (static_cast<int64_t>(longest) + m - 1) / m * m);
  const int64_t B = static_cast<int64_t>(samples.size());
  auto ids = torch::full({B, S}, pad_id, torch::kLong);
  auto tgt = torch::full({B, S}, kIgnoreIndex, torch::kLong);
  auto ids_a = ids.accessor<int64_t, 2>();
  auto tgt_a = tgt.accessor<int64_t, 2>();
  Batch b;
  for (int64_t r = 0; r < B; ++r) {
    const auto& s = *samples[static_cast<size_t>(r)];
    const int64_t n = static_cast<int64_t>(s.input_ids.size());
    for (int64_t i = 0; i < n; ++i) ids_a[r][i] = s.input_ids[static_cast<size_t>(i)];
    for (int64_t i = 0; i + 1 < n; ++i) tgt_a[r][i] = s.labels[static_cast<size_t>(i + 1)];
    b.tokens += n;
    b.valid_tokens += count_valid_targets(s);
  }
  b.input_ids = ids;
  b.targets = tgt;
  b.position_ids = torch::arange(S, torch::kLong).unsqueeze(0).expand({B, S}).contiguous();
  return b;
}

}  // namespace studio::trainer
