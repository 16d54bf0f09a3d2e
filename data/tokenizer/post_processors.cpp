#include "post_processors.h"

#include <string>

namespace studio::data::detail {

namespace {

// The ids of one entry of "special_tokens" ({"id": "<s>", "ids": [1], "tokens": ["<s>"]}).
std::vector<int32_t> special_token_ids(const JsonNode& special_tokens, const JsonNode& reference) {
  const std::string name = reference["id"].string();
  const JsonNode entry = special_tokens[name.c_str()];
  if (entry.is_null()) reference["id"].fail("'" + name + "' is not listed in special_tokens");
  const JsonNode ids = entry["ids"];
  ids.require_array();
  std::vector<int32_t> out;
  for (std::size_t i = 0; i < ids.size(); ++i)
    out.push_back(static_cast<int32_t>(ids[i].integer({0, INT32_MAX})));
  return out;
}

SpecialTokenFrame template_frame(const JsonNode& node) {
  const JsonNode single = node["single"];
  single.require_array();
  SpecialTokenFrame frame;
  bool seen_sequence = false;
  for (std::size_t i = 0; i < single.size(); ++i) {
    const JsonNode item = single[i];
    if (item.has("Sequence")) {
      if (seen_sequence) item.fail("a single-sequence template holds one sequence");
      seen_sequence = true;
    } else if (item.has("SpecialToken")) {
      const auto ids = special_token_ids(node["special_tokens"], item["SpecialToken"]);
      auto& side = seen_sequence ? frame.after : frame.before;
      side.insert(side.end(), ids.begin(), ids.end());
    } else {
      item.fail("expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
    }
  }
  if (!seen_sequence) single.fail("the template has no {\"Sequence\": {\"id\": \"A\"}}");
  return frame;
}

}  // namespace

void SpecialTokenFrame::apply(std::vector<int32_t>& ids) const {
  ids.insert(ids.begin(), before.begin(), before.end());
  ids.insert(ids.end(), after.begin(), after.end());
}

SpecialTokenFrame post_processor_from_json(const JsonNode& node) {
  if (node.is_null()) return {};
  const std::string type = node.type({"TemplateProcessing", "ByteLevel", "Sequence"});
  if (type == "TemplateProcessing") return template_frame(node);
  if (type == "ByteLevel") return {};
  const JsonNode steps = node["processors"];
  steps.require_array();
  SpecialTokenFrame frame;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    // Each step wraps what the previous ones produced.
    const SpecialTokenFrame step = post_processor_from_json(steps[i]);
    frame.before.insert(frame.before.begin(), step.before.begin(), step.before.end());
    frame.after.insert(frame.after.end(), step.after.begin(), step.after.end());
  }
  return frame;
}

}  // namespace studio::data::detail
