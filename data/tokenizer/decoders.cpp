#include "decoders.h"

#include "byte_level.h"
#include "pieces.h"
#include "unicode.h"

namespace studio::data::detail {

namespace {

std::string concatenated(const std::vector<std::string>& tokens) {
  std::string out;
  for (const std::string& token : tokens) out += token;
  return out;
}

// All tokens become one string of the bytes they stand for; a token with a character outside
// the byte alphabet (an added token) contributes its own UTF-8. Invalid UTF-8 from bytes cut
// mid-character becomes U+FFFD (from_utf8_lossy).
class ByteLevel final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& token : tokens) {
      if (!byte_level_decode(token, bytes)) bytes += token;
    }
    tokens.assign(1, to_valid_utf8(bytes));
  }
};

// Runs of <0xNN> tokens become the text they encode, or one U+FFFD per byte when that is not
// valid UTF-8.
class ByteFallback final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    const auto flush = [&] {
      if (bytes.empty()) return;
      if (is_valid_utf8(bytes)) {
        out.push_back(bytes);
      } else {
        out.insert(out.end(), bytes.size(), "\xEF\xBF\xBD");
      }
      bytes.clear();
    };
    for (std::string& token : tokens) {
      if (const int byte = byte_of(token); byte >= 0) {
        bytes += static_cast<char>(byte);
        continue;
      }
      flush();
      out.push_back(std::move(token));
    }
    flush();
    tokens = std::move(out);
  }

 private:
  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int byte_of(const std::string& token) {
    if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
    const int high = hex_digit(token[3]), low = hex_digit(token[4]);
    return high < 0 || low < 0 ? -1 : high * 16 + low;
  }
};

class Fuse final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    tokens.assign(1, concatenated(tokens));
  }
};

// Removes up to `start` leading and `stop` trailing copies of one character from each token.
class Strip final : public Decoder {
 public:
  Strip(char32_t content, std::size_t start, std::size_t stop) : start_(start), stop_(stop) {
    append_utf8(content_, content);
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) {
      std::size_t begin = 0, end = token.size();
      for (std::size_t i = 0; i < start_ && token.compare(begin, content_.size(), content_) == 0;
           ++i) {
        begin += content_.size();
      }
      for (std::size_t i = 0; i < stop_ && end >= begin + content_.size() &&
                              token.compare(end - content_.size(), content_.size(), content_) == 0;
           ++i) {
        end -= content_.size();
      }
      token = token.substr(begin, end - begin);
    }
  }

 private:
  std::string content_;
  std::size_t start_, stop_;
};

class Replace final : public Decoder {
 public:
  Replace(std::unique_ptr<Regex> pattern, std::string content)
      : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<Span> matches;
    for (std::string& token : tokens) {
      matches.clear();
      pattern_->find_all(token, matches);
      if (matches.empty()) continue;
      std::string out;
      std::size_t copied = 0;
      for (const Span& m : matches) {
        out.append(token, copied, m.first - copied);
        out += content_;
        copied = m.second;
      }
      out.append(token, copied, std::string::npos);
      token = std::move(out);
    }
  }

 private:
  std::unique_ptr<Regex> pattern_;
  std::string content_;
};

// The replacement character becomes a space, except in the first token, where HF drops every
// one of them (the prepended word mark) unless prepend_scheme is "never".
class Metaspace final : public Decoder {
 public:
  Metaspace(char32_t replacement, bool drop_in_first) : drop_in_first_(drop_in_first) {
    append_utf8(replacement_, replacement);
  }
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      const std::string_view substitute = i == 0 && drop_in_first_ ? "" : " ";
      std::string& token = tokens[i];
      for (std::size_t at = token.find(replacement_); at != std::string::npos;
           at = token.find(replacement_, at + substitute.size())) {
        token.replace(at, replacement_.size(), substitute);
      }
    }
  }

 private:
  std::string replacement_;
  bool drop_in_first_;
};

class Sequence final : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& step : steps_) step->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

std::size_t count(const JsonNode& node) {
  return node.is_null() ? 0 : static_cast<std::size_t>(node.integer({0, INT64_MAX}));
}

std::unique_ptr<Decoder> metaspace_from_json(const JsonNode& node) {
  const JsonNode replacement =
      node["replacement"].is_null() ? node["str_rep"] : node["replacement"];
  const bool prepends = prepend_scheme_from_json(node) != PrependScheme::Never;
  return std::make_unique<Metaspace>(replacement.is_null() ? U'\u2581' : replacement.character(),
                                     prepends);
}

}  // namespace

std::unique_ptr<Decoder> decoder_from_json(const JsonNode& node) {
  if (node.is_null()) return nullptr;
  const std::string type =
      node.type({"ByteLevel", "Metaspace", "ByteFallback", "Fuse", "Strip", "Replace", "Sequence"});
  if (type == "ByteLevel") return std::make_unique<ByteLevel>();
  if (type == "Metaspace") return metaspace_from_json(node);
  if (type == "ByteFallback") return std::make_unique<ByteFallback>();
  if (type == "Fuse") return std::make_unique<Fuse>();
  if (type == "Strip") {
    return std::make_unique<Strip>(node["content"].character(), count(node["start"]),
                                   count(node["stop"]));
  }
  if (type == "Replace") {
    return std::make_unique<Replace>(pattern_from_json(node["pattern"]), node["content"].string());
  }
  const JsonNode steps = node["decoders"];
  steps.require_array();
  std::vector<std::unique_ptr<Decoder>> decoders;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (auto step = decoder_from_json(steps[i])) decoders.push_back(std::move(step));
  }
  return std::make_unique<Sequence>(std::move(decoders));
}

}  // namespace studio::data::detail
