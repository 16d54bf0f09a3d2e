#include "split.h"

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "studio/data/dataset.h"

namespace studio::data::detail {
namespace {

// A uniform draw in [0, bound) from mt19937_64, whose output the standard fixes (unlike
// std::uniform_int_distribution and std::shuffle): the split is the same with every library.
uint64_t draw_below(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t limit =
      std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % bound;
  uint64_t x = rng();
  while (x >= limit) x = rng();
  return x % bound;
}

std::size_t eval_count(double val_size, std::size_t n) {
  if (val_size >= 1.0) {
    if (val_size != std::floor(val_size))
      throw DatasetError("val_size " + std::to_string(val_size) +
                         " is neither a fraction below 1 nor a whole count");
    return static_cast<std::size_t>(val_size);
  }
  return static_cast<std::size_t>(std::ceil(val_size * static_cast<double>(n)));
}

// Marks the held-out samples: a seeded Fisher-Yates shuffle picks them.
std::vector<bool> held_out(std::size_t n, std::size_t n_eval, int64_t seed) {
  std::vector<std::size_t> perm(n);
  for (std::size_t i = 0; i < n; ++i) perm[i] = i;
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  for (std::size_t i = n; i > 1; --i) std::swap(perm[i - 1], perm[draw_below(rng, i)]);
  std::vector<bool> out(n, false);
  for (std::size_t k = 0; k < n_eval; ++k) out[perm[k]] = true;
  return out;
}

}  // namespace

void check_split_settings(const RunConfig& cfg) {
  if (cfg.val_size > 0 && !cfg.eval_dataset.empty())
    throw DatasetError("val_size and eval_dataset both set: use one of them");
  if (cfg.val_size < 0) throw DatasetError("val_size must not be negative");
}

template <class Sample>
void split_off_eval(const RunConfig& cfg, std::vector<Sample>& train, std::vector<Sample>& eval) {
  if (cfg.val_size <= 0) return;
  const std::size_t n_eval = eval_count(cfg.val_size, train.size());
  if (n_eval >= train.size())
    throw DatasetError("val_size " + std::to_string(cfg.val_size) + " holds out " +
                       std::to_string(n_eval) + " of " + std::to_string(train.size()) +
                       " samples, leaving none to train on");
  const std::vector<bool> out = held_out(train.size(), n_eval, cfg.seed);
  std::vector<Sample> kept;
  kept.reserve(train.size() - n_eval);
  for (std::size_t i = 0; i < train.size(); ++i)
    (out[i] ? eval : kept).push_back(std::move(train[i]));
  train = std::move(kept);
}

template void split_off_eval(const RunConfig&, std::vector<TokenizedSample>&,
                             std::vector<TokenizedSample>&);
template void split_off_eval(const RunConfig&, std::vector<PairSample>&, std::vector<PairSample>&);
template void split_off_eval(const RunConfig&, std::vector<FeedbackSample>&,
                             std::vector<FeedbackSample>&);

}  // namespace studio::data::detail
