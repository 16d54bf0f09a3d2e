#include "pieces.h"

#include <algorithm>
#include <stdexcept>

namespace studio::data::detail {

namespace {

struct Part {
  std::size_t start, end;
  bool removed;
};

// Joins a match to the part before it; only the first match of a run is joined.
std::vector<Part> merged_with_previous(const std::vector<Cut>& cuts) {
  std::vector<Part> parts;
  bool previous_match = false;
  for (const Cut& cut : cuts) {
    if (cut.is_match && !previous_match && !parts.empty()) {
      parts.back().end = cut.end;
    } else {
      parts.push_back({cut.start, cut.end, false});
    }
    previous_match = cut.is_match;
  }
  return parts;
}

// The mirror image of merged_with_previous, walking from the end.
std::vector<Part> merged_with_next(const std::vector<Cut>& cuts) {
  std::vector<Part> parts;
  bool previous_match = false;
  for (auto it = cuts.rbegin(); it != cuts.rend(); ++it) {
    if (it->is_match && !previous_match && !parts.empty()) {
      parts.back().start = it->start;
    } else {
      parts.push_back({it->start, it->end, false});
    }
    previous_match = it->is_match;
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

// Runs of cuts of the same kind become one part.
std::vector<Part> contiguous(const std::vector<Cut>& cuts) {
  std::vector<Part> parts;
  bool previous_match = false;
  for (const Cut& cut : cuts) {
    if (cut.is_match == previous_match && !parts.empty()) {
      parts.back().end = cut.end;
    } else {
      parts.push_back({cut.start, cut.end, false});
    }
    previous_match = cut.is_match;
  }
  return parts;
}

std::vector<Part> parts_for(const std::vector<Cut>& cuts, SplitBehavior behavior) {
  switch (behavior) {
    case SplitBehavior::MergedWithPrevious:
      return merged_with_previous(cuts);
    case SplitBehavior::MergedWithNext:
      return merged_with_next(cuts);
    case SplitBehavior::Contiguous:
      return contiguous(cuts);
    case SplitBehavior::Removed:
    case SplitBehavior::Isolated:
      break;
  }
  std::vector<Part> parts;
  parts.reserve(cuts.size());
  for (const Cut& cut : cuts) {
    parts.push_back({cut.start, cut.end, behavior == SplitBehavior::Removed && cut.is_match});
  }
  return parts;
}

}  // namespace

SplitBehavior split_behavior_from_json(const JsonNode& node) {
  const std::string name = node.string();
  if (name == "Removed") return SplitBehavior::Removed;
  if (name == "Isolated") return SplitBehavior::Isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (name == "Contiguous") return SplitBehavior::Contiguous;
  node.fail("'" + name +
            "' is not a split behavior (allowed: Removed, Isolated, "
            "MergedWithPrevious, MergedWithNext, Contiguous)");
}

std::vector<Cut> cuts_from_matches(std::size_t length, const std::vector<Span>& matches) {
  if (length == 0) return {{0, 0, false}};
  std::vector<Cut> cuts;
  cuts.reserve(matches.size() * 2 + 1);
  std::size_t previous = 0;
  for (const Span& m : matches) {
    if (previous != m.first) cuts.push_back({previous, m.first, false});
    cuts.push_back({m.first, m.second, true});
    previous = m.second;
  }
  if (previous != length) cuts.push_back({previous, length, false});
  return cuts;
}

void split_piece(PieceView piece, std::vector<Cut> cuts, SplitBehavior behavior, bool invert,
                 const PieceSink& sink) {
  if (invert) {
    for (Cut& cut : cuts) cut.is_match = !cut.is_match;
  }
  for (const Part& part : parts_for(cuts, behavior)) {
    if (part.removed || part.start == part.end) continue;
    sink(
        {piece.text.substr(part.start, part.end - part.start), piece.at_origin && part.start == 0});
  }
}

// prepend_scheme, or the older add_prefix_space flag it replaced.
PrependScheme prepend_scheme_from_json(const JsonNode& node) {
  if (node["prepend_scheme"].is_null()) {
    return node["add_prefix_space"].boolean_or(true) ? PrependScheme::Always : PrependScheme::Never;
  }
  const JsonNode scheme = node["prepend_scheme"];
  const std::string name = scheme.string();
  if (name == "always") return PrependScheme::Always;
  if (name == "first") return PrependScheme::First;
  if (name == "never") return PrependScheme::Never;
  scheme.fail("'" + name + "' is not a prepend scheme (allowed: always, first, never)");
}

std::unique_ptr<Regex> pattern_from_json(const JsonNode& node) {
  node.require_object();
  const bool literal = node.has("String");
  if (!literal && !node.has("Regex")) node.fail("expected {\"String\": ...} or {\"Regex\": ...}");
  const JsonNode source = node[literal ? "String" : "Regex"];
  try {
    return std::make_unique<Regex>(source.string(),
                                   literal ? Regex::Syntax::Literal : Regex::Syntax::Oniguruma);
  } catch (const std::invalid_argument& e) {
    source.fail(std::string("invalid regular expression: ") + e.what());
  }
}

}  // namespace studio::data::detail
