#pragma once
// Private to studio_config: YAML read as LLaMA-Factory reads it (PyYAML's YAML 1.1 loader), for
// every file a user writes: run configs (v0 and v1), v1 dataset files, --set values.
// - Merge keys are resolved, which yaml-cpp 0.7 leaves as a key named "<<": `<<: *a` merges the
//   mapping a, `<<: [*a, *b]` several; keys the mapping has itself win, earlier mappings of a
//   list win over later ones, and merges inside the merged mappings resolve first. A merged key
//   keeps its own place in the file (where the anchored mapping wrote it), so messages about it
//   point there.
// - A document nested past yaml-cpp's depth guard (whose message is "bad file") is reported as
//   nested too deeply, at the line where the reader gave up and under which top-level key.
#include <string>

#include <yaml-cpp/yaml.h>

namespace studio::detail {

// A document yaml-cpp parses that still cannot be read as the file means (nested too deeply,
// a `<<` that merges no mapping): `msg` is the whole message, `mark` where it applies.
class YamlShapeError : public YAML::ParserException {
 public:
  using YAML::ParserException::ParserException;
};

// YAML::Load with merge keys resolved. Throws YAML::ParserException as YAML::Load does, a
// YamlShapeError for the problems above.
YAML::Node load_yaml(const std::string& text);
// The same for a file; YAML::BadFile when it cannot be read.
YAML::Node load_yaml_file(const std::string& path);

// What a value is, for messages: "a mapping", "a list", "nothing" or the scalar quoted.
std::string yaml_kind(const YAML::Node& n);

// The message for an exception of load_yaml: "malformed YAML: " and yaml-cpp's own words, or
// the YamlShapeError's message as it is.
std::string yaml_error_message(const YAML::ParserException& e);

}  // namespace studio::detail
