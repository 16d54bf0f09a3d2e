#include "json_rows.h"

#include <fstream>
#include <iterator>
#include <optional>
#include <vector>

#include "studio/base/json_file.h"
#include "studio/data/dataset_info.h"

namespace studio::data::detail {
namespace {

using studio::json_syntax_words;
using studio::json_word_char;
using studio::JsonSyntaxError;
using studio::kPythonJsonWords;
using studio::parse_json_text;
using studio::PythonJsonWord;

using nlohmann::json;

// nlohmann's messages read "[json.exception.parse_error.101] parse error at line 3, column 7:
// syntax error ..."; the location goes in front as FILE:LINE:COL, the rest stays.
struct ParseProblem {
  int64_t line = 0;
  int64_t column = 0;
  std::string what;
};

ParseProblem split_parse_error(const std::string& what) {
  ParseProblem p;
  p.what = what;
  const std::size_t at = what.find(" at line ");
  if (at == std::string::npos) return p;
  try {
    std::size_t used = 0;
    p.line = std::stoll(what.substr(at + 9), &used);
    const std::size_t col = what.find("column ", at);
    if (col != std::string::npos) p.column = std::stoll(what.substr(col + 7));
  } catch (const std::exception&) {
    return p;
  }
  const std::size_t colon = what.find(": ", at);
  if (colon != std::string::npos) p.what = what.substr(colon + 2);
  return p;
}

ParseProblem parse_problem(const nlohmann::detail::exception& e) {
  ParseProblem p = split_parse_error(e.what());
  p.what = json_syntax_words(static_cast<const json::exception&>(e));
  return p;
}

[[noreturn]] void fail(const std::string& path, int64_t line, int64_t column, const std::string& what) {
  std::string loc = path + ":" + std::to_string(line);
  if (column > 0) loc += ":" + std::to_string(column);
  throw DatasetError(loc + ": " + what);
}

// The first significant character: '[' (JSON array), '{' (JSON lines) or 0 for an empty file.
char first_significant(std::istream& in, int64_t& line) {
  line = 1;
  char c = 0;
  bool start = true;
  while (in.get(c)) {
    if (start && static_cast<unsigned char>(c) == 0xEF) {  // UTF-8 BOM: EF BB BF
      char bom[2];
      if (in.read(bom, 2) && static_cast<unsigned char>(bom[0]) == 0xBB &&
          static_cast<unsigned char>(bom[1]) == 0xBF) {
        start = false;
        continue;
      }
      return c;
    }
    start = false;
    if (c == '\n') ++line;
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return c;
  }
  return 0;
}

int64_t read_json_lines(std::istream& in, const std::string& path, const RowSink& on_row,
                        const MalformedSink& on_malformed) {
  std::string text;
  int64_t line = 0;
  int64_t rows = 0;
  while (std::getline(in, text)) {
    ++line;
    if (line == 1 && text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    json value;
    JsonSyntaxError syntax;  // NaN, Infinity and -Infinity as Python writes them are numbers
    if (!parse_json_text(text, value, syntax)) {
      on_malformed(line, static_cast<int64_t>(syntax.column), "malformed JSON: " + syntax.what);
      continue;
    }
    if (!on_row(RawRow{std::move(value), line, ++rows})) break;
  }
  if (in.bad()) fail(path, line, 0, "read error");
  return rows;
}

// Counts lines as nlohmann's parser pulls characters, so each row knows where it starts.
struct CountingSource {
  std::streambuf* buf = nullptr;
  int64_t line = 1;

  bool end() const { return buf->sgetc() == std::char_traits<char>::eof(); }
  char get() const { return std::char_traits<char>::to_char_type(buf->sgetc()); }
  void next() {
    if (buf->sbumpc() == '\n') ++line;
  }
};

// An input iterator over a source of characters (end(), get(), next()), as nlohmann's parser
// pulls them; any two iterators at the end compare equal.
template <class Source>
class PullIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = char;

  PullIterator() = default;
  explicit PullIterator(Source* source) : source_(source) {}
  char operator*() const { return source_->get(); }
  PullIterator& operator++() {
    source_->next();
    return *this;
  }
  bool operator==(const PullIterator& other) const { return at_end() == other.at_end(); }
  bool operator!=(const PullIterator& other) const { return !(*this == other); }

 private:
  bool at_end() const { return source_ == nullptr || source_->end(); }
  Source* source_ = nullptr;
};
using CountingIterator = PullIterator<CountingSource>;

// The characters of CountingIterator with Python's words for non-finite floats (NaN, Infinity,
// -Infinity, outside strings and standing alone) swapped for string literals of the same
// length; `words` gets, for each, its index among the text's string literals and its value, in
// order, before the parser reads past it.
struct PythonWordsSource {
  explicit PythonWordsSource(CountingIterator from) : in(from) {}

  CountingIterator in;
  std::vector<std::pair<std::size_t, double>> words;
  std::string pending;  // characters to hand out before reading on
  std::size_t at = 0;
  std::size_t strings = 0;
  bool in_string = false;
  bool escaped = false;
  char previous = 0;

  bool end() {
    fill();
    return at == pending.size();
  }
  char get() {
    fill();
    return pending[at];
  }
  void next() { ++at; }

