#pragma once
// Every dataset of a run config, tokenized (through the cache), before the train/eval split.
// The public loaders and the preview share it.
#include <string>
#include <vector>

#include "part.h"
#include "part_loader.h"
#include "studio/config/run_config.h"
#include "studio/data/dataset.h"

namespace studio::data::detail {

template <class Sample>
struct NamedPart {
  std::string name;
  Part<Sample> part;
};

template <class Sample>
struct LoadedParts {
  std::vector<NamedPart<Sample>> train;  // `dataset`, in the order written
  std::vector<NamedPart<Sample>> eval;   // `eval_dataset`
};

// Conversations through cfg's chat template: TokenizedSample for sft, PairSample for dpo.
template <class Sample>
LoadedParts<Sample> load_parts(const RunConfig& cfg, const Tokenizer& tokenizer,
                               const DatasetOptions& options);

// Stage kto (LLaMA-Factory's FeedbackDatasetProcessor, feedback.h): each list of datasets
// (`dataset`, `eval_dataset`) tokenized as one, since its rows pair across datasets.
LoadedParts<FeedbackSample> load_feedback_parts(const RunConfig& cfg, const Tokenizer& tokenizer,
                                                const DatasetOptions& options);

// Throws DatasetError unless cfg.stage is `stage`: "LOADER reads stage X's data; ...".
void require_stage(const RunConfig& cfg, Stage stage, const char* loader);

// "dataset 'a,b' gave no training samples", with what was skipped and why.
std::string why_empty(const RunConfig& cfg, const DataStats& stats);

// Stage pt: one sample per row, its text encoded by `text` (no chat template), cached apart
// from sft's samples of the same dataset.
LoadedParts<TokenizedSample> load_text_parts(const RunConfig& cfg, const Tokenizer& tokenizer,
                                             const DatasetOptions& options,
                                             const TextEncoding& text);

}  // namespace studio::data::detail
