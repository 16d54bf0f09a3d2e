#pragma once
// JSON as the tools around us write it, read with errors in our words that say where.
//
// Python's json module (Hugging Face's Trainer, LLaMA-Factory, DeepSpeed, datasets) writes a
// float that is not finite as the bare words NaN, Infinity and -Infinity unless told otherwise,
// and reads them back; strict JSON has no such words. Every reader here takes them as the
// doubles they name, so a diverged run's `"grad_norm": NaN` is a value, not a broken file.
#include <limits>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace studio {

// Where a text stopped being JSON, and why, in words for a user.
struct JsonSyntaxError {
  std::size_t line = 0;    // 1-based
  std::size_t column = 0;  // 1-based, in bytes
  std::string what;        // e.g. "found '}' where a value should be (a comma too many before it?)"
  // "line L, column C: what"
  std::string describe() const;
};

// Python's words and how a reader reads them: each is swapped for a string literal of the same
// length (positions stay), which the reader's SAX handler takes back as `value` (it knows which
// string literals stood for words). For readers that stream (dataset rows); parse_json_text
// does it for a text in memory.
struct PythonJsonWord {
  std::string_view word;      // NaN, Infinity, -Infinity
  std::string_view stand_in;  // "N", "Infini", "-Infini" (quotes included)
  double value;
};
inline constexpr PythonJsonWord kPythonJsonWords[] = {
    {"-Infinity", "\"-Infini\"", -std::numeric_limits<double>::infinity()},
    {"Infinity", "\"Infini\"", std::numeric_limits<double>::infinity()},
    {"NaN", "\"N\"", std::numeric_limits<double>::quiet_NaN()},
};
static_assert(kPythonJsonWords[0].word.size() == kPythonJsonWords[0].stand_in.size() &&
              kPythonJsonWords[1].word.size() == kPythonJsonWords[1].stand_in.size() &&
              kPythonJsonWords[2].word.size() == kPythonJsonWords[2].stand_in.size());
// A character that may be part of a word or number: the words only count standing alone.
bool json_word_char(char c);

// Parses one JSON value (the whole text), NaN, Infinity and -Infinity included.
bool parse_json_text(std::string_view text, nlohmann::json& out, JsonSyntaxError& error);

// Reads and parses a file; on failure `error` says "path:line:column: malformed JSON: ...", or
// why the file could not be read. The JSON files read whole are metadata (a model's config.json
// and index, dataset_info.json, a DeepSpeed config that every worker reads): a regular file of
// at most kJsonMetadataMaxBytes (read_small_file), so that a link to /dev/zero or a FIFO is an
// error rather than a hang.
bool read_json_file(const std::string& path, nlohmann::json& out, std::string& error);

// The same JSON written back as Python writes it: non-finite floats as NaN, Infinity and
// -Infinity (nlohmann's dump writes them as null, which reads back as "no value"). Compact, keys
// in the object's order; invalid UTF-8 in strings is replaced.
std::string dump_json_python(const nlohmann::json& value);

// nlohmann's exception text without its "[json.exception.parse_error.101] " prefix, which says
// nothing to a user.
std::string json_error_text(const char* what);

// What a parse error of nlohmann's says, in our words (no position: the caller has that).
std::string json_syntax_words(const nlohmann::json::exception& e);

}  // namespace studio
