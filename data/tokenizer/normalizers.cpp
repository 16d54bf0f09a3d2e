#include "normalizers.h"

#include <vector>

#include "unicode.h"

namespace studio::data::detail {

namespace {

class UnicodeForm final : public Normalizer {
 public:
  explicit UnicodeForm(NormalForm form) : form_(form) {}
  void normalize(Piece& piece) const override { normalize_unicode(piece.text, form_); }

 private:
  NormalForm form_;
};

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void normalize(Piece& piece) const override {
    for (const auto& step : steps_) step->normalize(piece);
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

// HF prepends only to non-empty text.
class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(Piece& piece) const override {
    if (!piece.text.empty()) piece.text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class Replace final : public Normalizer {
 public:
  Replace(std::unique_ptr<Regex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(Piece& piece) const override {
    std::vector<Span> matches;
    pattern_->find_all(piece.text, matches);
    if (matches.empty()) return;
    std::string out;
    out.reserve(piece.text.size() + matches.size() * content_.size());
    std::size_t copied = 0;
    for (const Span& m : matches) {
      out.append(piece.text, copied, m.first - copied);
      out += content_;
      copied = m.second;
    }
    out.append(piece.text, copied, std::string::npos);
    // Deleting the first characters leaves a piece that starts later in the input.
    if (content_.empty() && matches.front().first == 0 && matches.front().second > 0) {
      piece.at_origin = false;
    }
    piece.text = std::move(out);
  }

 private:
  std::unique_ptr<Regex> pattern_;
  std::string content_;
};

// Trims White_Space characters (Rust's trim_start/trim_end).
class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(Piece& piece) const override {
    std::string& text = piece.text;
    std::size_t begin = 0;
    while (left_ && begin < text.size()) {
      std::size_t next = begin;
      if (!is_white_space(next_code_point(text, next))) break;
      begin = next;
    }
    std::size_t end = text.size();
    if (right_) {
      end = begin;  // just past the last character that is not White_Space
      for (std::size_t pos = begin; pos < text.size();) {
        if (!is_white_space(next_code_point(text, pos))) end = pos;
      }
    }
    if (begin > 0) piece.at_origin = false;
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class Lowercase final : public Normalizer {
 public:
  void normalize(Piece& piece) const override {
    std::string out;
    out.reserve(piece.text.size());
    for (std::size_t pos = 0; pos < piece.text.size();) {
      append_lowercase(out, next_code_point(piece.text, pos));
    }
    piece.text = std::move(out);
  }
};

std::vector<std::unique_ptr<Normalizer>> steps_from_json(const JsonNode& list) {
  list.require_array();
  std::vector<std::unique_ptr<Normalizer>> steps;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (auto step = normalizer_from_json(list[i])) steps.push_back(std::move(step));
  }
  return steps;
}

}  // namespace

std::unique_ptr<Normalizer> normalizer_from_json(const JsonNode& node) {
  if (node.is_null()) return nullptr;
  const std::string type = node.type(
      {"NFC", "NFD", "NFKC", "NFKD", "Sequence", "Prepend", "Replace", "Strip", "Lowercase"});
  if (type == "NFC") return std::make_unique<UnicodeForm>(NormalForm::NFC);
  if (type == "NFD") return std::make_unique<UnicodeForm>(NormalForm::NFD);
  if (type == "NFKC") return std::make_unique<UnicodeForm>(NormalForm::NFKC);
  if (type == "NFKD") return std::make_unique<UnicodeForm>(NormalForm::NFKD);
  if (type == "Sequence") return std::make_unique<Sequence>(steps_from_json(node["normalizers"]));
  if (type == "Prepend") return std::make_unique<Prepend>(node["prepend"].string());
  if (type == "Replace") {
    return std::make_unique<Replace>(pattern_from_json(node["pattern"]), node["content"].string());
  }
  if (type == "Strip") {
    return std::make_unique<Strip>(node["strip_left"].boolean_or(true),
                                   node["strip_right"].boolean_or(true));
  }
  return std::make_unique<Lowercase>();
}

}  // namespace studio::data::detail
