#pragma once
// Every dataset of a run config, tokenized (through the cache), before the train/eval split.
// The public loaders and the preview share it.
#include <string>
#include <vector>

#include "part.h"
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

template <class Sample>
LoadedParts<Sample> load_parts(const RunConfig& cfg, const Tokenizer& tokenizer,
                               const DatasetOptions& options);

}  // namespace studio::data::detail
