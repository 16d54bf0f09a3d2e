#include "bpe.h"

#include <algorithm>
#include <cstdio>
#include <functional>

#include "studio/data/tokenizer.h"
#include "unicode.h"

namespace studio::data::detail {

namespace {

constexpr std::size_t kMaxCachedWordBytes = 256;
constexpr std::string_view kWordMark = "\xE2\x96\x81";  // U+2581, SentencePiece's "▁"

// Whether the word mark at `at` directly follows another one.
bool follows_mark(std::string_view text, std::size_t at) {
  return at >= kWordMark.size() &&
         text.substr(at - kWordMark.size(), kWordMark.size()) == kWordMark;
}

struct Symbol {
  int32_t id;
  int32_t prev, next;  // neighbours still alive, -1 at the ends
  bool alive;
};

// A pair that may merge: its rank, the position of its left symbol and the merged id.
struct Candidate {
  uint32_t rank;
  int32_t pos;
  int32_t id;
};

// std's heap functions build a max-heap; "later" puts the lowest rank, then the leftmost, on top.
bool later(const Candidate& a, const Candidate& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
}

// Reused across words so that merging allocates nothing once warm.
struct Scratch {
  std::vector<int32_t> ids;
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
};

Scratch& scratch() {
  thread_local Scratch instance;
  return instance;
}

std::string byte_token(int byte) {
  char text[8];
  std::snprintf(text, sizeof text, "<0x%02X>", byte);
  return text;
}

}  // namespace

bool WordCache::find(std::string_view word, std::size_t hash, std::vector<int32_t>& out) const {
  Shard& shard = shards_[(hash >> 32) % kShards];
  std::lock_guard<std::mutex> lock(shard.mutex);
  const auto it = shard.words.find(hash);
  if (it == shard.words.end() || it->second.word != word) return false;
  out.insert(out.end(), it->second.ids.begin(), it->second.ids.end());
  return true;
}

void WordCache::insert(std::string_view word, std::size_t hash, const int32_t* ids,
                       std::size_t count) const {
  Shard& shard = shards_[(hash >> 32) % kShards];
  std::lock_guard<std::mutex> lock(shard.mutex);
  if (shard.words.size() >= kShardCapacity) shard.words.clear();
  shard.words[hash] = Entry{std::string(word), std::vector<int32_t>(ids, ids + count)};
}

std::unique_ptr<BpeModel> BpeModel::from_json(const JsonNode& model) {
  model.require_object();
  if (model.has("type")) model.type({"BPE"});
  const JsonNode dropout = model["dropout"];
  if (!dropout.is_null() && !(dropout.raw().is_number() && dropout.raw().get<double>() == 0.0)) {
    dropout.fail("'" + dropout.raw().dump() +
                 "' is not supported: BPE dropout samples a different "
                 "tokenization on every call; set it to null");
  }
  std::unique_ptr<BpeModel> bpe(new BpeModel);
  bpe->file_ = model.file();
  bpe->prefix_ = model["continuing_subword_prefix"].string_or("");
  bpe->suffix_ = model["end_of_word_suffix"].string_or("");
  bpe->fuse_unk_ = model["fuse_unk"].boolean_or(false);
  bpe->byte_fallback_ = model["byte_fallback"].boolean_or(false);
  bpe->ignore_merges_ = model["ignore_merges"].boolean_or(false);
  if (!model["unk_token"].is_null()) bpe->unk_token_ = model["unk_token"].string();
  bpe->load_vocab(model["vocab"]);
  bpe->load_merges(model["merges"]);
  if (bpe->unk_token_) bpe->unk_id_ = bpe->token_to_id(*bpe->unk_token_);
  for (int byte = 0; byte < 256; ++byte) {
    bpe->byte_ids_[byte] = bpe->token_to_id(byte_token(byte)).value_or(-1);
  }
  bpe->split_at_word_marks_ = bpe->word_marks_are_boundaries();
  return bpe;
}

void BpeModel::load_vocab(const JsonNode& vocab) {
  vocab.require_object();
  vocab_.reserve(vocab.size());
  for (const auto& [token, id_value] : vocab.raw().items()) {
    int32_t id = 0;
    if (!id_value.is_number_integer() || !json_whole(id_value, id, {0, INT32_MAX}).empty())
      vocab[token.c_str()].fail("expected a token id (a non-negative integer), got " +
                                id_value.dump());
    const std::string& stored = storage_.emplace_back(token);
    vocab_.emplace(stored, id);
    if (static_cast<std::size_t>(id) >= tokens_by_id_.size()) tokens_by_id_.resize(id + 1, nullptr);
    if (tokens_by_id_[id] == nullptr) tokens_by_id_[id] = &stored;
  }
}

// Merges come as "left right" strings (split at the first space) or as [left, right] pairs; a
// pair listed twice keeps its last rank, as HF's map does.
void BpeModel::load_merges(const JsonNode& merges) {
  merges.require_array();
  merges_.reserve(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const JsonNode merge = merges[rank];
    std::string left, right;
    if (merge.raw().is_string()) {
      const std::string text = merge.string();
      const std::size_t space = text.find(' ');
      if (space == std::string::npos)
        merge.fail("'" + text + "' is not a merge: expected \"left right\"");
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else {
      if (!merge.raw().is_array() || merge.size() != 2)
        merge.fail("expected \"left right\" or [left, right]");
      left = merge[std::size_t{0}].string();
      right = merge[std::size_t{1}].string();
    }
    const auto left_id = token_to_id(left), right_id = token_to_id(right);
    if (!left_id || !right_id)
      merge.fail("token '" + (left_id ? right : left) + "' is not in the vocabulary");
    if (right.size() < prefix_.size())
      merge.fail("'" + right + "' is shorter than continuing_subword_prefix");
    const std::string merged = left + right.substr(prefix_.size());
    const auto merged_id = token_to_id(merged);
    if (!merged_id) merge.fail("the merged token '" + merged + "' is not in the vocabulary");
    merges_[pair_key(*left_id, *right_id)] = {static_cast<uint32_t>(rank), *merged_id};
  }
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= tokens_by_id_.size()) return nullptr;
  return tokens_by_id_[id];
}

// The mark must be a token (so that it ends any pending <unk> in either case), and affixes or
// ignore_merges, which look at whole words, must be off.
bool BpeModel::word_marks_are_boundaries() const {
  if (ignore_merges_ || !prefix_.empty() || !suffix_.empty() || !token_to_id(kWordMark))
    return false;
  for (const auto& [token, id] : vocab_) {
    for (std::size_t at = token.find(kWordMark, 1); at != std::string_view::npos;
         at = token.find(kWordMark, at + 1)) {
      if (!follows_mark(token, at)) return false;
    }
  }
  return true;
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (!split_at_word_marks_) {
    tokenize_word(word, out);
    return;
  }
  std::size_t start = 0;
  for (std::size_t at = word.find(kWordMark, 1); at != std::string_view::npos;
       at = word.find(kWordMark, at + 1)) {
    if (follows_mark(word, at)) continue;  // a run of marks stays together
    tokenize_word(word.substr(start, at - start), out);
    start = at;
  }
  tokenize_word(word.substr(start), out);
}

void BpeModel::tokenize_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  // ignore_merges (LLaMA-3): a word that is itself a token is emitted whole, whatever the merges
  // would have made of it.
  if (ignore_merges_) {
    if (const auto id = token_to_id(word)) {
      out.push_back(*id);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  const std::size_t hash = cacheable ? std::hash<std::string_view>{}(word) : 0;
  if (cacheable && cache_.find(word, hash, out)) return;
  const std::size_t first = out.size();
  merge_word(word, out);
  if (cacheable) cache_.insert(word, hash, out.data() + first, out.size() - first);
}

int32_t BpeModel::unk_id_for(std::string_view character) const {
  if (!unk_id_) {
    throw TokenizerError(file_ + ": model.unk_token '" + *unk_token_ +
                         "' is not in the vocabulary, "
                         "and '" +
                         std::string(character) + "' has no token");
  }
  return *unk_id_;
}

// All bytes of `text` as <0xNN> tokens, or nothing when one of them has no such token.
bool BpeModel::push_bytes(std::string_view text, std::vector<int32_t>& ids) const {
  for (const char c : text) {
    if (byte_ids_[static_cast<unsigned char>(c)] < 0) return false;
  }
  for (const char c : text) ids.push_back(byte_ids_[static_cast<unsigned char>(c)]);
  return true;
}

// One id per character. A character missing from the vocabulary becomes its byte tokens, else
// <unk> (consecutive ones fused into one with fuse_unk), else nothing. Like HF, a pending <unk>
// is written only when the next known character or the end arrives, so byte tokens that follow
// it come out before it.
void BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>& ids) const {
  const bool affixes = !prefix_.empty() || !suffix_.empty();
  std::string key;
  bool unk_pending = false;
  int32_t unk = -1;
  for (std::size_t pos = 0; pos < word.size();) {
    const std::size_t start = pos;
    pos += utf8_length(static_cast<unsigned char>(word[pos]));
    std::string_view character = word.substr(start, pos - start);
    if (affixes) {
      key.assign(start > 0 ? prefix_ : std::string());
      key.append(character);
      if (pos == word.size()) key += suffix_;
      character = key;
    }
    if (const auto id = token_to_id(character)) {
      if (unk_pending) ids.push_back(unk);
      unk_pending = false;
      ids.push_back(*id);
      continue;
    }
    if (byte_fallback_ && push_bytes(character, ids)) continue;
    if (!unk_token_) continue;
    if (unk_pending && fuse_unk_) continue;
    if (unk_pending) ids.push_back(unk);
    unk = unk_id_for(character);
    unk_pending = true;
  }
  if (unk_pending) ids.push_back(unk);
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  Scratch& s = scratch();
  s.ids.clear();
  initial_symbols(word, s.ids);
  const auto count = static_cast<int32_t>(s.ids.size());
  if (count == 0) return;
  std::vector<Symbol>& symbols = s.symbols;
  symbols.resize(count);
  for (int32_t i = 0; i < count; ++i)
    symbols[i] = {s.ids[i], i - 1, i + 1 < count ? i + 1 : -1, true};

  std::vector<Candidate>& heap = s.heap;
  heap.clear();
  const auto consider = [&](int32_t left) {
    const int32_t right = symbols[left].next;
    if (right < 0) return;
    const auto it = merges_.find(pair_key(symbols[left].id, symbols[right].id));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, left, it->second.id});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int32_t i = 0; i + 1 < count; ++i) consider(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    // Queue entries go stale when a neighbour merged first; HF checks the merged id only.
    const auto it = merges_.find(pair_key(left.id, right.id));
    if (it == merges_.end() || it->second.id != top.id) continue;
    left.id = top.id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace studio::data::detail
