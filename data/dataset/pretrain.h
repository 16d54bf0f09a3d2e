#pragma once
// Stage pt's sequences before the val_size split: LLaMA-Factory's PretrainDatasetProcessor over
// the texts of every dataset. The public loader (load_pt_data) and the preview share it.
#include <cstdint>
#include <string>
#include <vector>

#include "studio/config/run_config.h"
#include "studio/data/dataset.h"

namespace studio::data::detail {

// Where a sequence starts: the dataset (an index into PtSequences::datasets) and its row there.
struct PtOrigin {
  std::size_t dataset = 0;
  int64_t row = 0;
  int64_t full_length = 0;  // a text's tokens before truncation; a block's length
};

struct PtSequences {
  std::vector<std::string> datasets;   // `dataset`, then `eval_dataset`, as written
  std::vector<TokenizedSample> train;  // blocks (packing) or texts, in row order
  std::vector<PtOrigin> train_origins;
  std::vector<TokenizedSample> eval;
  DataStats stats;  // both sets; lengths: the texts' untruncated lengths
};

// The length of stage pt's packed blocks: cutoff_len, or cutoff_len - 1 when the config sets
// packing: true (LLaMA-Factory's DataArguments shortens it then).
int64_t pt_block_len(const RunConfig& cfg);

// Throws DatasetError (the data, or too few tokens for one block) or TemplateError (the eos).
PtSequences load_pt_sequences(const RunConfig& cfg, const Tokenizer& tokenizer,
                              const DatasetOptions& options);

}  // namespace studio::data::detail
