#pragma once
// Training data from a run config: the datasets named by `dataset` (and `eval_dataset`) in
// <dataset_dir>/dataset_info.json, or by a LLaMA-Factory v1 config's dataset YAML (its
// train_dataset), read as LLaMA-Factory reads them, rendered with the chat template (stage pt:
// plain texts), tokenized on several threads in a deterministic order, truncated to cutoff_len
// (stage pt: or packed), and cached. See docs/datasets.md.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "studio/config/run_config.h"
#include "studio/data/dataset_info.h"
#include "studio/data/sample.h"
#include "studio/data/tokenizer.h"

namespace studio::data {

struct DatasetOptions {
  std::string cache_dir;        // default: <dataset_dir>/.studio_cache
  bool use_cache = true;        // false: neither read nor write cache files
  bool skip_bad_rows = false;   // malformed JSON lines and rows missing a column: counted, skipped
  int num_workers = 0;          // tokenizer threads; 0: preprocessing_num_workers, else all cores
  std::optional<bool> enable_thinking;  // reasoning templates; default: YAML enable_thinking, true
  std::size_t batch_rows = 256;         // rows held and tokenized at a time (bounds memory)
  std::function<void(const std::string&)> on_warning;  // each warning as it happens (optional)
};

// Sample lengths before truncation, in bins relative to cutoff_len: eighths of it up to
// cutoff_len, then (1x, 2x], (2x, 4x] and above 4x.
struct LengthHistogram {
  int64_t cutoff_len = 0;
  std::vector<int64_t> upper;   // inclusive upper bound of each bin; the last is INT64_MAX
  std::vector<int64_t> counts;  // samples per bin

  static LengthHistogram for_cutoff(int64_t cutoff_len);
  void add(int64_t length);
  void merge(const LengthHistogram& other);
  int64_t above_cutoff() const;  // samples that are truncated
};

struct DataStats {
  int64_t samples = 0;           // samples kept (train + eval)
  int64_t tokens = 0;            // input tokens after truncation (DPO: chosen + rejected;
                                 // KTO: target + KL)
  int64_t learned_tokens = 0;    // labels that are not kIgnoreIndex (KTO: the targets' only)
  int64_t truncated = 0;         // samples longer than cutoff_len before truncation
  int64_t skipped_bad_rows = 0;  // skip_bad_rows: malformed or incomplete rows left out
  int64_t skipped_invalid = 0;   // conversations LLaMA-Factory also drops (role order, count)
  int64_t desirable = 0;         // KTO: samples whose target is desirable (the rest: undesirable)
  LengthHistogram lengths;       // untruncated sample lengths
  std::vector<std::string> warnings;  // the first warnings, each with its dataset, file and line
  int64_t datasets_from_cache = 0;

  void merge(const DataStats& other);
};

struct SftData {
  std::vector<TokenizedSample> train;
  std::vector<TokenizedSample> eval;
  DataStats stats;
};

struct PairData {
  std::vector<PairSample> train;
  std::vector<PairSample> eval;
  DataStats stats;
};

struct FeedbackData {
  std::vector<FeedbackSample> train;
  std::vector<FeedbackSample> eval;
  DataStats stats;
};

// Throw DatasetError (the data) or TemplateError (template and tokenizer). An empty result,
// after skips, is an error that says why rows were skipped.
SftData load_sft_data(const RunConfig& cfg, const Tokenizer& tokenizer,
                      const DatasetOptions& options = {});
PairData load_pair_data(const RunConfig& cfg, const Tokenizer& tokenizer,
                        const DatasetOptions& options = {});

// Stage kto (cfg.stage must be kto), as LLaMA-Factory 0.9.5 builds it: datasets with a kto_tag
// column (true: the row's response is desirable, false: undesirable); ranking datasets and
// datasets without kto_tag are errors. Each row's `target` is its prompt (everything before the
// response, masked) with its response, through LF's encode_oneturn (efficient_eos templates add
// the eos), prompt and response cut to cutoff_len by infer_seqlen; `kl` is the same prompt with
// the response of the row before it within LLaMA-Factory's map batch (preprocessing_batch_size
// rows, within preprocessing_num_workers contiguous shards of the merged `dataset` rows; a
// batch's first row takes the batch's last row's), truncated alike. As LF, the KL responses are
// taken before the rows LF drops are left out (a kto_tag that is null or missing, sharegpt roles
// out of order: counted in skipped_invalid), and a row whose response is empty reads as
// undesirable. eval_dataset is paired within its own batches; val_size splits the samples after
// pairing (LF splits the rows first, with its own shuffle). stats: samples = examples kept,
// desirable = those desirable, tokens = target + KL tokens, learned_tokens = the targets'
// response tokens, lengths and truncated = the longer of the two sequences before truncation;
// a warning when a set has only one kind (LF: "Your dataset only has one preference type.").
// Throws as load_sft_data, and DatasetError for a kto_tag neither a bool nor null, or a row
// whose KL response would come from a dropped row without one (LF 0.9.5 fails there too).
FeedbackData load_feedback_data(const RunConfig& cfg, const Tokenizer& tokenizer,
                                const DatasetOptions& options = {});

// Stage pt (cfg.stage must be pt), as LLaMA-Factory's PretrainDatasetProcessor builds it: each
// row's text (its first prompt message; no answer needed, no chat template) + the eos text
// (the literal <|end_of_text|> for template llama3, else the tokenizer's eos, or a replace_eos
// template's), tokenized without special tokens. cfg.pt_packs(): the merged rows of `dataset`
// (and separately of `eval_dataset`), in batches of preprocessing_batch_size rows (within
// preprocessing_num_workers contiguous shards, as datasets' map), are concatenated per batch and
// cut into blocks of exactly cutoff_len tokens (cutoff_len - 1 when the config writes packing:
// true, as LLaMA-Factory's DataArguments), each batch's remainder dropped; a tokenizer with
// add_bos_token has its bos written over each block's first token. Otherwise each text, with
// the bos text in front when add_bos_token, is one sample truncated to cutoff_len. Every label
// is set; no segment_lengths. max_samples caps the rows of each dataset; val_size splits the
// blocks. stats: samples = sequences, lengths = the texts' untruncated lengths, truncated =
// texts cut (0 when packing). Throws as load_sft_data, and DatasetError for ranking datasets or
// too few tokens for one block.
SftData load_pt_data(const RunConfig& cfg, const Tokenizer& tokenizer,
                     const DatasetOptions& options = {});

}  // namespace studio::data
