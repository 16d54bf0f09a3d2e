#pragma once
// Reading and tokenizing one dataset: rows stream from its files in batches; each batch is
// converted and tokenized on the worker threads and appended in row order.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "json_rows.h"
#include "part.h"
#include "studio/data/chat_template.h"
#include "studio/data/dataset_info.h"

namespace studio::data::detail {

// Stage pt: each row's text (converter.h) tokenized as LLaMA-Factory's pre-training processor
// does, with no special tokens: prefix + text + suffix, cut to truncate_to tokens when set.
struct TextEncoding {
  const Tokenizer* tokenizer = nullptr;
  std::string prefix;  // the bos token's text, or nothing
  std::string suffix;  // the eos text
  std::optional<int64_t> truncate_to;
};

struct PartSettings {
  const DatasetAttr* attr = nullptr;
  std::vector<std::string> files;  // resolved paths, read in this order
  // Rows are conversations rendered by `encoder`, or (stage pt, TokenizedSample) texts encoded
  // by `text`: exactly one of them is set.
  const TemplateEncoder* encoder = nullptr;
  const TextEncoding* text = nullptr;
  EncodeOptions encode;
  std::optional<int64_t> max_samples;  // rows read from the dataset, at most
  bool skip_bad_rows = false;
  int workers = 1;
  std::size_t batch_rows = 256;
  std::function<void(const std::string&)> on_warning;
};

struct PendingRow {
  RawRow row;
  std::string file;
};

// A dataset's rows from its files in order, numbered across them, at most max_samples, handed
// over batch_rows at a time. Malformed JSON lines, and rows the caller finds malformed, are
// errors, or with skip_bad_rows counted in `stats` and warned about.
class RowReader {
 public:
  RowReader(const PartSettings& settings, DataStats& stats) : s_(settings), stats_(stats) {}

  void read_all(const std::function<void(std::vector<PendingRow>&)>& on_batch);
  // Throws DatasetError with `message`, or with skip_bad_rows counts the row and warns.
  void bad_row(const std::string& message);
  void warn(const std::string& message);
  // "dataset 'NAME' (FILE:LINE): row N"
  std::string where(const PendingRow& p) const;

 private:
  const PartSettings& s_;
  DataStats& stats_;
};

// Sample is TokenizedSample (SFT, pt) or PairSample (DPO).
template <class Sample>
Part<Sample> tokenize_dataset(const PartSettings& settings);

}  // namespace studio::data::detail
