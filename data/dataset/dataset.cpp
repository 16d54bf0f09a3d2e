// The public loaders for sft and dpo: the tokenized datasets concatenated in the order written,
// the eval set from eval_dataset or split off by val_size. Stage pt's is in pretrain.cpp.
#include "studio/data/dataset.h"

#include "loader.h"
#include "split.h"

namespace studio::data {
namespace {

using detail::LoadedParts;
using detail::NamedPart;

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

template <class Sample>
void load_into(const RunConfig& cfg, const Tokenizer& tok, const DatasetOptions& opt,
               std::vector<Sample>& train, std::vector<Sample>& eval, DataStats& stats) {
  detail::check_split_settings(cfg);
  LoadedParts<Sample> parts = detail::load_parts<Sample>(cfg, tok, opt);
  stats.lengths = LengthHistogram::for_cutoff(cfg.cutoff_len);
  train = concat(parts.train, stats);
  eval = concat(parts.eval, stats);
  if (train.empty()) throw DatasetError(detail::why_empty(cfg, stats));
  detail::split_off_eval(cfg, train, eval);
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
