#pragma once
// tokenizer.json "normalizer": rewrites each stretch of input between added tokens before it is
// pre-tokenized (NFC, Prepend("▁"), Replace(" ", "▁"), ...).
#include <memory>

#include "json_node.h"
#include "pieces.h"

namespace studio::data::detail {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(Piece& piece) const = 0;
};

// nullptr for a null node; errors name the unsupported type or bad field.
std::unique_ptr<Normalizer> normalizer_from_json(const JsonNode& node);

}  // namespace studio::data::detail
