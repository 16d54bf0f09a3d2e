#pragma once
// tokenizer.json "model" of type BPE: a word becomes its characters' ids (or <0xNN> byte tokens,
// or <unk>), then the adjacent pair with the lowest merge rank is merged, leftmost first, until no
// pair has a merge. Results for recent words are cached.
#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "json_node.h"

namespace studio::data::detail {

// Bounded and sharded by hash, so encoding threads rarely wait on each other. Entries are keyed
// by the word's hash and hold the word, so a lookup builds no string; a colliding word simply
// replaces the entry. A full shard is emptied: frequent words return quickly.
class WordCache {
 public:
  bool find(std::string_view word, std::size_t hash, std::vector<int32_t>& out) const;
  void insert(std::string_view word, std::size_t hash, const int32_t* ids, std::size_t count) const;

 private:
  static constexpr std::size_t kShards = 16;
  static constexpr std::size_t kShardCapacity = 8192;
  struct Entry {
    std::string word;
    std::vector<int32_t> ids;
  };
  struct Shard {
    std::mutex mutex;
    std::unordered_map<std::size_t, Entry> words;
  };
  mutable std::array<Shard, kShards> shards_;
};

class BpeModel {
 public:
  // Refuses dropout (random by design), unknown fields' bad types, and merges whose tokens or
  // result are missing from the vocabulary.
  static std::unique_ptr<BpeModel> from_json(const JsonNode& model);

  // Appends the ids of one pre-tokenized word.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(int32_t id) const;  // nullptr for an unknown id
  std::size_t size() const { return vocab_.size(); }

 private:
  struct Merge {
    uint32_t rank;
    int32_t id;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  void load_vocab(const JsonNode& vocab);
  void load_merges(const JsonNode& merges);
  void tokenize_word(std::string_view word, std::vector<int32_t>& out) const;
  bool word_marks_are_boundaries() const;
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  void initial_symbols(std::string_view word, std::vector<int32_t>& ids) const;
  bool push_bytes(std::string_view text, std::vector<int32_t>& ids) const;
  int32_t unk_id_for(std::string_view character) const;

  std::deque<std::string> storage_;  // the token texts; a deque keeps the views below valid
  std::unordered_map<std::string_view, int32_t> vocab_;
  std::vector<const std::string*> tokens_by_id_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::array<int32_t, 256> byte_ids_{};  // id of "<0xNN>", -1 when absent
  std::string file_;
  std::optional<std::string> unk_token_;
  std::optional<int32_t> unk_id_;
  std::string prefix_, suffix_;  // continuing_subword_prefix, end_of_word_suffix
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;
  // SentencePiece vocabularies without a pre-tokenizer hand whole texts to the model. When no
  // token has "▁" after another character, no merge can cross a word start, so each "▁word" is
  // merged (and cached) on its own with the same result.
  bool split_at_word_marks_ = false;
  WordCache cache_;
};

}  // namespace studio::data::detail
