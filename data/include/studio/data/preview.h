#pragma once
// What training will see: the first samples decoded back to text with their masked (not
// learned) spans marked, token counts, and the length histogram against cutoff_len. The CLI
// (`studio-train preview`) and the studio's data page both print format_preview_text().
#include <cstdint>
#include <string>
#include <vector>

#include "studio/config/run_config.h"
#include "studio/data/dataset.h"
#include "studio/data/tokenizer.h"

namespace studio::data {

struct PreviewSpan {
  std::string text;
  bool learned = false;  // false: the labels are kIgnoreIndex here (prompt, history)
};

struct PreviewSequence {
  std::vector<PreviewSpan> spans;  // consecutive tokens of equal mask, decoded
  int64_t tokens = 0;
  int64_t learned_tokens = 0;
};

struct PreviewSample {
  std::string dataset;        // its name in dataset_info.json
  int64_t row = 0;            // 1-based row in its file(s); a pt block: that of its first token
  int64_t full_length = 0;    // tokens before truncation
  bool truncated = false;     // full_length > cutoff_len
  PreviewSequence sequence;   // SFT, pt; KTO: the target (the row's own response)
  PreviewSequence chosen;     // DPO
  PreviewSequence rejected;   // DPO
  PreviewSequence kl;         // KTO: the prompt with the KL response (another row's)
  bool desirable = false;     // KTO: the target's kto_tag
};

struct PreviewReport {
  std::string template_name;
  Stage stage = Stage::Sft;
  int64_t cutoff_len = 0;
  int64_t block_len = 0;      // stage pt packing: the samples are blocks of this many tokens
  int64_t train_samples = 0;  // before a val_size split
  int64_t eval_samples = 0;   // eval_dataset samples
  DataStats stats;            // all of them (lengths: untruncated)
  std::vector<PreviewSample> samples;  // the first n of `dataset`, in file order
};

// Loads the data as training will (through the cache) and decodes the first n samples.
// Stage pt: the first sequences as training sees them (cutoff_len blocks when packing), every
// token learned. Stage kto: each example's target and its KL sequence. Throws what
// load_sft_data / load_pair_data / load_pt_data / load_feedback_data throw.
PreviewReport preview(const RunConfig& cfg, const Tokenizer& tokenizer, int n,
                      const DatasetOptions& options = {});

// How masked spans are marked: plain brackets by default; a terminal may pass ANSI dim codes.
struct PreviewStyle {
  std::string masked_open = "[[";
  std::string masked_close = "]]";
};

std::string format_preview_text(const PreviewReport& report, const PreviewStyle& style = {});

}  // namespace studio::data
