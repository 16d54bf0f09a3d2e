#include "studio/config/config_io.h"
#include "studio/config/llamafactory_target.h"
#include "studio/config/config_dialect.h"

#include <algorithm>
#include <climits>
#include <map>
#include <optional>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "studio/base/atomic_file.h"
#include "studio/config/config_schema.h"
#include "yaml_entries.h"
#include "yaml_load.h"

namespace studio {
namespace {

Diagnostic at(const std::string& file, SourcePos p, Severity sev, std::string key,
              std::string message, std::string allowed = {}) {
  return {sev, file, p.line, p.column, std::move(key), std::move(message), std::move(allowed)};
}

void read_key(const std::string& file, const YAML::Node& k, const YAML::Node& v, LoadResult& res,
              std::map<std::string, int>& seen) {
  RunConfig& cfg = res.config;
  auto& diags = res.diagnostics;
  const SourcePos kp = yaml_pos(k);
  if (!k.IsScalar()) {
    diags.push_back(at(file, kp, Severity::Error, "", "a key must be a plain name"));
    return;
  }
  const std::string key = k.Scalar();
  if (auto it = seen.find(key); it != seen.end()) {
    diags.push_back(at(file, kp, Severity::Error, key,
                       "duplicate key (first given at line " + std::to_string(it->second) +
                           "): keep one"));
    return;
  }
  seen[key] = kp.line;
  cfg.source.key_pos[key] = kp;
  cfg.source.value_pos[key] = v.IsNull() ? kp : yaml_pos(v);

  if (const FieldSpec* f = find_field(key)) {
    std::string err = f->parse(v, cfg);
    if (!err.empty())
      diags.push_back(at(file, cfg.source.value_pos[key], Severity::Error, key, err, f->allowed));
    else if (f->support == KeySupport::NoEffect)
      diags.push_back(at(file, kp, Severity::Warning, key,
                         "accepted for compatibility, no effect: " + std::string(f->help)));
    return;
  }
  if (std::string why = refused_extra_key(key, v); !why.empty()) {
    if (key == "optim") why += ": remove optim, or set it to adamw_torch";
    diags.push_back(at(file, yaml_pos(v), Severity::Error, key, why));
    return;
  }
  cfg.extra_keys.push_back({key, RawYaml{yaml_text(v)}, kp.line});
  std::string msg = extra_key_note(key, v);
  if (msg.empty()) {
    msg = "not used by studio-train; kept as written when the config is saved";
    if (std::string near = suggest_key(key); !near.empty())
      msg += " (did you mean '" + near + "'?)";
  }
  diags.push_back(at(file, kp, Severity::Warning, key, msg));
}

// yaml-cpp's messages are terse ("illegal map value"); say what usually causes them.
std::string explain_yaml_error(const std::string& msg) {
  std::string out = "malformed YAML: " + msg;
  if (msg.find("map value") != std::string::npos || msg.find("end of map") != std::string::npos)
    out += " (check the indentation and that each line is 'key: value'; quote values holding ': ')";
  return out;
}

// yaml-cpp notices a top-level line without a colon only on a later line, where the plain
// scalar it started ends. Find that line (at or before `error_line`) so the message points at it.
int first_line_without_colon(std::string_view text, int error_line) {
  int line = 0;
  size_t start = 0;
  while (start <= text.size() && ++line <= error_line) {
    size_t end = text.find('\n', start);
    std::string_view l = text.substr(start, end == std::string_view::npos ? text.npos : end - start);
    start = end == std::string_view::npos ? text.size() + 1 : end + 1;
    if (l.empty() || l[0] == ' ' || l[0] == '\t' || l[0] == '#' || l[0] == '-' || l[0] == '{' ||
        l[0] == '[' || l == "---" || l == "...")
      continue;
    const size_t colon = l.find(':');
    if (colon == std::string_view::npos) return line;
  }
  return 0;
}

}  // namespace

LoadResult load_config_string(std::string_view yaml, const std::string& display_name) {
  LoadResult res;
  res.config.source.file = display_name;
  YAML::Node root;
  try {
    root = detail::load_yaml(std::string(yaml));
  } catch (const detail::YamlShapeError& e) {
    res.diagnostics.push_back(
        at(display_name, {e.mark.line + 1, e.mark.column + 1}, Severity::Error, "", e.msg));
    return res;
  } catch (const YAML::ParserException& e) {
    SourcePos p{e.mark.line + 1, e.mark.column + 1};
    std::string msg = explain_yaml_error(e.msg);
    if (int bad = first_line_without_colon(yaml, p.line); bad > 0) {
      p = {bad, 1};
      msg = "malformed YAML: this line is not 'key: value' (" + e.msg + " at line " +
            std::to_string(e.mark.line + 1) + ")";
    }
    res.diagnostics.push_back(at(display_name, p, Severity::Error, "", msg));
    return res;
  } catch (const YAML::Exception& e) {
    res.diagnostics.push_back(at(display_name, {1, 1}, Severity::Error, "",
                                 "cannot read YAML: " + std::string(e.what())));
    return res;
  }
  if (root.IsNull()) {
    res.diagnostics.push_back(at(display_name, {1, 1}, Severity::Error, "",
                                 "the config is empty: it needs at least model_name_or_path, "
                                 "dataset, template and output_dir"));
    return res;
  }
  if (!root.IsMap()) {
    res.diagnostics.push_back(at(display_name, yaml_pos(root), Severity::Error, "",
                                 "a run config is a mapping of 'key: value' lines"));
    return res;
  }
  if (const ConfigDialect* dialect = dialect_of_file(root)) {
    dialect->read(root, res);
  } else {
    std::map<std::string, int> seen;
    for (const auto& kv : root) read_key(display_name, kv.first, kv.second, res, seen);
  }
  sort_by_position(res.diagnostics);
  return res;
}

LoadResult load_config_file(const std::string& path) {
  std::string text, error;
  if (!read_file(path, text, error)) {
    LoadResult res;
    res.config.source.file = path;
    res.diagnostics.push_back(at(path, {1, 1}, Severity::Error, "",
                                 error + " (give the path of a LLaMA-Factory training YAML)"));
    return res;
  }
  return load_config_string(text, path);
}

std::vector<Diagnostic> apply_overrides(RunConfig& cfg, const std::vector<std::string>& sets) {
  std::vector<Diagnostic> diags;
  for (const std::string& set : sets) {
    const auto eq = set.find('=');
    const std::string key = set.substr(0, eq);
    auto fail = [&](std::string msg, std::string allowed = {}) {
      diags.push_back(
          {Severity::Error, "--set " + set, 0, 0, key, std::move(msg), std::move(allowed), false});
    };
    if (eq == std::string::npos || key.empty()) {
      fail("expected key=value, got '" + set + "'");
      continue;
    }
    // The value as YAML; a failure is reported once, for whichever key reads it first.
    std::optional<YAML::Node> parsed;
    auto value_of = [&]() -> const YAML::Node* {
      if (!parsed) {
        try {
          parsed = detail::load_yaml(set.substr(eq + 1));
        } catch (const detail::YamlShapeError& e) {
          fail(e.msg);
          return nullptr;
        } catch (const YAML::Exception& e) {
          fail("the value is not valid YAML: " + std::string(e.what()));
          return nullptr;
        }
      }
      return &*parsed;
    };
    // A dialect's own names first (v1: cp_size, micro_batch_size, dist_config, ...).
    if (const ConfigDialect* dialect = dialect_of(cfg)) {
      const YAML::Node* dialect_value = value_of();
      if (!dialect_value) continue;
      if (dialect->apply_override(cfg, key, *dialect_value, "--set " + set, diags)) continue;
    }
    const FieldSpec* f = find_field(key);
    if (!f) {
      std::string near = suggest_key(key);
      fail("unknown key" + (near.empty() ? std::string() : "; did you mean '" + near + "'?"));
      continue;
    }
    const YAML::Node* found = value_of();
    if (!found) continue;
    const YAML::Node& value = *found;
    if (std::string err = f->parse(value, cfg); !err.empty()) {
      fail(err, f->allowed);
      continue;
    }
    // Overridden keys count as given, so they are saved and checked like the file's own.
    cfg.source.key_pos.emplace(key, SourcePos{});
    cfg.source.value_pos.emplace(key, SourcePos{});
  }
  return diags;
}

namespace {

// One `key: value` entry; block collections go on the following lines, indented.
void write_entry(std::ostringstream& out, std::string_view key, const YAML::Node& value) {
  YAML::Emitter e;
  e << YAML::BeginMap << YAML::Key;
  if (yaml_long_key(key)) e << YAML::LongKey;
  e << std::string(key) << YAML::Value;
  if (value.IsNull())
    e << YAML::Null;
  else
    emit_yaml(e, value);
  e << YAML::EndMap;
  out << e.c_str() << '\n';
}

std::string to_yaml_full(const RunConfig& cfg) {
  std::ostringstream out;
  std::string_view group;
  for (const auto& f : config_fields()) {
    if (f.group != group) {
      out << (group.empty() ? "" : "\n") << "### " << f.group << '\n';
      group = f.group;
    }
    write_entry(out, f.key, f.to_node(cfg));
  }
  if (!cfg.extra_keys.empty()) out << "\n### not used by studio-train (kept as written)\n";
  for (const auto& x : cfg.extra_keys) write_entry(out, x.key, YAML::Load(x.value.text));
  return out.str();
}

std::string to_yaml_minimal(const RunConfig& cfg, bool llamafactory) {
  std::vector<detail::YamlEntry> entries;
  long unplaced = INT_MAX;  // keys set in memory go after the file's keys, in table order
  const auto& differ = llamafactory_different_defaults();
  for (const auto& f : config_fields()) {
    if (llamafactory && !llamafactory_knows(f.key)) continue;
    auto pos = cfg.source.key_pos.find(std::string(f.key));
    const bool from_file = pos != cfg.source.key_pos.end();
    // LLaMA-Factory reads a key left out as its own default, which for these is not ours.
    const bool written_anyway =
        llamafactory && std::find(differ.begin(), differ.end(), f.key) != differ.end();
    if (!from_file && (f.is_default(cfg) && !f.required) && !written_anyway) continue;
    entries.push_back({from_file ? pos->second.line : unplaced++, std::string(f.key), f.to_node(cfg)});
  }
  for (const auto& x : cfg.extra_keys)
    entries.push_back({x.line > 0 ? x.line : unplaced++, x.key, YAML::Load(x.value.text)});
  return detail::write_yaml_entries(entries);
}

}  // namespace

std::string detail::write_yaml_entries(const std::vector<YamlEntry>& entries) {
  // Sort indices: assigning a YAML::Node writes through to the node it refers to, so the
  // entries themselves must not be moved around.
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return entries[a].order < entries[b].order; });
  std::ostringstream out;
  for (size_t i : order) write_entry(out, entries[i].key, entries[i].value);
  return out.str();
}

