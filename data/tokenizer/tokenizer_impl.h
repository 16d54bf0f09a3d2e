#pragma once
// The parts of a loaded tokenizer, shared by the loader (loader.cpp) and the pipeline
// (tokenizer.cpp).
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "added_tokens.h"
#include "bpe.h"
#include "decoders.h"
#include "normalizers.h"
#include "post_processors.h"
#include "pre_tokenizers.h"
#include "studio/data/tokenizer.h"

namespace studio::data {

struct Tokenizer::Impl {
  std::string source;
  std::unique_ptr<detail::BpeModel> model;
  std::unique_ptr<detail::Normalizer> normalizer;
  std::unique_ptr<detail::PreTokenizer> pre_tokenizer;
  detail::AddedVocabulary added;
  detail::SpecialTokenFrame special_frame;
  std::unique_ptr<detail::Decoder> decoder;
  std::optional<int32_t> bos, eos, pad;
  bool add_bos_token = false;  // tokenizer_config.json sets it and names a bos token

  // Encodes text between raw added tokens: normalize, cut at normalized added tokens,
  // pre-tokenize, run the model.
  void encode_text(std::string_view text, bool at_origin, std::vector<int32_t>& ids) const;
  void encode_piece(detail::PieceView piece, std::vector<int32_t>& ids) const;
};

}  // namespace studio::data
