#pragma once
// tokenizer.json "decoder": turns the tokens of a sequence of ids back into text. Each decoder
// maps the list of token strings to a new list (HF's decode_chain); the result is their
// concatenation.
#include <memory>
#include <string>
#include <vector>

#include "json_node.h"

namespace studio::data::detail {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

// nullptr for a null node (HF then joins the tokens with spaces).
std::unique_ptr<Decoder> decoder_from_json(const JsonNode& node);

}  // namespace studio::data::detail
