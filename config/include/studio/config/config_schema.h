#pragma once
// The key table: one entry per YAML key, binding it to its RunConfig field with its group, a
// one-line help text, its valid values and how it is parsed and written. Loading, saving, the
// wizard and the docs all read this table, so a key is described in exactly one place.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "studio/config/run_config.h"
#include "studio/base/whole_number.h"

namespace studio {

enum class KeySupport {
  Used,      // the engine acts on it
  NoEffect,  // accepted for compatibility with LLaMA-Factory files; reported once as a warning
};

struct FieldSpec {
  std::string_view key;
  std::string_view group;  // section in print-config output
  std::string_view help;
  KeySupport support = KeySupport::Used;
  bool required = false;
  std::string allowed;  // valid values ("a | b") or range, for messages and the UI
  // Reads `node` into the config; returns an error message (empty on success).
  std::function<std::string(const YAML::Node& node, RunConfig& cfg)> parse;
  // The value as YAML; a Null node when the optional value is unset.
  std::function<YAML::Node(const RunConfig& cfg)> to_node;
  std::function<bool(const RunConfig& cfg)> is_default;
};

const std::vector<FieldSpec>& config_fields();
const FieldSpec* find_field(std::string_view key);

// LLaMA-Factory keys outside the table whose values would change what a run means (quantised or
// adapter training, other optimizers). Returns a non-empty reason when `value` is refused.
std::string refused_extra_key(std::string_view key, const YAML::Node& value);
// What the warning says for a key outside the table that is kept (optim: AdamW, fp8, ...); ""
// for the generic "not used" (with a did-you-mean).
std::string extra_key_note(std::string_view key, const YAML::Node& value);

// The closest known key to a misspelt one (edit distance <= 2), or empty; the second form
// chooses among `candidates`.
std::string suggest_key(std::string_view unknown);
std::string suggest_key(std::string_view unknown, const std::vector<std::string_view>& candidates);

// The key table as a Markdown reference (docs/config.md is this text).
std::string config_keys_markdown();

// Whole-number keys are counts, sizes, steps and seconds: the engine narrows some to int and
// multiplies pairs of them, so each is read within int32's range (max_samples and seed within
// int64's), and a larger value is refused as too large rather than cut or rounded.
inline constexpr WholeRange kWholeKeyRange = WholeRange::of<int32_t>();

// A scalar read as the key table reads a bool (false when it is not one) or a whole number (""
// with `out` set, else what is wrong, e.g. "9223372036854775807 is too large (at most ...)").
bool yaml_bool(const YAML::Node& n, bool& out);
std::string yaml_whole(const YAML::Node& n, int64_t& out);

// Where a parsed node stands in its file (1-based), and a node as YAML text.
SourcePos yaml_pos(const YAML::Node& n);
// A key too long for YAML's implicit `key: value` form. YAML allows at most 1,024 characters
// from an implicit key's start to its colon; yaml-cpp's emitter switches to the explicit `? key`
// form by the key's own length, but escaping (a line break becomes `\n`, a control character
// `\x84`: at most 4 characters per byte, and 2 quotes) can take a shorter key past the limit,
// and the text then does not load. Past 200 bytes the explicit form is used.
bool yaml_long_key(std::string_view key);
// `n` into `e` as yaml-cpp writes it, but with every long key (above) in the explicit form, so
// that the text loads again, however the value's aliases share or nest its nodes.
void emit_yaml(YAML::Emitter& e, const YAML::Node& n);
std::string yaml_text(const YAML::Node& n);

}  // namespace studio
