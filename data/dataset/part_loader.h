#pragma once
// Reading and tokenizing one dataset: rows stream from its files in batches; each batch is
// converted and tokenized on the worker threads and appended in row order.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "part.h"
#include "studio/data/chat_template.h"
#include "studio/data/dataset_info.h"

namespace studio::data::detail {

struct PartSettings {
  const DatasetAttr* attr = nullptr;
  std::vector<std::string> files;  // resolved paths, read in this order
  const TemplateEncoder* encoder = nullptr;
  EncodeOptions encode;
  std::optional<int64_t> max_samples;  // rows read from the dataset, at most
  bool skip_bad_rows = false;
  int workers = 1;
  std::size_t batch_rows = 256;
  std::function<void(const std::string&)> on_warning;
};

// Sample is TokenizedSample (SFT) or PairSample (DPO).
template <class Sample>
Part<Sample> tokenize_dataset(const PartSettings& settings);

}  // namespace studio::data::detail
