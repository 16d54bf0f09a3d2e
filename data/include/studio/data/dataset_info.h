#pragma once
// dataset_info.json: the LLaMA-Factory file mapping dataset names to local files, their format
// (alpaca, sharegpt) and their column names; or, for a LLaMA-Factory v1 config, its dataset YAML
// (studio/config/llamafactory_v1.h). See docs/datasets.md.
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "studio/config/run_config.h"

namespace studio::data {

// Anything wrong with the data: the message says which dataset, file and line, and what to do.
class DatasetError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// V1Pair and V1Messages are LLaMA-Factory v1's: its pair converter (chosen and rejected message
// lists) and its own rows (messages, or chosen_messages and rejected_messages, with content blocks
// and a loss_weight per message).
enum class Formatting { Alpaca, Sharegpt, V1Pair, V1Messages };

struct DatasetAttr {
  std::string name;       // the key in dataset_info.json
  std::string file_name;  // relative to dataset_dir: a file, or a folder whose files are read in order
  Formatting formatting = Formatting::Alpaca;
  bool ranking = false;   // preference pairs (DPO)

  // Column names in the file, by LLaMA-Factory's role names (LF's defaults).
  std::string prompt = "instruction";  // alpaca
  std::string query = "input";         // alpaca
  std::string response = "output";     // alpaca
  std::string history;                 // alpaca: [[query, answer], ...]; unset by default
  std::string messages = "conversations";  // sharegpt
  std::string system;                  // unset by default
  std::string tools;                   // unset by default
  std::string chosen = "chosen";       // ranking
  std::string rejected = "rejected";   // ranking
  // KTO (LF's "kto_tag"): the column whose true marks a row's response desirable, false
  // undesirable; unset by default. Stage kto needs it; sft drops the tagged rows, as LF does.
  std::string kto_tag;
  std::map<std::string, std::string> columns;  // the "columns" object as written

  // sharegpt message keys and role values (LF's defaults: from/value, human/gpt).
  std::string role_tag = "from";
  std::string content_tag = "value";
  std::string user_tag = "human";
  std::string assistant_tag = "gpt";
  std::string observation_tag = "observation";
  std::string function_tag = "function_call";
  std::string system_tag = "system";
  bool tags_given = false;  // false: rows in OpenAI role/content form are recognised as such
  // The OpenAI message form: role/content with user/assistant/tool/system roles.
  void use_openai_tags() {
    role_tag = "role";
    content_tag = "content";
    user_tag = "user";
    assistant_tag = "assistant";
    observation_tag = "tool";
    system_tag = "system";
  }

  std::string entry_json;  // the entry as written (part of the cache key)
  std::vector<std::string> warnings;  // keys accepted without effect

  // LLaMA-Factory v1's rules: its converters (alpaca joins instruction and input with nothing
  // between), every learned answer its own sample with what precedes it as one masked prompt,
  // no thought block learned, the first cutoff_len tokens kept.
  bool v1 = false;
  std::optional<int64_t> size;  // v1's size: at most this many rows of the dataset

  // "columns mapping: response -> output" for a role (prompt, response, messages, ...), for
  // error messages; "(default)" when dataset_info.json does not map it.
  std::string describe_column(const std::string& role) const;
};

// <dataset_dir>/dataset_info.json. Entries are checked when they are used, so one that cannot
// be honoured (unknown formatting, hub datasets, multimodal columns) does not stop the others.
class DatasetInfo {
 public:
  // Throws DatasetError when the file is missing or is not a JSON object.
  static DatasetInfo read(const std::string& dataset_dir);
  // The registry a run config names: <dataset_dir>/dataset_info.json with `dataset` and
  // `eval_dataset`; for a v1 config the entries of train_dataset (and, when it evaluates,
  // eval_dataset). Throws DatasetError with the dataset YAML's located problems.
  static DatasetInfo for_config(const RunConfig& cfg);

  const std::vector<std::string>& train() const { return train_; }
  const std::vector<std::string>& eval() const { return eval_; }
  // Relative data file names resolve against it; the tokenized cache's default folder.
  const std::string& data_dir() const { return data_dir_; }
  const std::string& cache_dir() const { return cache_dir_; }

  // The entry for `name`; throws DatasetError naming the file, the dataset and the key at fault,
  // or listing the names the file has.
  DatasetAttr find(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  std::string file_;
  std::map<std::string, std::string> entries_;  // name -> the entry's JSON text
  std::map<std::string, DatasetAttr> v1_;       // name -> a v1 dataset YAML's entry
  std::vector<std::string> train_, eval_;
  std::string data_dir_, cache_dir_;
};

}  // namespace studio::data
