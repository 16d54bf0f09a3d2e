#pragma once
// One row of a data file -> a Conversation, as LLaMA-Factory's alpaca and sharegpt converters
// read them.
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "studio/data/conversation.h"
#include "studio/data/dataset_info.h"

namespace studio::data::detail {

// The row's shape is wrong (a missing column, a wrong type): an error, or with skip_bad_rows a
// counted skip. The message has no location; the loader puts dataset, file and line in front.
class RowError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Converted {
  std::optional<Conversation> conversation;
  // Set when LF would drop the row with a warning (roles out of order, a message count that
  // does not end with an answer): the row is skipped and counted, not an error.
  std::string skip_reason;
  // LLaMA-Factory v1 rows (attr.v1, SFT): whether each answer, in order (the response last), is
  // learned; each learned one becomes a sample of its own. Empty: every answer is.
  std::vector<bool> learned_answers = {};
};

// `pairwise`: the row must carry a chosen and a rejected answer (DPO). A row of a KTO dataset
// (attr.kto_tag set) whose tag is true or false is skipped, as LF's sft processor drops it.
Converted convert_row(const DatasetAttr& attr, const nlohmann::json& row, bool pairwise);

// Stage kto (attr.kto_tag set): a row as LLaMA-Factory's converters hand it to its
// FeedbackDatasetProcessor. `conversation.response` is LF's `_response` list as the converter
// builds it: [answer, ""] for a desirable row (kto_tag true), ["", answer] for an undesirable one;
// for a row the processor drops, whatever the converter left there (a row whose kto_tag is null
// or missing is read as a plain example: [answer], or nothing without a string answer; a
// sharegpt row LF finds broken: nothing). The list matters beyond the row itself: the processor
// takes the KL response of the next row of its batch from it, before dropping anything.
// A kto_tag that is neither a bool nor null is a RowError (datasets' JSON loader cannot read
// such a column, so LLaMA-Factory stops too).
struct ConvertedFeedback {
  Conversation conversation;
  std::string skip_reason;  // set when LF's FeedbackDatasetProcessor drops the row
};
ConvertedFeedback convert_feedback_row(const DatasetAttr& attr, const nlohmann::json& row);

// Stage pt: the text of a row, as LLaMA-Factory's pre-training processor takes it: the content
// of the first prompt message (alpaca: the first history query if any, else prompt and query
// joined as for sft; sharegpt: the first message after a system one). No answer is needed and
// the answer, preference and tool columns are not read. Throws RowError as convert_row does.
struct ConvertedText {
  std::optional<std::string> text;
  std::string skip_reason;  // set when LF would drop the row (sharegpt roles out of turn)
};
ConvertedText convert_text_row(const DatasetAttr& attr, const nlohmann::json& row);

// A v1 conversation cut at each learned answer: the samples LLaMA-Factory v1 trains on, each
// answering with its last message after everything before it.
std::vector<Conversation> v1_samples(const Converted& c);

}  // namespace studio::data::detail