std::string to_yaml(const RunConfig& cfg, YamlStyle style) {
  if (const ConfigDialect* dialect = dialect_of(cfg); dialect && style != YamlStyle::LlamaFactory)
    return dialect->write_yaml(cfg, style == YamlStyle::Full);
  return style == YamlStyle::Full ? to_yaml_full(cfg)
                                  : to_yaml_minimal(cfg, style == YamlStyle::LlamaFactory);
}

namespace {

// Deeper than any value a config holds; reached by an alias inside its own anchor (`&x [*x]`,
// legal YAML: a list that holds itself), which has no JSON form.
constexpr int kMaxJsonDepth = 256;
struct NoJsonForm {};

nlohmann::json yaml_to_json(const YAML::Node& n, int depth = 0) {
  if (depth > kMaxJsonDepth) throw NoJsonForm{};
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Sequence: {
      auto arr = nlohmann::json::array();
      for (const auto& item : n) arr.push_back(yaml_to_json(item, depth + 1));
      return arr;
    }
    case YAML::NodeType::Map: {
      auto obj = nlohmann::json::object();
      for (const auto& kv : n) obj[kv.first.Scalar()] = yaml_to_json(kv.second, depth + 1);
      return obj;
    }
    case YAML::NodeType::Scalar:
      break;
  }
  const std::string& s = n.Scalar();
  if (n.Tag() == "!") return s;  // quoted in the source: a string whatever it looks like
  if (s == "true" || s == "false") return s == "true";
  if (s == "~" || s == "null") return nullptr;
  int64_t whole = 0;
  if (s.find_first_of(".eE") == std::string::npos && parse_whole(s, {}, whole).empty())
    return whole;
  double d = 0;  // a fraction, or a whole number past int64
  if (parse_double(s, d)) return d;
  return s;
}

}  // namespace

