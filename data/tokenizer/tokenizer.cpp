// The encode and decode pipelines; loading is in loader.cpp.
#include "tokenizer_impl.h"

#include "unicode.h"

namespace studio::data {

using detail::Piece;
using detail::PieceView;
using detail::Segment;

Tokenizer::Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

void Tokenizer::Impl::encode_piece(PieceView piece, std::vector<int32_t>& ids) const {
  if (piece.text.empty()) return;
  if (!pre_tokenizer) {
    model->tokenize(piece.text, ids);
    return;
  }
  auto tokenize = [&](PieceView word) { model->tokenize(word.text, ids); };
  pre_tokenizer->pre_tokenize(piece, tokenize);
}

void Tokenizer::Impl::encode_text(std::string_view text, bool at_origin,
                                  std::vector<int32_t>& ids) const {
  if (text.empty()) return;
  PieceView piece{text, at_origin};
  Piece normalized;  // owns the text only when a normalizer rewrites it
  if (normalizer) {
    normalized = {std::string(text), at_origin};
    normalizer->normalize(normalized);
    piece = {normalized.text, normalized.at_origin};
  }
  if (!added.has_normalized_tokens()) {
    encode_piece(piece, ids);
    return;
  }
  std::vector<Segment> segments;
  added.split_normalized(piece.text, segments);
  for (const Segment& s : segments) {
    if (s.id >= 0) {
      ids.push_back(s.id);
    } else {
      encode_piece({piece.text.substr(s.start, s.end - s.start), piece.at_origin && s.start == 0},
                   ids);
    }
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view utf8, bool add_special_tokens) const {
  std::string repaired;
  std::string_view text = utf8;
  if (!detail::is_valid_utf8(utf8)) {
    repaired = detail::to_valid_utf8(utf8);
    text = repaired;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<Segment> segments;
  impl_->added.split_raw(text, segments);
  for (const Segment& s : segments) {
    if (s.id >= 0) {
      ids.push_back(s.id);
    } else {
      impl_->encode_text(text.substr(s.start, s.end - s.start), s.start == 0, ids);
    }
  }
  if (add_special_tokens) impl_->special_frame.apply(ids);
  return ids;
}

// Ids the tokenizer does not know are skipped, as HF does.
std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    const std::string* token = impl_->added.id_to_token(id);
    if (token == nullptr) token = impl_->model->id_to_token(id);
    if (token == nullptr || (skip_special_tokens && impl_->added.is_special_text(*token))) continue;
    tokens.push_back(*token);
  }
  std::string text;
  if (!impl_->decoder) {
    for (std::size_t i = 0; i < tokens.size(); ++i) text += (i > 0 ? " " : "") + tokens[i];
    return text;
  }
  impl_->decoder->decode_chain(tokens);
  for (const std::string& token : tokens) text += token;
  return text;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const auto id = impl_->added.token_to_id(token)) return id;
  return impl_->model->token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  const std::string* token = impl_->added.id_to_token(id);
  if (token == nullptr) token = impl_->model->id_to_token(id);
  if (token == nullptr) return std::nullopt;
  return *token;
}

std::size_t Tokenizer::vocab_size() const {
  return impl_->model->size() + impl_->added.new_tokens();
}

bool Tokenizer::is_special(int32_t id) const {
  return impl_->added.is_special(id);
}
std::optional<int32_t> Tokenizer::bos_id() const {
  return impl_->bos;
}
std::optional<int32_t> Tokenizer::eos_id() const {
  return impl_->eos;
}
std::optional<int32_t> Tokenizer::pad_id() const {
  return impl_->pad;
}
bool Tokenizer::add_bos_token() const {
  return impl_->add_bos_token;
}
const std::string& Tokenizer::source() const {
  return impl_->source;
}

}  // namespace studio::data
