#include "studio/trainer/batching/sampler.h"

#include <algorithm>
#include <random>
#include <stdexcept>

namespace studio::trainer {

EpochPlanner::EpochPlanner(size_t num_samples, SamplerOptions opt)
    : num_samples_(num_samples), opt_(opt) {
  if (num_samples == 0) throw std::invalid_argument("no training samples");
  if (opt_.dp_size < 1 || opt_.dp_rank < 0 || opt_.dp_rank >= opt_.dp_size)
    throw std::invalid_argument("bad data-parallel rank/size");
  opt_.micro_batch = std::max<int64_t>(1, opt_.micro_batch);
  opt_.accumulation = std::max<int64_t>(1, opt_.accumulation);
  if (!opt_.lengths.empty() && opt_.lengths.size() != num_samples)
    throw std::invalid_argument("dynamic batching: " + std::to_string(opt_.lengths.size()) +
                                " sample lengths for " + std::to_string(num_samples) +
                                " samples");
  if (!opt_.lengths.empty() && opt_.token_budget < 1)
    throw std::invalid_argument("dynamic batching: the token budget must be positive");
}

std::vector<size_t> EpochPlanner::order(int64_t epoch) const {
  std::vector<size_t> idx(num_samples_);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  if (!opt_.shuffle) return idx;
  // Our own Fisher-Yates over mt19937_64: std::shuffle's algorithm differs between standard
  // libraries, and the order must not change with the toolchain (resume on another node).
  std::mt19937_64 rng(opt_.seed * 1000003ULL + static_cast<uint64_t>(epoch));
  for (size_t i = idx.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(rng() % i);
    std::swap(idx[i - 1], idx[j]);
  }
  return idx;
}

int64_t EpochPlanner::steps_in_epoch(int64_t epoch) const {
  if (opt_.lengths.empty()) return steps_per_epoch();
  return std::max<int64_t>(1, static_cast<int64_t>(plan(epoch).size()));
}

std::vector<std::vector<size_t>> EpochPlanner::dynamic_micro_batches(int64_t epoch) const {
  std::vector<std::vector<size_t>> out;
  std::vector<size_t> current;
  int64_t longest = 0, total = 0;
  const int64_t budget = opt_.token_budget;
  auto close = [&] {
    if (!current.empty()) out.push_back(std::move(current));
    current.clear();
    longest = total = 0;
  };
  for (size_t i : order(epoch)) {
    const int64_t len = std::max<int64_t>(1, opt_.lengths[i]);
    const auto rows = static_cast<int64_t>(current.size()) + 1;
    const bool fits = opt_.unpadded ? total + len <= budget : std::max(longest, len) * rows <= budget;
    if (!fits) close();
    current.push_back(i);
    longest = std::max(longest, len);
    total += len;
    if (!opt_.unpadded && longest * static_cast<int64_t>(current.size()) >= budget) close();
  }
  close();
  return out;
}

int64_t EpochPlanner::steps_per_epoch() const {
  if (!opt_.lengths.empty()) return steps_in_epoch(0);
  const auto per_rank = static_cast<int64_t>((num_samples_ + opt_.dp_size - 1) / opt_.dp_size);
  const int64_t micro = (per_rank + opt_.micro_batch - 1) / opt_.micro_batch;
  return std::max<int64_t>(1, (micro + opt_.accumulation - 1) / opt_.accumulation);
}

std::vector<StepPlan> EpochPlanner::plan(int64_t epoch) const {
  if (!opt_.lengths.empty()) {
    auto micro = dynamic_micro_batches(epoch);
    const auto dp = static_cast<size_t>(opt_.dp_size);
    // Every rank gets as many micro-batches: the first ones again, as the samples wrap below.
    const size_t count = (micro.size() + dp - 1) / dp * dp;
    for (size_t i = 0; micro.size() < count; ++i) micro.push_back(micro[i]);
    std::vector<StepPlan> steps;
    StepPlan step;
    for (size_t i = static_cast<size_t>(opt_.dp_rank); i < micro.size(); i += dp) {
      step.push_back(micro[i]);
      if (static_cast<int64_t>(step.size()) == opt_.accumulation) steps.push_back(std::move(step)), step.clear();
    }
    if (!step.empty()) steps.push_back(std::move(step));
    return steps;
  }
  std::vector<size_t> all = order(epoch);
  // Every rank gets the same count: wrap around to pad, as PyTorch's DistributedSampler does.
  const size_t per_rank = (all.size() + opt_.dp_size - 1) / opt_.dp_size;
  for (size_t i = 0; all.size() < per_rank * opt_.dp_size; ++i) all.push_back(all[i]);
  std::vector<size_t> mine;
  for (size_t i = static_cast<size_t>(opt_.dp_rank); i < all.size(); i += opt_.dp_size)
    mine.push_back(all[i]);

  std::vector<StepPlan> steps;
  StepPlan step;
  for (size_t start = 0; start < mine.size(); start += static_cast<size_t>(opt_.micro_batch)) {
    const size_t end = std::min(mine.size(), start + static_cast<size_t>(opt_.micro_batch));
    step.emplace_back(mine.begin() + static_cast<long>(start), mine.begin() + static_cast<long>(end));
    if (static_cast<int64_t>(step.size()) == opt_.accumulation) steps.push_back(std::move(step)), step.clear();
  }
  if (!step.empty()) steps.push_back(std::move(step));
  return steps;
}

}  // namespace studio::trainer