nlohmann::json config_to_json(const RunConfig& cfg) {
  auto out = nlohmann::json::object();
  // A value with no JSON form (it holds itself) is given as its YAML text.
  auto as_json = [](const YAML::Node& node, const std::string& text) -> nlohmann::json {
    try {
      return yaml_to_json(node);
    } catch (const NoJsonForm&) {
      return text;
    }
  };
  for (const auto& f : config_fields()) {
    const YAML::Node node = f.to_node(cfg);
    out[std::string(f.key)] = as_json(node, node.IsScalar() ? node.Scalar() : YAML::Dump(node));
  }
  for (const auto& x : cfg.extra_keys) out[x.key] = as_json(YAML::Load(x.value.text), x.value.text);
  if (cfg.is_v1()) {  // a v1 file's data and batch keys, as it spells them
    out["train_dataset"] = cfg.v1.train_dataset;
    out["eval_dataset"] = cfg.v1.eval_dataset ? nlohmann::json(*cfg.v1.eval_dataset) : nullptr;
    out["global_batch_size"] =
        cfg.v1.global_batch_size ? nlohmann::json(*cfg.v1.global_batch_size) : nullptr;
  }
  return out;
}

std::string save_config_file(const RunConfig& cfg, const std::string& path, YamlStyle style) {
  return write_file_atomic(path, to_yaml(cfg, style));
}

}  // namespace studio
