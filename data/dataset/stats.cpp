// Counters and the length histogram that loading, the cache and the preview share.
#include <algorithm>
#include <limits>

#include "studio/data/dataset.h"

namespace studio::data {

namespace {
constexpr std::size_t kMaxWarnings = 20;  // enough to see a pattern; a bad file repeats itself
}

LengthHistogram LengthHistogram::for_cutoff(int64_t cutoff_len) {
  LengthHistogram h;
  h.cutoff_len = cutoff_len;
  for (int64_t i = 1; i <= 8; ++i) {
    const int64_t bound = (cutoff_len * i + 7) / 8;  // ceil: no empty bins for small cutoffs
    if (h.upper.empty() || bound > h.upper.back()) h.upper.push_back(bound);
  }
  h.upper.push_back(cutoff_len * 2);
  h.upper.push_back(cutoff_len * 4);
  h.upper.push_back(std::numeric_limits<int64_t>::max());
  h.counts.assign(h.upper.size(), 0);
  return h;
}

void LengthHistogram::add(int64_t length) {
  auto it = std::lower_bound(upper.begin(), upper.end(), length);
  if (it == upper.end()) --it;
  ++counts[static_cast<std::size_t>(it - upper.begin())];
}

void LengthHistogram::merge(const LengthHistogram& other) {
  if (upper.empty()) {
    *this = other;
    return;
  }
  if (other.upper != upper) return;  // different cutoffs never share a load
  for (std::size_t i = 0; i < counts.size(); ++i) counts[i] += other.counts[i];
}

int64_t LengthHistogram::above_cutoff() const {
  int64_t n = 0;
  for (std::size_t i = 1; i < upper.size(); ++i)
    if (upper[i - 1] >= cutoff_len) n += counts[i];
  return n;
}

void DataStats::merge(const DataStats& other) {
  samples += other.samples;
  tokens += other.tokens;
  learned_tokens += other.learned_tokens;
  truncated += other.truncated;
  skipped_bad_rows += other.skipped_bad_rows;
  skipped_invalid += other.skipped_invalid;
  desirable += other.desirable;
  datasets_from_cache += other.datasets_from_cache;
  lengths.merge(other.lengths);
  for (const auto& w : other.warnings)
    if (warnings.size() < kMaxWarnings) warnings.push_back(w);
}

}  // namespace studio::data
