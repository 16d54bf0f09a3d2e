#pragma once
// tokenizer.json "added_tokens": strings cut out of the input before anything else runs and
// mapped straight to their ids. Tokens with normalized == false are found in the raw input;
// the others are found, in their normalized form, in the normalized text between those.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "json_node.h"

namespace studio::data::detail {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool single_word = false;  // only where no word character is on either side
  bool lstrip = false;       // swallows the whitespace before it
  bool rstrip = false;       // swallows the whitespace after it
  bool normalized = true;    // matched after normalization
  // What HF shows for the id (id_to_token, decode): the normalized form of a normalized token.
  std::string surface;
};

// A stretch of text: an added token's id, or -1 for text that still needs encoding.
struct Segment {
  std::size_t start, end;
  int32_t id;
};

class AddedVocabulary {
 public:
  using ModelLookup = std::function<std::optional<int32_t>(std::string_view)>;
  using NormalizeText = std::function<std::string(const std::string&)>;

  // Ids as HF assigns them: a token the model (or an earlier added token) already has keeps that
  // id, the others get model_size, model_size + 1, ... in file order; the "id" fields are not used.
  void load(const JsonNode& list, const ModelLookup& model, std::size_t model_size,
            const NormalizeText& normalize);

  // Cuts `text` at the raw (resp. normalized) added tokens; segments cover `text` in order.
  void split_raw(std::string_view text, std::vector<Segment>& out) const;
  void split_normalized(std::string_view text, std::vector<Segment>& out) const;
  bool has_normalized_tokens() const { return !normalized_.empty(); }

  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(int32_t id) const;  // the surface form
  bool is_special(int32_t id) const { return special_ids_.count(id) > 0; }
  // decode(skip_special_tokens) drops a token whose text is a special token's content; like HF,
  // a normalized special token whose surface differs ("▁</s>") is kept.
  bool is_special_text(const std::string& token) const {
    return special_contents_.count(token) > 0;
  }
  std::size_t new_tokens() const { return new_tokens_; }

  // Longest-first matching over a byte trie (HF: Aho-Corasick, leftmost-longest).
  class Matcher {
   public:
    void add(std::string_view pattern, std::size_t token);
    bool empty() const { return nodes_.size() <= 1; }
    struct Match {
      std::size_t start, end, token;
    };
    // The first position at or after `from` where a pattern starts, with its longest pattern.
    std::optional<Match> find(std::string_view text, std::size_t from) const;

   private:
    std::optional<Match> longest_at(std::string_view text, std::size_t pos) const;
    struct Node {
      std::vector<std::pair<unsigned char, int32_t>> children;
      int64_t token = -1;
    };
    std::vector<Node> nodes_{Node{}};
    bool first_byte_[256] = {};
  };

 private:
  void split(const Matcher& matcher, std::string_view text, std::vector<Segment>& out) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<std::string, std::size_t> by_content_;
  std::unordered_map<int32_t, std::size_t> by_id_;
  std::unordered_set<int32_t> special_ids_;
  std::unordered_set<std::string> special_contents_;
  Matcher raw_, normalized_;
  std::size_t new_tokens_ = 0;
};

}  // namespace studio::data::detail
