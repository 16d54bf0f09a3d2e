#include "yaml_load.h"

#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include <yaml-cpp/depthguard.h>

#include "studio/config/config_schema.h"

namespace studio::detail {
namespace {

std::string where(const YAML::Node& n) {
  return "line " + std::to_string(n.Mark().line + 1);
}

// A plain `<<` (or one tagged !!merge); a quoted '<<' is an ordinary key, as in YAML 1.1.
bool is_merge_key(const YAML::Node& k) {
  return k.IsScalar() && k.Scalar() == "<<" &&
         (k.Tag() == "?" || k.Tag() == "tag:yaml.org,2002:merge");
}

std::string key_text(const YAML::Node& k) {
  return k.IsScalar() ? k.Scalar() : yaml_text(k);
}

// Resolves the merge keys of every mapping in place as PyYAML's flatten_mapping does: a
// mapping's `<<` is taken out before the mappings it names are flattened, so one that merges
// itself, or a mapping holding it, merges what that one holds at that point (PyYAML's result)
// rather than recursing for ever. Each node is walked once, however many aliases reach it.
class MergeResolver {
 public:
  void walk(const YAML::Node& node) {
    if (!node.IsMap() && !node.IsSequence()) return;
    if (seen(node).walked) return;
    seen(node).walked = true;
    if (node.IsMap()) flatten(node);
    std::vector<YAML::Node> children;
    for (const auto& item : node) {
      if (node.IsMap()) {
        children.push_back(item.first);
        children.push_back(item.second);
      } else {
        children.push_back(item);
      }
    }
    for (const auto& child : children) walk(child);
  }

 private:
  struct Seen {
    bool walked = false;
    bool flattening = false;  // done, or under way further up: what it holds now is merged
  };

  void flatten(YAML::Node map) {
    if (seen(map).flattening) return;
    seen(map).flattening = true;
    std::optional<YAML::Node> merge_key;
    std::vector<YAML::Node> sources;
    for (const auto& kv : map) {
      if (!is_merge_key(kv.first)) continue;
      if (merge_key)
        throw YamlShapeError(kv.first.Mark(), "`<<` is given twice in this mapping (first at " +
                                                  where(*merge_key) +
                                                  "): merge a list instead, `<<: [*a, *b]`");
      merge_key = kv.first;
      const bool list = kv.second.IsSequence();
      if (list)
        for (const auto& item : kv.second) sources.push_back(item);
      else
        sources.push_back(kv.second);
      for (const auto& source : sources)
        if (!source.IsMap())
          throw YamlShapeError(kv.first.Mark(),
                               std::string("`<<` merges a mapping or a list of mappings "
                                           "(`<<: *name` or `<<: [*a, *b]`), got ") +
                                   (list ? "a list holding " : "") + yaml_kind(source));
    }
    if (!merge_key) return;
    map.remove(*merge_key);
    for (const auto& source : sources) flatten(source);
    std::set<std::string> present;
    for (const auto& kv : map) present.insert(key_text(kv.first));
    for (const auto& source : sources)
      for (const auto& kv : source)
        if (present.insert(key_text(kv.first)).second) map.force_insert(kv.first, kv.second);
  }

  // Nodes by where they start; the rare two that start at one place are told apart by is().
  Seen& seen(const YAML::Node& n) {
    auto& same_place = seen_[n.Mark().pos];
    for (auto& [node, s] : same_place)
      if (node.is(n)) return s;
    return same_place.emplace_back(n, Seen{}).second;
  }

  std::map<int, std::vector<std::pair<YAML::Node, Seen>>> seen_;
};

// The top-level key whose value holds line `line` (0-based) of `text`, as "'name', line N", or "".
std::string top_level_key(const std::string& text, int line) {
  std::istringstream in(text);
  std::string l, found;
  for (int i = 0; i <= line && std::getline(in, l); ++i) {
    if (l.empty() || l[0] == ' ' || l[0] == '\t' || l[0] == '#' || l[0] == '-' || l[0] == '[' ||
        l[0] == '{' || l.rfind("---", 0) == 0)
      continue;
    const auto colon = l.find(':');
    if (colon != std::string::npos)
      found = "'" + l.substr(0, colon) + "', line " + std::to_string(i + 1);
  }
  return found;
}

}  // namespace

YAML::Node load_yaml(const std::string& text) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::DeepRecursion& e) {
    const std::string key = top_level_key(text, e.mark.line);
    throw YamlShapeError(e.mark,
                         "nests too deeply: lists and mappings inside one another go "
                         "deeper here than the YAML reader follows" +
                             (key.empty() ? "" : " (in the value of " + key + ")"));
  }
  MergeResolver().walk(root);
  return root;
}

YAML::Node load_yaml_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw YAML::BadFile(path);
  std::ostringstream text;
  text << in.rdbuf();
  return load_yaml(text.str());
}

std::string yaml_kind(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Null:
      return "nothing";
    default:
      return "'" + n.Scalar() + "'";
  }
}

std::string yaml_error_message(const YAML::ParserException& e) {
  if (dynamic_cast<const YamlShapeError*>(&e)) return e.msg;
  return "malformed YAML: " + e.msg;
}

}  // namespace studio::detail
