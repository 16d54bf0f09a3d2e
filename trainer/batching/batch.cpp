#include "studio/trainer/batching/batch.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

namespace studio::trainer {

int64_t count_valid_targets(const TokenizedSample& s) {
  int64_t n = 0;
  for (size_t i = 1; i < s.labels.size(); ++i) n += s.labels[i] != kIgnoreIndex;
  return n;
}

Batch make_batch(const std::vector<const TokenizedSample*>& samples, int64_t pad_id,
                 int64_t pad_multiple, bool segment_ids) {
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
  auto pos = torch::arange(S, torch::kLong).unsqueeze(0).repeat({B, 1});
  auto seg = torch::full({B, S}, -1, torch::kLong);
  auto real = torch::zeros({B, S}, torch::kBool);
  auto ids_a = ids.accessor<int64_t, 2>();
  auto tgt_a = tgt.accessor<int64_t, 2>();
  auto pos_a = pos.accessor<int64_t, 2>();
  auto seg_a = seg.accessor<int64_t, 2>();
  Batch b;
  for (int64_t r = 0; r < B; ++r) {
    const auto& s = *samples[static_cast<size_t>(r)];
    const int64_t n = static_cast<int64_t>(s.input_ids.size());
    for (int64_t i = 0; i < n; ++i) ids_a[r][i] = s.input_ids[static_cast<size_t>(i)];
    real[r].narrow(0, 0, n).fill_(true);
    for (int64_t i = 0; i + 1 < n; ++i) tgt_a[r][i] = s.labels[static_cast<size_t>(i + 1)];
    if (s.segment_lengths.empty()) {
      for (int64_t i = 0; i < n; ++i) seg_a[r][i] = 0;
    } else {
      int64_t at = 0, index = 0;
      for (int64_t len : s.segment_lengths) {
        for (int64_t i = 0; i < len && at < n; ++i, ++at) {
          pos_a[r][at] = i;
          seg_a[r][at] = index;
        }
        ++index;
      }
      if (at != n)
        throw std::invalid_argument("make_batch: packed segment lengths sum to " +
                                    std::to_string(at) + ", the sequence holds " +
                                    std::to_string(n) + " tokens");
    }
    b.tokens += n;
    b.valid_tokens += count_valid_targets(s);
  }
  b.input_ids = ids;
  b.targets = tgt;
  b.position_ids = pos;
  b.token_mask = real;
  if (segment_ids) b.segment_ids = seg;
  return b;
}

std::vector<TokenizedSample> pack_samples(const std::vector<const TokenizedSample*>& samples,
                                          int64_t capacity,
                                          std::vector<std::vector<size_t>>* members) {
  // Sample indexes by length, ascending; among equal lengths the last one is taken first (LF
  // pops the last index of a length). O(n log n), where LF's list pops are O(n) each.
  std::multimap<int64_t, size_t> by_length;
  for (size_t i = 0; i < samples.size(); ++i) {
    const auto len = static_cast<int64_t>(samples[i]->input_ids.size());
    if (len <= capacity && len > 0) by_length.emplace(len, i);
  }
  std::vector<TokenizedSample> packs;
  if (members) members->clear();
  while (!by_length.empty()) {
    TokenizedSample pack;
    std::vector<size_t> in_pack;
    int64_t remaining = capacity;
    // The longest remaining sample that still fits (LF: bisect_right(lengths, remaining) - 1).
    for (auto it = by_length.upper_bound(remaining); it != by_length.begin();
         it = by_length.upper_bound(remaining)) {
      --it;
      const auto [len, index] = *it;
      by_length.erase(it);
      remaining -= len;
      const TokenizedSample& s = *samples[index];
      in_pack.push_back(index);
      const size_t start = pack.input_ids.size();
      pack.input_ids.insert(pack.input_ids.end(), s.input_ids.begin(), s.input_ids.end());
      pack.labels.insert(pack.labels.end(), s.labels.begin(), s.labels.end());
      pack.labels[start] = kIgnoreIndex;
      pack.segment_lengths.push_back(len);
    }
    packs.push_back(std::move(pack));
    if (members) members->push_back(std::move(in_pack));
  }
  return packs;
}

std::vector<TokenizedSample> pack_samples(const std::vector<TokenizedSample>& samples,
                                          int64_t capacity) {
  std::vector<const TokenizedSample*> ptrs;
  for (const auto& s : samples) ptrs.push_back(&s);
  return pack_samples(ptrs, capacity, nullptr);
}

}  // namespace studio::trainer
