#pragma once
// A Hugging Face tokenizer loaded from tokenizer.json, producing the ids HF `tokenizers` produces.
//
// Supported (anything else is refused at load with the file and the JSON path of the component):
//   model           BPE (vocab, merges in "a b" or [a, b] form, ignore_merges, byte_fallback,
//                   unk_token, fuse_unk, continuing_subword_prefix, end_of_word_suffix; dropout
//                   must be null or 0)
//   normalizer      NFC, NFD, NFKC, NFKD, Sequence, Prepend, Replace, Strip, Lowercase
//   pre_tokenizer   ByteLevel, Split, Sequence, Metaspace, Digits
//   post_processor  TemplateProcessing, ByteLevel, Sequence
//   decoder         ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, Sequence
//   added_tokens    special or not, single_word, lstrip, rstrip, normalized
// Regular expressions in the file are Oniguruma patterns (what HF compiles them with); they run
// on PCRE2 with \s, \w, \h and script names translated to Oniguruma's meaning. PCRE2 10.42 knows
// Unicode 14: characters assigned since (a few rare scripts) may be split differently.
// "truncation" and "padding" are ignored: callers cut sequences themselves, as transformers does.
//
// Like HF: added tokens are matched before normalization (longest first), ids of added tokens
// missing from the model vocabulary are assigned after it in file order (the ids written in
// tokenizer.json are not trusted), a normalized added token decodes to its normalized form,
// decode() skips ids it does not know, and invalid UTF-8 input is read with U+FFFD for each
// maximal invalid subsequence (Python's errors="replace", Rust's from_utf8_lossy).
//
// A Tokenizer is immutable once loaded: copies share it, and encode/decode may run on any number
// of threads at once.
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace studio::data {

// A tokenizer file that cannot be read, parsed or supported; the message names the file and,
// where one is at fault, the JSON path of the value (e.g. "model.merges[17]").
class TokenizerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Tokenizer {
 public:
  // `path` is a tokenizer.json file or a model folder holding one. tokenizer_config.json next to
  // it, when present, gives the bos/eos/pad tokens and the add_bos_token/add_eos_token flags.
  static Tokenizer load(const std::string& path);

  // The same from file contents; `origin` names the tokenizer.json in error messages.
  // `tokenizer_config_json` may be empty.
  static Tokenizer from_json(std::string_view tokenizer_json, const std::string& origin,
                             std::string_view tokenizer_config_json = {});

  // add_special_tokens applies the post-processor (e.g. a BOS in front, as LLaMA does). When
  // tokenizer_config.json sets add_bos_token or add_eos_token, those flags decide instead, as
  // transformers' LlamaTokenizerFast does.
  std::vector<int32_t> encode(std::string_view utf8, bool add_special_tokens = false) const;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int32_t id) const;  // HF's id_to_token, surface form
  // Distinct ids: the model vocabulary plus the added tokens it lacks (HF get_vocab_size(true)).
  std::size_t vocab_size() const;
  bool is_special(int32_t id) const;

  // From tokenizer_config.json; empty when it is missing or names no such token.
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> pad_id() const;
  // tokenizer_config.json's add_bos_token (false when it does not set it, or names no bos token):
  // transformers' `tokenizer.add_bos_token`, which LLaMA-Factory's pre-training data reads.
  bool add_bos_token() const;

  // The tokenizer.json this was loaded from (the `origin` of from_json).
  const std::string& source() const;

  struct Impl;  // opaque; public so that the loader's helpers can fill it

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

}  // namespace studio::data
