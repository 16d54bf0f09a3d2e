// The public loaders for sft, dpo and kto: the tokenized datasets concatenated in the order
// written, the eval set from eval_dataset or split off by val_size. Stage pt's is in pretrain.cpp.
#include "studio/data/dataset.h"

#include <algorithm>

#include "feedback.h"
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

// The datasets' samples concatenated; an error when there is nothing to train on.
template <class Sample>
void assemble(const RunConfig& cfg, LoadedParts<Sample>& parts, std::vector<Sample>& train,
              std::vector<Sample>& eval, DataStats& stats) {
  stats.lengths = LengthHistogram::for_cutoff(cfg.cutoff_len);
  train = concat(parts.train, stats);
  eval = concat(parts.eval, stats);
  if (train.empty()) throw DatasetError(detail::why_empty(cfg, stats));
}

template <class Sample>
void load_into(const RunConfig& cfg, const Tokenizer& tok, const DatasetOptions& opt,
               std::vector<Sample>& train, std::vector<Sample>& eval, DataStats& stats) {
  detail::check_split_settings(cfg);
  LoadedParts<Sample> parts = detail::load_parts<Sample>(cfg, tok, opt);
  assemble(cfg, parts, train, eval, stats);
  detail::split_off_eval(cfg, train, eval);
}

// LF's "Your dataset only has one preference type." (feedback.h), first among the warnings.
void warn_one_kind(const std::vector<FeedbackSample>& samples, const std::string& set,
                   const DatasetOptions& opt, DataStats& stats) {
  const auto desirable = std::count_if(samples.begin(), samples.end(),
                                       [](const FeedbackSample& s) { return s.desirable; });
  const std::string message = detail::one_kind_warning(
      set, static_cast<int64_t>(samples.size()), static_cast<int64_t>(desirable));
  if (message.empty()) return;
  if (opt.on_warning) opt.on_warning(message);
  stats.warnings.insert(stats.warnings.begin(), message);
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

FeedbackData load_feedback_data(const RunConfig& cfg, const Tokenizer& tokenizer,
                                const DatasetOptions& options) {
  detail::require_stage(cfg, Stage::Kto, "load_feedback_data");
  detail::check_split_settings(cfg);
  LoadedParts<FeedbackSample> parts = detail::load_feedback_parts(cfg, tokenizer, options);
  FeedbackData d;
  assemble(cfg, parts, d.train, d.eval, d.stats);
  warn_one_kind(d.eval, "eval", options, d.stats);
  warn_one_kind(d.train, "training", options, d.stats);
  detail::split_off_eval(cfg, d.train, d.eval);
  return d;
}

}  // namespace studio::data
