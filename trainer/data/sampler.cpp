#include "studio/trainer/data/sampler.h"

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

int64_t EpochPlanner::steps_per_epoch() const {
  const auto per_rank = static_cast<int64_t>((num_samples_ + opt_.dp_size - 1) / opt_.dp_size);
  const int64_t micro = (per_rank + opt_.micro_batch - 1) / opt_.micro_batch;
  return std::max<int64_t>(1, (micro + opt_.accumulation - 1) / opt_.accumulation);
}

std::vector<StepPlan> EpochPlanner::plan(int64_t epoch) const {
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