 private:
  void fill() {
    if (at < pending.size()) return;
    pending.clear();
    at = 0;
    if (in == CountingIterator()) return;
    const char c = *in;
    ++in;
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      pending = c;
      previous = c;
      return;
    }
    if (c == '"') {
      ++strings;
      in_string = true;
    }
    pending = c;
    if ((c == 'N' || c == 'I' || c == '-') && !json_word_char(previous)) {
      // Read on while the characters could begin a word; a whole word standing alone becomes
      // its stand-in, anything else is handed out as it was read.
      auto begins_a_word = [](const std::string& text) {
        for (const PythonJsonWord& w : kPythonJsonWords)
          if (w.word.substr(0, text.size()) == text) return true;
        return false;
      };
      while (in != CountingIterator() && begins_a_word(pending + *in)) {
        pending += *in;
        ++in;
      }
      const bool alone = in == CountingIterator() || !json_word_char(*in);
      for (const PythonJsonWord& w : kPythonJsonWords) {
        if (w.word != pending || !alone) continue;
        pending = std::string(w.stand_in);
        words.emplace_back(strings++, w.value);
        break;
      }
    }
    previous = pending.back();
  }
};

using PythonWordsIterator = PullIterator<PythonWordsSource>;

// Builds each element of the top-level array as a json value and hands it over when complete.
class RowBuilder {
 public:
  RowBuilder(const CountingSource& source, const PythonWordsSource& words, const RowSink& sink)
      : source_(source), words_(words), sink_(sink) {}

  bool null() { return value(json(nullptr)); }
  bool boolean(bool v) { return value(json(v)); }
  bool number_integer(json::number_integer_t v) { return value(json(v)); }
  bool number_unsigned(json::number_unsigned_t v) { return value(json(v)); }
  bool number_float(json::number_float_t v, const std::string&) { return value(json(v)); }
  bool string(std::string& v) {
    if (const auto word = next_word()) return value(json(*word));
    return value(json(std::move(v)));
  }
  bool binary(json::binary_t& v) { return value(json(std::move(v))); }
  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(std::string& k) {
    if (next_word()) {
      error_ = ParseProblem{source_.line, 0,
                            "found the word for a non-finite number where a key in double quotes "
                            "should be"};
      return false;
    }
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    error_ = parse_problem(e);
    return false;
  }

  int64_t rows() const { return rows_; }
  bool stopped() const { return stopped_; }
  const std::optional<ParseProblem>& error() const { return error_; }
  bool top_level_not_array() const { return top_level_not_array_; }

 private:
  bool value(json&& v) {
    if (stack_.empty()) {  // a scalar row, or a scalar document
      if (depth_ == 0) {
        top_level_not_array_ = true;
        return false;
      }
      row_ = std::move(v);
      row_line_ = source_.line;
      return emit();
    }
    insert(std::move(v));
    return true;
  }
  json* insert(json&& v) {
    json* parent = stack_.back();
    if (parent->is_object()) {
      json& slot = (*parent)[key_];
      slot = std::move(v);
      return &slot;
    }
    parent->push_back(std::move(v));
    return &parent->back();
  }
  bool open(json&& container) {
    ++depth_;
    if (depth_ == 1) {
      if (!container.is_array()) top_level_not_array_ = true;
      return container.is_array();
    }
    if (depth_ == 2) {
      row_ = std::move(container);
      row_line_ = source_.line;
      stack_ = {&row_};
      return true;
    }
    stack_.push_back(insert(std::move(container)));
    return true;
  }
  bool close() {
    --depth_;
    if (depth_ == 0) return true;
    stack_.pop_back();
    return depth_ == 1 ? emit() : true;
  }
  bool emit() {
    if (!sink_(RawRow{std::move(row_), row_line_, ++rows_})) {
      stopped_ = true;
      return false;
    }
    return true;
  }

  // The value of the string literal just read when it stood for one of Python's words.
  std::optional<double> next_word() {
    const std::size_t index = strings_++;
    if (word_ < words_.words.size() && words_.words[word_].first == index)
      return words_.words[word_++].second;
    return std::nullopt;
  }

  const CountingSource& source_;
  const PythonWordsSource& words_;
  std::size_t strings_ = 0;
  std::size_t word_ = 0;
  const RowSink& sink_;
  std::vector<json*> stack_;
  std::string key_;
  json row_;
  int64_t row_line_ = 0;
  int64_t depth_ = 0;
  int64_t rows_ = 0;
  bool stopped_ = false;
  bool top_level_not_array_ = false;
  std::optional<ParseProblem> error_;
};

int64_t read_json_array(std::istream& in, const std::string& path, const RowSink& on_row) {
  CountingSource source{in.rdbuf(), 1};
  PythonWordsSource words{CountingIterator(&source)};
  RowBuilder builder(source, words, on_row);
  json::sax_parse(PythonWordsIterator(&words), PythonWordsIterator(), &builder);
  if (builder.stopped()) return builder.rows();
  if (const auto& e = builder.error()) fail(path, e->line, e->column, "malformed JSON: " + e->what);
  if (builder.top_level_not_array()) fail(path, 1, 0, "expected a JSON array of rows");
  return builder.rows();
}

}  // namespace

int64_t read_rows(const std::string& path, const RowSink& on_row, const MalformedSink& on_malformed) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DatasetError(path + ": cannot open the data file");
  int64_t line = 1;
  const char first = first_significant(in, line);
  if (first == 0) return 0;
  in.clear();
  in.seekg(0);
  if (first == '[') return read_json_array(in, path, on_row);
  if (first == '{') return read_json_lines(in, path, on_row, on_malformed);
  const std::string shown = first >= 0x20 && first < 0x7f ? std::string(1, first) : "a non-text byte";
  fail(path, line, 0,
       "not JSON rows: starts with '" + shown +
           "' (expected a JSON array '[' or JSON lines of objects '{'; CSV, Parquet and Arrow are not read)");
}

}  // namespace studio::data::detail
