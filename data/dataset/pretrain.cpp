// Stage pt: plain texts as LLaMA-Factory's PretrainDatasetProcessor (data/processor/pretrain.py)
// turns them into training sequences, and load_pt_data.
#include "pretrain.h"

#include <algorithm>
#include <optional>

#include "loader.h"
#include "map_batches.h"
#include "split.h"
#include "studio/data/chat_template.h"

namespace studio::data {
namespace detail {

// LF's DataArguments.__post_init__ takes one off cutoff_len when the file sets packing (or
// neat_packing), as for sft; pt's default packing is switched on later, by LF's argument parser,
// and keeps cutoff_len whole.
int64_t pt_block_len(const RunConfig& cfg) {
  return cfg.packing || cfg.neat_packing ? cfg.cutoff_len - 1 : cfg.cutoff_len;
}

namespace {

// LF ends every text with "<|end_of_text|>" for template llama3, else with the tokenizer's eos
// as get_template_and_fix_tokenizer leaves it: a replace_eos template's first stop word, the
// tokenizer's own eos, or <|endoftext|> when it has none. The text is tokenized with it, so the
// eos must be a token that encodes whole (LF would add a missing one as a new token, which a
// model whose embeddings are not resized cannot learn).
std::string eos_text(const RunConfig& cfg, const Tokenizer& tok) {
  if (cfg.template_name == "llama3") return "<|end_of_text|>";
  if (!cfg.template_name.empty()) {
    const ChatTemplate& t = find_template(cfg.template_name);
    if (t.replace_eos && !t.stop_words.empty()) {
      const std::string& word = t.stop_words.front();
      const auto id = tok.token_to_id(word);
      if (!id || tok.encode(word, false) != std::vector<int32_t>{*id})
        throw TemplateError("template '" + t.name + "' makes " + word +
                            " the eos token that ends "
                            "every pt text, and " +
                            tok.source() +
                            " does not have it as a "
                            "special token (use the model's own tokenizer, or leave `template` "
                            "out to end texts with the tokenizer's eos)");
      return word;
    }
  }
  if (const auto id = tok.eos_id()) return *tok.id_to_token(*id);
  if (tok.token_to_id("<|endoftext|>")) return "<|endoftext|>";
  throw TemplateError("stage pt ends every text with the eos token: " + tok.source() +
                      " has none (no eos_token in tokenizer_config.json, no <|endoftext|>)");
}

// Each row's text + eos, tokenized without special tokens; unpacked texts get the bos text in
// front when the tokenizer adds one and are cut to cutoff_len (LF: truncation=True).
TextEncoding text_encoding(const RunConfig& cfg, const Tokenizer& tok) {
  TextEncoding t;
  t.tokenizer = &tok;
  t.suffix = eos_text(cfg, tok);
  if (!cfg.pt_packs()) {
    if (tok.add_bos_token()) t.prefix = *tok.id_to_token(*tok.bos_id());
    t.truncate_to = cfg.cutoff_len;
  }
  return t;
}

struct Text {
  TokenizedSample* sample;
  PtOrigin origin;
};

// The texts of `parts` in order, their datasets numbered from `first_dataset`.
std::vector<Text> texts_of(std::vector<NamedPart<TokenizedSample>>& parts,
                           std::size_t first_dataset) {
  std::vector<Text> out;
  for (std::size_t d = 0; d < parts.size(); ++d) {
    Part<TokenizedSample>& part = parts[d].part;
    for (std::size_t i = 0; i < part.samples.size(); ++i)
      out.push_back({&part.samples[i],
                     {first_dataset + d, part.origins[i].row, part.origins[i].full_length}});
  }
  return out;
}

struct Blocks {
  std::vector<TokenizedSample> samples;
  std::vector<PtOrigin> origins;
};

// One batch of LF's batched map: the texts' tokens concatenated and cut into blocks of block_len,
// the remainder dropped; with a bos, it overwrites each block's first token. The texts' tokens
// are released as they are used.
void pack_batch(const std::vector<Text>& texts, std::size_t begin, std::size_t end,
                int64_t block_len, const std::optional<int32_t>& bos, Blocks& out) {
  TokenizedSample block;
  PtOrigin origin;
  for (std::size_t i = begin; i < end; ++i) {
    for (int64_t id : texts[i].sample->input_ids) {
      if (block.input_ids.empty()) {
        origin = texts[i].origin;
        origin.full_length = block_len;
        block.input_ids.reserve(static_cast<std::size_t>(block_len));
      }
      block.input_ids.push_back(id);
      if (static_cast<int64_t>(block.input_ids.size()) < block_len) continue;
      if (bos) block.input_ids.front() = *bos;
      block.labels = block.input_ids;
      out.samples.push_back(std::move(block));
      out.origins.push_back(origin);
      block = {};
    }
    *texts[i].sample = {};
  }
}

// Packed within each of LF's map batches (map_batches.h).
Blocks pack(const std::vector<Text>& texts, const RunConfig& cfg,
            const std::optional<int32_t>& bos) {
  Blocks out;
  for (const RowRange& b : map_batches(texts.size(), cfg))
    pack_batch(texts, b.begin, b.end, pt_block_len(cfg), bos, out);
  return out;
}

// Unpacked: each text is a sequence.
Blocks as_is(const std::vector<Text>& texts) {
  Blocks out;
  for (const Text& t : texts) {
    out.samples.push_back(std::move(*t.sample));
    out.origins.push_back(t.origin);
  }
  return out;
}

// LF trains pt with transformers' DataCollatorForLanguageModeling(mlm=False): the labels are the
// input ids with every occurrence of the pad token set to -100. LF's pad token is the
// tokenizer's, or else the eos Template.fix_special_tokens leaves: a replace_eos template's first
// stop word, the tokenizer's eos, or <|endoftext|>. Where that is the token ending each text (a
// Qwen2.5 base tokenizer, whose pad is its eos; any tokenizer without a pad token and no
// template), the end of each text is not learned; with template llama3 the texts end with
// <|end_of_text|> and the pad is <|eot_id|>.
std::optional<int32_t> collator_pad_id(const RunConfig& cfg, const Tokenizer& tok) {
  if (const auto pad = tok.pad_id()) return pad;
  if (!cfg.template_name.empty()) {
    const ChatTemplate& t = find_template(cfg.template_name);
    if (t.replace_eos && !t.stop_words.empty()) return tok.token_to_id(t.stop_words.front());
  }
  if (const auto eos = tok.eos_id()) return eos;
  return tok.token_to_id("<|endoftext|>");
}

void mask_pad(std::vector<TokenizedSample>& samples, const std::optional<int32_t>& pad) {
  if (!pad) return;
  for (TokenizedSample& s : samples)
    for (std::size_t i = 0; i < s.input_ids.size(); ++i)
      if (s.input_ids[i] == *pad) s.labels[i] = kIgnoreIndex;
}

void count(const std::vector<TokenizedSample>& samples, DataStats& stats) {
  for (const TokenizedSample& s : samples) {
    stats.tokens += static_cast<int64_t>(s.input_ids.size());
    for (int64_t l : s.labels) stats.learned_tokens += l != kIgnoreIndex;
  }
  stats.samples += static_cast<int64_t>(samples.size());
}

std::string too_few_tokens(const RunConfig& cfg, const std::vector<Text>& texts,
                           const DataStats& parts) {
  int64_t tokens = 0;
  for (const Text& t : texts) tokens += t.origin.full_length;
  std::string names;
  for (const auto& n : cfg.dataset) names += (names.empty() ? "" : ",") + n;
  std::string msg = "dataset '" + names + "' gave no training blocks: its " +
                    std::to_string(texts.size()) + " texts hold " + std::to_string(tokens) +
                    " tokens, and no batch of preprocessing_batch_size " +
                    std::to_string(cfg.preprocessing_batch_size) + " rows fills one block of " +
                    std::to_string(pt_block_len(cfg)) +
                    " tokens (LLaMA-Factory stops too: "
                    "\"Cannot find sufficient samples\"): lower cutoff_len, or add texts";
  if (parts.skipped_invalid + parts.skipped_bad_rows > 0 && !parts.warnings.empty())
    msg += "; rows were skipped, first: " + parts.warnings.front();
  return msg;
}

}  // namespace

PtSequences load_pt_sequences(const RunConfig& cfg, const Tokenizer& tokenizer,
                              const DatasetOptions& options) {
  if (cfg.pt_packs() && pt_block_len(cfg) < 1)
    throw DatasetError(
        "cutoff_len must be at least 2 with packing: true (LLaMA-Factory packs into "
        "blocks of cutoff_len - 1 tokens when the file sets packing)");
  const TextEncoding encoding = text_encoding(cfg, tokenizer);
  LoadedParts<TokenizedSample> parts = load_text_parts(cfg, tokenizer, options, encoding);

  PtSequences out;
  DataStats texts_stats;  // per text: skips, warnings, lengths, truncation
  texts_stats.lengths = LengthHistogram::for_cutoff(cfg.cutoff_len);
  for (auto* list : {&parts.train, &parts.eval})
    for (const auto& p : *list) {
      out.datasets.push_back(p.name);
      texts_stats.merge(p.part.stats);
    }
  const std::vector<Text> train_texts = texts_of(parts.train, 0);
  const std::vector<Text> eval_texts = texts_of(parts.eval, parts.train.size());
  const bool packs = cfg.pt_packs();
  std::optional<int32_t> bos;
  if (tokenizer.add_bos_token()) bos = tokenizer.bos_id();
  Blocks train = packs ? pack(train_texts, cfg, bos) : as_is(train_texts);
  Blocks eval = packs ? pack(eval_texts, cfg, bos) : as_is(eval_texts);
  const auto pad = collator_pad_id(cfg, tokenizer);
  mask_pad(train.samples, pad);
  mask_pad(eval.samples, pad);

  DataStats& st = out.stats;
  st.lengths = texts_stats.lengths;
  st.truncated =
      packs ? 0 : texts_stats.truncated;  // packing keeps every token of a batch's blocks
  st.skipped_bad_rows = texts_stats.skipped_bad_rows;
  st.skipped_invalid = texts_stats.skipped_invalid;
  st.warnings = texts_stats.warnings;
  st.datasets_from_cache = texts_stats.datasets_from_cache;
  count(train.samples, st);
  count(eval.samples, st);
  if (train.samples.empty())
    throw DatasetError(train_texts.empty() ? why_empty(cfg, texts_stats)
                                           : too_few_tokens(cfg, train_texts, texts_stats));
  out.train = std::move(train.samples);
  out.train_origins = std::move(train.origins);
  out.eval = std::move(eval.samples);
  return out;
}

}  // namespace detail

SftData load_pt_data(const RunConfig& cfg, const Tokenizer& tokenizer,
                     const DatasetOptions& options) {
  detail::require_stage(cfg, Stage::Pt, "load_pt_data");
  detail::check_split_settings(cfg);
  detail::PtSequences seq = detail::load_pt_sequences(cfg, tokenizer, options);
  SftData d;
  d.train = std::move(seq.train);
  d.eval = std::move(seq.eval);
  d.stats = std::move(seq.stats);
  detail::split_off_eval(cfg, d.train, d.eval);
  return d;
}

}  // namespace studio::data
