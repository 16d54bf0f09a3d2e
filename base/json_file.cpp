#include "studio/base/json_file.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "studio/base/atomic_file.h"

namespace studio {

namespace {

using json = nlohmann::json;

// A word of Python's for a non-finite float, at a place where the text had it.
struct PythonWord {
  std::size_t string_index;  // it reads as the string_index-th string literal of the text
  std::size_t offset;        // byte offset of the word in the text
  double value;
};

}  // namespace

bool json_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '+' || c == '-';
}

namespace {

// Finds Python's words outside string literals and writes into `copy` the text with each
// replaced by a string literal of the same length, noting which string literal each became.
// Returns false (and leaves `copy` alone) when there is none.
bool mark_python_words(std::string_view text, std::string& copy, std::vector<PythonWord>& words) {
  // The words start with N, I or -I: a text with neither capital has none (most lines).
  if (std::memchr(text.data(), 'N', text.size()) == nullptr &&
      std::memchr(text.data(), 'I', text.size()) == nullptr)
    return false;
  std::size_t strings = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      ++strings;
      for (++i; i < text.size() && text[i] != '"'; ++i)
        if (text[i] == '\\') ++i;
      continue;
    }
    if (c != 'N' && c != 'I' && c != '-') continue;
    if (i > 0 && json_word_char(text[i - 1])) continue;
    for (const PythonJsonWord& w : kPythonJsonWords) {
      if (text.substr(i, w.word.size()) != w.word) continue;
      const std::size_t end = i + w.word.size();
      if (end < text.size() && json_word_char(text[end])) continue;
      if (words.empty()) copy.assign(text);
      copy.replace(i, w.word.size(), w.stand_in);
      words.push_back({strings++, i, w.value});
      i = end - 1;
      break;
    }
  }
  return !words.empty();
}

// The token a parse error stopped at, as nlohmann's lexer kept it: a literal's text comes with
// what came before it since the last string (`"a": nul`); the part after that string and the
// last delimiter is the token. A string literal alone is kept whole.
std::string shown_token(const std::string& kept) {
  // The lexer shows control characters as <U+000A>: back to the one byte each was.
  std::string token;
  for (std::size_t i = 0; i < kept.size(); ++i) {
    if (kept.compare(i, 3, "<U+") == 0 && i + 7 < kept.size() && kept[i + 7] == '>' &&
        std::all_of(kept.begin() + static_cast<long>(i) + 3, kept.begin() + static_cast<long>(i) + 7,
                    [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; })) {
      token += static_cast<char>(std::strtol(kept.substr(i + 3, 4).c_str(), nullptr, 16));
      i += 7;
      continue;
    }
    token += kept[i];
  }
  std::size_t from = 0;
  if (!token.empty() && token.front() == '"') {
    std::size_t i = 1;
    while (i < token.size() && token[i] != '"') i += token[i] == '\\' ? 2 : 1;
    if (i + 1 >= token.size()) return token;  // the string itself (or an unclosed one)
    from = i + 1;
  }
  const auto cut = token.find_last_of(" \t\r\n:,[{", std::string::npos);
  return cut == std::string::npos || cut < from ? token.substr(from) : token.substr(cut + 1);
}

// nlohmann's DOM builder, taking the stand-ins of Python's words as the numbers they were, and
// keeping the position and words of a syntax error.
class PythonJsonSax : public nlohmann::detail::json_sax_dom_parser<json> {
  using Base = nlohmann::detail::json_sax_dom_parser<json>;

 public:
  PythonJsonSax(json& root, const std::vector<PythonWord>& words)
      : Base(root, /*allow_exceptions=*/false), words_(words) {}

  bool string(string_t& s) {
    if (const PythonWord* w = next_word()) return Base::number_float(w->value, s);
    return Base::string(s);
  }
  bool key(string_t& s) {
    if (const PythonWord* w = next_word()) {
      error_offset = w->offset;
      error_words = "found the word for a non-finite number where a key in double quotes should be";
      return false;
    }
    return Base::key(s);
  }
  bool parse_error(std::size_t position, const std::string& last_token,
                   const nlohmann::detail::exception& e) {
    // At the start of the token it stopped at (the position is where reading it ended).
    const std::size_t token = shown_token(last_token).size();
    error_offset = position >= token && token > 0 ? position - token : position > 0 ? position - 1 : 0;
    error_words = json_syntax_words(static_cast<const json::exception&>(e));
    return false;
  }

  std::optional<std::size_t> error_offset;
  std::string error_words;

 private:
  const PythonWord* next_word() {
    const std::size_t index = strings_++;
    if (next_ < words_.size() && words_[next_].string_index == index) return &words_[next_++];
    return nullptr;
  }

  const std::vector<PythonWord>& words_;
  std::size_t strings_ = 0;
  std::size_t next_ = 0;
};

void locate(std::string_view text, std::size_t offset, JsonSyntaxError& error) {
  offset = std::min(offset, text.size());
  const std::string_view before = text.substr(0, offset);
  error.line = 1 + static_cast<std::size_t>(std::count(before.begin(), before.end(), '\n'));
  const std::size_t newline = before.rfind('\n');
  error.column = newline == std::string_view::npos ? offset + 1 : offset - newline;
}

