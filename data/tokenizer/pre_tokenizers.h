#pragma once
// tokenizer.json "pre_tokenizer": cuts normalized text into the words the model sees, and may
// rewrite them (ByteLevel's byte alphabet, Metaspace's "▁").
#include <memory>

#include "json_node.h"
#include "pieces.h"

namespace studio::data::detail {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Passes the non-empty pieces `piece` becomes to `sink`, in order.
  virtual void pre_tokenize(PieceView piece, const PieceSink& sink) const = 0;
};

// nullptr for a null node; errors name the unsupported type or bad field.
std::unique_ptr<PreTokenizer> pre_tokenizer_from_json(const JsonNode& node);

}  // namespace studio::data::detail
