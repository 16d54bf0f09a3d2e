#include "pre_tokenizers.h"

#include <vector>

#include "byte_level.h"
#include "unicode.h"

namespace studio::data::detail {

namespace {

// GPT-2's word pattern, which ByteLevel applies when use_regex is set.
const Regex& gpt2_words() {
  static const Regex regex(
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
      Regex::Syntax::Oniguruma);
  return regex;
}

void split_by_regex(const Regex& regex, PieceView piece, SplitBehavior behavior, bool invert,
                    const PieceSink& sink) {
  std::vector<Span> matches;
  regex.find_all(piece.text, matches);
  split_piece(piece, cuts_from_matches(piece.text.size(), matches), behavior, invert, sink);
}

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {}

  void pre_tokenize(PieceView piece, const PieceSink& sink) const override {
    if (piece.text.empty()) return;
    std::string spaced;
    if (add_prefix_space_ && piece.text.front() != ' ') {
      spaced = " " + std::string(piece.text);
      piece.text = spaced;
    }
    std::string encoded;  // one buffer for every word of the piece
    auto encode = [&](PieceView word) {
      encoded.clear();
      byte_level_encode(word.text, encoded);
      sink({encoded, word.at_origin});
    };
    if (use_regex_) {
      split_by_regex(gpt2_words(), piece, SplitBehavior::Isolated, false, encode);
    } else {
      encode(piece);
    }
  }

 private:
  bool add_prefix_space_, use_regex_;
};

class Split final : public PreTokenizer {
 public:
  Split(std::unique_ptr<Regex> pattern, SplitBehavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}

  void pre_tokenize(PieceView piece, const PieceSink& sink) const override {
    split_by_regex(*pattern_, piece, behavior_, invert_, sink);
  }

 private:
  std::unique_ptr<Regex> pattern_;
  SplitBehavior behavior_;
  bool invert_;
};

// One cut per character the predicate holds for, the runs between them as gaps (HF's
// find_matches for a char predicate).
template <typename Predicate>
std::vector<Cut> character_cuts(std::string_view text, Predicate matches) {
  if (text.empty()) return {{0, 0, false}};
  std::vector<Cut> cuts;
  std::size_t gap_start = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t start = pos;
    if (!matches(next_code_point(text, pos))) continue;
    if (gap_start < start) cuts.push_back({gap_start, start, false});
    cuts.push_back({start, pos, true});
    gap_start = pos;
  }
  if (gap_start < text.size()) cuts.push_back({gap_start, text.size(), false});
  return cuts;
}

class Digits final : public PreTokenizer {
 public:
  explicit Digits(bool individual) : individual_(individual) {}
  void pre_tokenize(PieceView piece, const PieceSink& sink) const override {
    split_piece(piece, character_cuts(piece.text, is_numeric),
                individual_ ? SplitBehavior::Isolated : SplitBehavior::Contiguous, false, sink);
  }

 private:
  bool individual_;
};

// SentencePiece's word marking: spaces become the replacement character, one is prepended to
// (the first) piece, and with `split` every replacement starts a new piece.
class Metaspace final : public PreTokenizer {
 public:
  Metaspace(char32_t replacement, PrependScheme scheme, bool split)
      : replacement_(replacement), scheme_(scheme), split_(split) {
    append_utf8(replacement_utf8_, replacement);
  }

  void pre_tokenize(PieceView piece, const PieceSink& sink) const override {
    std::string text;
    text.reserve(piece.text.size() + replacement_utf8_.size());
    for (const char c : piece.text) {
      if (c == ' ') {
        text += replacement_utf8_;
      } else {
        text += c;
      }
    }
    const bool starts_marked = text.compare(0, replacement_utf8_.size(), replacement_utf8_) == 0;
    const bool prepend =
        scheme_ == PrependScheme::Always || (scheme_ == PrependScheme::First && piece.at_origin);
    if (prepend && !starts_marked) text.insert(0, replacement_utf8_);
    const PieceView marked{text, piece.at_origin};
    if (!split_) {
      sink(marked);
      return;
    }
    const char32_t r = replacement_;
    split_piece(marked, character_cuts(text, [r](char32_t c) { return c == r; }),
                SplitBehavior::MergedWithNext, false, sink);
  }

 private:
  char32_t replacement_;
  std::string replacement_utf8_;
  PrependScheme scheme_;
  bool split_;
};

// Each step's pieces go straight on to the next step: HF runs a step over all pieces before the
// next, but every step treats pieces independently, so the result is the same.
class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}

  void pre_tokenize(PieceView piece, const PieceSink& sink) const override { run(0, piece, sink); }

 private:
  void run(std::size_t step, PieceView piece, const PieceSink& sink) const {
    if (step == steps_.size()) {
      sink(piece);
      return;
    }
    auto next = [&](PieceView p) { run(step + 1, p, sink); };
    steps_[step]->pre_tokenize(piece, next);
  }

  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

std::unique_ptr<PreTokenizer> sequence_from_json(const JsonNode& list) {
  list.require_array();
  std::vector<std::unique_ptr<PreTokenizer>> steps;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (auto step = pre_tokenizer_from_json(list[i])) steps.push_back(std::move(step));
  }
  return std::make_unique<Sequence>(std::move(steps));
}

}  // namespace

std::unique_ptr<PreTokenizer> pre_tokenizer_from_json(const JsonNode& node) {
  if (node.is_null()) return nullptr;
  const std::string type = node.type({"ByteLevel", "Split", "Sequence", "Metaspace", "Digits"});
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevel>(node["add_prefix_space"].boolean_or(true),
                                       node["use_regex"].boolean_or(true));
  }
  if (type == "Split") {
    return std::make_unique<Split>(pattern_from_json(node["pattern"]),
                                   split_behavior_from_json(node["behavior"]),
                                   node["invert"].boolean_or(false));
  }
  if (type == "Sequence") return sequence_from_json(node["pretokenizers"]);
  if (type == "Metaspace") {
    const JsonNode replacement =
        node["replacement"].is_null() ? node["str_rep"] : node["replacement"];
    return std::make_unique<Metaspace>(replacement.is_null() ? U'\u2581' : replacement.character(),
                                       prepend_scheme_from_json(node),
                                       node["split"].boolean_or(true));
  }
  return std::make_unique<Digits>(node["individual_digits"].boolean_or(false));
}

}  // namespace studio::data::detail