std::string between(const std::string& s, const std::string& from, const std::string& to) {
  const auto b = s.find(from);
  if (b == std::string::npos) return {};
  const auto start = b + from.size();
  const auto e = to.empty() ? std::string::npos : s.find(to, start);
  return s.substr(start, e == std::string::npos ? std::string::npos : e - start);
}

void dump_into(const json& v, std::string& out) {
  switch (v.type()) {
    case json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, item] : v.items()) {
        if (!first) out += ',';
        first = false;
        out += json(key).dump(-1, ' ', false, json::error_handler_t::replace);
        out += ':';
        dump_into(item, out);
      }
      out += '}';
      return;
    }
    case json::value_t::array: {
      out += '[';
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (i > 0) out += ',';
        dump_into(v[i], out);
      }
      out += ']';
      return;
    }
    case json::value_t::number_float: {
      const double d = v.get<double>();
      if (std::isnan(d)) {
        out += "NaN";
        return;
      }
      if (std::isinf(d)) {
        out += d > 0 ? "Infinity" : "-Infinity";
        return;
      }
      break;
    }
    default: break;
  }
  out += v.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

std::string JsonSyntaxError::describe() const {
  return "line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + what;
}

bool parse_json_text(std::string_view text, json& out, JsonSyntaxError& error) {
  std::string copy;
  std::vector<PythonWord> words;
  const std::string_view parsed = mark_python_words(text, copy, words) ? copy : text;
  json result;
  PythonJsonSax sax(result, words);
  const bool ok = json::sax_parse(parsed.begin(), parsed.end(), &sax, json::input_format_t::json,
                                  /*strict=*/true);
  if (!ok || sax.error_offset) {
    locate(text, sax.error_offset.value_or(text.size()), error);
    error.what = sax.error_words.empty() ? "not valid JSON" : sax.error_words;
    return false;
  }
  out = std::move(result);
  return true;
}

bool read_json_file(const std::string& path, json& out, std::string& error) {
  std::string text;
  if (!read_small_file(path, kJsonMetadataMaxBytes, text, error)) return false;
  JsonSyntaxError syntax;
  if (parse_json_text(text, out, syntax)) return true;
  error = path + ":" + std::to_string(syntax.line) + ":" + std::to_string(syntax.column) +
          ": malformed JSON: " + syntax.what;
  return false;
}

std::string dump_json_python(const json& value) {
  std::string out;
  dump_into(value, out);
  return out;
}

std::string json_error_text(const char* what) {
  std::string s = what;
  if (!s.empty() && s[0] == '[') {
    const auto close = s.find("] ");
    if (close != std::string::npos) s.erase(0, close + 2);
  }
  return s;
}

std::string json_syntax_words(const json::exception& e) {
  std::string s = json_error_text(e.what());
  if (s.rfind("parse error", 0) == 0) {  // "parse error at line 1, column 5: ..."
    const auto colon = s.find(": ");
    if (colon != std::string::npos) s.erase(0, colon + 2);
  }
  if (s.rfind("number overflow parsing ", 0) == 0)
    return "the number " + s.substr(24) + " is too large for a double";
  if (s.rfind("syntax error while parsing ", 0) != 0) return s;

  const std::string context = between(s, "while parsing ", " - ");
  std::string detail = between(s, " - ", ";");
  if (detail.empty()) detail = between(s, " - ", "");
  std::string last = s.find("'; expected") != std::string::npos
                         ? between(s, "last read: '", "'; expected")
                         : between(s, "last read: '", "");
  if (s.find("'; expected") == std::string::npos && !last.empty() && last.back() == '\'')
    last.pop_back();
  last = "'" + shown_token(last) + "'";
  const std::string expected = between(s, "; expected ", "");
  const std::string inside = context == "array"                                   ? "an array"
                             : context == "value"                                 ? "a value"
                             : context.rfind("object", 0) == 0                    ? "an object"
                                                                                  : context;
  if (detail == "unexpected end of input")
    return "the text ends inside " + inside +
           ": it was cut short (a file still being written, or truncated)";
  if (detail == "invalid literal")
    return "found " + last +
           ", which is not a JSON value (text needs double quotes; true, false and null are "
           "lower case)";
  if (detail.rfind("invalid string: ", 0) == 0)
    return "a string in double quotes is not valid: " + detail.substr(16);
  if (detail.rfind("invalid number", 0) == 0) return "found " + last + ", which is not a number";
  if (detail.rfind("unexpected ", 0) == 0) {
    const std::string found = detail.substr(11);
    std::string want = expected;
    if (expected == "'[', '{', or a literal") want = "a value";
    else if (expected == "string literal") want = "a key in double quotes";
    else if (expected == "':'") want = "':' after the key";
    else if (expected == "'}'") want = "',' or '}'";
    else if (expected == "']'") want = "',' or ']'";
    else if (expected == "end of input")
      want = "the end of the text (one JSON value per text: a bracket or a value too many?)";
    std::string words = "found " + found + " where " + want + " should be";
    if ((found == "'}'" || found == "']'") && want == "a key in double quotes")
      words += " (a comma too many before it?)";
    else if ((found == "'}'" || found == "']'") && want == "a value")
      words += " (a value missing, or a comma too many before it?)";
    return words;
  }
  return detail.empty() ? s : detail;
}

}  // namespace studio
