#pragma once
// tokenizer.json "post_processor", for encode(..., add_special_tokens = true): the special tokens
// placed around the sequence (LLaMA's BOS). Pairs of sequences are not encoded here, so only each
// template's "single" form is used.
#include <cstdint>
#include <memory>
#include <vector>

#include "json_node.h"

namespace studio::data::detail {

// The ids a template puts before and after the sequence.
struct SpecialTokenFrame {
  std::vector<int32_t> before, after;
  void apply(std::vector<int32_t>& ids) const;
};

// An empty frame for null, ByteLevel (which only adjusts offsets) and their Sequences.
SpecialTokenFrame post_processor_from_json(const JsonNode& node);

}  // namespace studio::data::detail
