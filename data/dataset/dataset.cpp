// The public loaders: the tokenized datasets concatenated in the order written, the eval set
// from eval_dataset or split off by val_size.
#include "studio/data/dataset.h"

#include <cmath>
#include <random>

#include "loader.h"

namespace studio::data {
namespace {

using detail::LoadedParts;
using detail::NamedPart;

// A uniform draw in [0, bound) from mt19937_64, whose output the standard fixes (unlike
// std::uniform_int_distribution and std::shuffle): the split is the same with every library.
uint64_t draw_below(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t limit = std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % bound;
  uint64_t x = rng();
  while (x >= limit) x = rng();
  return x % bound;
}

// How many samples val_size holds out: a fraction rounds up (as HF train_test_split), a value
// >= 1 is a count.
std::size_t eval_count(double val_size, std::size_t n) {
  if (val_size >= 1.0) {
    if (val_size != std::floor(val_size))
      throw DatasetError("val_size " + std::to_string(val_size) + " is neither a fraction below 1 nor a whole count");
    return static_cast<std::size_t>(val_size);
  }
  return static_cast<std::size_t>(std::ceil(val_size * static_cast<double>(n)));
}

// Marks the held-out samples: a seeded Fisher-Yates shuffle picks them; both sets keep the
// original order.
std::vector<bool> held_out(std::size_t n, std::size_t n_eval, int64_t seed) {
  std::vector<std::size_t> perm(n);
  for (std::size_t i = 0; i < n; ++i) perm[i] = i;
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  for (std::size_t i = n; i > 1; --i) std::swap(perm[i - 1], perm[draw_below(rng, i)]);
  std::vector<bool> out(n, false);
  for (std::size_t k = 0; k < n_eval; ++k) out[perm[k]] = true;
  return out;
}

template <class Sample>
std::vector<Sample> concat(std::vector<NamedPart<Sample>>& parts, DataStats& stats) {
  std::vector<Sample> all;
  for (auto& p : parts) {
    stats.merge(p.part.stats);
    for (auto& s : p.part.samples) all.push_back(std::move(s));
    p.part.samples.clear();
  }
  return all;
}

std::string why_empty(const RunConfig& cfg, const DataStats& stats) {
  std::string names = cfg.is_v1() ? cfg.v1.train_dataset : "";
  for (const auto& n : cfg.dataset) names += (names.empty() ? "" : ",") + n;
  std::string msg = "dataset '" + names + "' gave no training samples";
  if (stats.skipped_invalid + stats.skipped_bad_rows == 0) return msg + " (the files have no rows)";
  msg += " (" + std::to_string(stats.skipped_invalid) + " conversations skipped, " +
         std::to_string(stats.skipped_bad_rows) + " bad rows skipped";
  if (!stats.warnings.empty()) msg += "; first: " + stats.warnings.front();
  return msg + ")";
}

template <class Sample>
void load_into(const RunConfig& cfg, const Tokenizer& tok, const DatasetOptions& opt,
               std::vector<Sample>& train, std::vector<Sample>& eval, DataStats& stats) {
  if (cfg.val_size > 0 && !cfg.eval_dataset.empty())
    throw DatasetError("val_size and eval_dataset both set: use one of them");
  if (cfg.val_size < 0) throw DatasetError("val_size must not be negative");
  LoadedParts<Sample> parts = detail::load_parts<Sample>(cfg, tok, opt);
  stats.lengths = LengthHistogram::for_cutoff(cfg.cutoff_len);
  train = concat(parts.train, stats);
  eval = concat(parts.eval, stats);
  if (train.empty()) throw DatasetError(why_empty(cfg, stats));
  if (cfg.val_size <= 0) return;

  const std::size_t n_eval = eval_count(cfg.val_size, train.size());
  if (n_eval >= train.size())
    throw DatasetError("val_size " + std::to_string(cfg.val_size) + " holds out " + std::to_string(n_eval) +
                       " of " + std::to_string(train.size()) + " samples, leaving none to train on");
  const std::vector<bool> out = held_out(train.size(), n_eval, cfg.seed);
  std::vector<Sample> kept;
  kept.reserve(train.size() - n_eval);
  for (std::size_t i = 0; i < train.size(); ++i)
    (out[i] ? eval : kept).push_back(std::move(train[i]));
  train = std::move(kept);
}

}  // namespace

SftData load_sft_data(const RunConfig& cfg, const Tokenizer& tokenizer, const DatasetOptions& options) {
  SftData d;
  load_into(cfg, tokenizer, options, d.train, d.eval, d.stats);
  return d;
}

PairData load_pair_data(const RunConfig& cfg, const Tokenizer& tokenizer, const DatasetOptions& options) {
  PairData d;
  load_into(cfg, tokenizer, options, d.train, d.eval, d.stats);
  return d;
}

}  // namespace studio::data
