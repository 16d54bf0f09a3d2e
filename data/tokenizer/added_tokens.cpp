#include "added_tokens.h"

#include <algorithm>

#include "unicode.h"

namespace studio::data::detail {

namespace {

std::size_t previous_character_start(std::string_view text, std::size_t pos) {
  do {
    --pos;
  } while (pos > 0 && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80);
  return pos;
}

char32_t character_before(std::string_view text, std::size_t pos) {
  std::size_t start = previous_character_start(text, pos);
  return next_code_point(text, start);
}

char32_t character_at(std::string_view text, std::size_t pos) {
  return next_code_point(text, pos);
}

// single_word: no word character (regex \w) touches the token on either side.
bool stands_alone(std::string_view text, std::size_t start, std::size_t stop) {
  const bool left_free = start == 0 || !is_word_character(character_before(text, start));
  const bool right_free = stop == text.size() || !is_word_character(character_at(text, stop));
  return left_free && right_free;
}

// Where the run of White_Space characters ending at `pos` starts.
std::size_t whitespace_run_start(std::string_view text, std::size_t pos) {
  while (pos > 0 && is_white_space(character_before(text, pos)))
    pos = previous_character_start(text, pos);
  return pos;
}

// Where the run of White_Space characters starting at `pos` ends.
std::size_t whitespace_run_end(std::string_view text, std::size_t pos) {
  while (pos < text.size()) {
    std::size_t next = pos;
    if (!is_white_space(next_code_point(text, next))) break;
    pos = next;
  }
  return pos;
}

AddedToken token_from_json(const JsonNode& node) {
  node.require_object();
  AddedToken token;
  token.content = node["content"].string();
  token.special = node["special"].boolean_or(false);
  token.single_word = node["single_word"].boolean_or(false);
  token.lstrip = node["lstrip"].boolean_or(false);
  token.rstrip = node["rstrip"].boolean_or(false);
  token.normalized = node["normalized"].boolean_or(!token.special);
  return token;
}

}  // namespace

void AddedVocabulary::Matcher::add(std::string_view pattern, std::size_t token) {
  if (pattern.empty()) return;
  std::size_t node = 0;
  for (const char c : pattern) {
    const auto byte = static_cast<unsigned char>(c);
    auto& children = nodes_[node].children;
    const auto it = std::find_if(children.begin(), children.end(),
                                 [byte](const auto& child) { return child.first == byte; });
    if (it != children.end()) {
      node = static_cast<std::size_t>(it->second);
      continue;
    }
    children.emplace_back(byte, static_cast<int32_t>(nodes_.size()));
    nodes_.emplace_back();
    node = nodes_.size() - 1;
  }
  // The first token with a given pattern wins, as in HF's automaton.
  if (nodes_[node].token < 0) nodes_[node].token = static_cast<int64_t>(token);
  first_byte_[static_cast<unsigned char>(pattern.front())] = true;
}

std::optional<AddedVocabulary::Matcher::Match> AddedVocabulary::Matcher::find(
    std::string_view text, std::size_t from) const {
  if (empty()) return std::nullopt;
  for (std::size_t pos = from; pos < text.size(); ++pos) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) continue;
    if (auto match = longest_at(text, pos)) return match;
  }
  return std::nullopt;
}

std::optional<AddedVocabulary::Matcher::Match> AddedVocabulary::Matcher::longest_at(
    std::string_view text, std::size_t pos) const {
  std::optional<Match> best;
  std::size_t node = 0;
  for (std::size_t i = pos; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const auto& children = nodes_[node].children;
    const auto it = std::find_if(children.begin(), children.end(),
                                 [byte](const auto& child) { return child.first == byte; });
    if (it == children.end()) break;
    node = static_cast<std::size_t>(it->second);
    if (nodes_[node].token >= 0)
      best = Match{pos, i + 1, static_cast<std::size_t>(nodes_[node].token)};
  }
  return best;
}

void AddedVocabulary::load(const JsonNode& list, const ModelLookup& model, std::size_t model_size,
                           const NormalizeText& normalize) {
  if (list.is_null()) return;
  list.require_array();
  for (std::size_t i = 0; i < list.size(); ++i) {
    AddedToken token = token_from_json(list[i]);
    if (token.content.empty()) continue;
    if (const auto known = token_to_id(token.content)) {
      token.id = *known;
    } else if (const auto in_model = model(token.content)) {
      token.id = *in_model;
    } else {
      token.id = static_cast<int32_t>(model_size + new_tokens_++);
    }
    const auto existing = by_content_.find(token.content);
    const std::size_t index = existing != by_content_.end() ? existing->second : tokens_.size();
    if (index == tokens_.size()) tokens_.emplace_back();
    token.surface = token.normalized ? normalize(token.content) : token.content;
    tokens_[index] = token;  // a repeated token takes the later flags, as in HF
    by_content_[token.content] = index;
    by_id_[token.id] = index;
    if (token.special) {
      special_ids_.insert(token.id);
      special_contents_.insert(token.content);
    }
  }
  // Special tokens take precedence over plain ones with the same pattern.
  for (const bool special : {true, false}) {
    for (std::size_t index = 0; index < tokens_.size(); ++index) {
      const AddedToken& token = tokens_[index];
      if (token.special != special) continue;
      if (token.normalized) {
        normalized_.add(token.surface, index);
      } else {
        raw_.add(token.content, index);
      }
    }
  }
}

void AddedVocabulary::split_raw(std::string_view text, std::vector<Segment>& out) const {
  split(raw_, text, out);
}

void AddedVocabulary::split_normalized(std::string_view text, std::vector<Segment>& out) const {
  split(normalized_, text, out);
}

// Like HF: a match that fails single_word is dropped without searching inside it again; lstrip
// reaches back no further than the previous token; the search resumes after the match itself
// even when rstrip swallowed the whitespace after it.
void AddedVocabulary::split(const Matcher& matcher, std::string_view text,
                            std::vector<Segment>& out) const {
  std::size_t consumed = 0;
  for (auto match = matcher.find(text, 0); match; match = matcher.find(text, match->end)) {
    const AddedToken& token = tokens_[match->token];
    std::size_t start = match->start, stop = match->end;
    if (token.single_word && !stands_alone(text, start, stop)) continue;
    if (token.lstrip) start = std::max(whitespace_run_start(text, start), consumed);
    if (token.rstrip) stop = whitespace_run_end(text, stop);
    if (consumed < start) out.push_back({consumed, start, -1});
    out.push_back({start, stop, token.id});
    consumed = stop;
  }
  if (consumed < text.size() || text.empty()) out.push_back({consumed, text.size(), -1});
}

std::optional<int32_t> AddedVocabulary::token_to_id(std::string_view token) const {
  const auto it = by_content_.find(std::string(token));
  if (it == by_content_.end()) return std::nullopt;
  return tokens_[it->second].id;
}

const std::string* AddedVocabulary::id_to_token(int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second].surface;
}

}  // namespace studio::data::detail
