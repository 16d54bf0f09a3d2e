#pragma once
// Pieces of the input on their way through normalizers and pre-tokenizers, and HF's rules for
// cutting a piece at pattern matches (SplitDelimiterBehavior), shared by Split, Digits and
// Metaspace.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "json_node.h"
#include "regex.h"

namespace studio::data::detail {

// Normalizers rewrite a Piece they own; pre-tokenizers hand views of their pieces to the next
// stage, so a word is copied only where a stage rewrites it.
struct Piece {
  std::string text;
  // Whether the first character is the input's first character. HF's Metaspace with
  // prepend_scheme "first" prepends only to such a piece (offsets_original().0 == 0).
  bool at_origin = false;
};

struct PieceView {
  std::string_view text;
  bool at_origin = false;
};

// A non-owning reference to a callable taking a PieceView (the pieces a pre-tokenizer
// produces); the view is valid during the call only.
class PieceSink {
 public:
  template <typename F>
  PieceSink(F& callable)  // NOLINT(google-explicit-constructor): used like a function argument
      : object_(&callable), call_([](void* o, PieceView piece) { (*static_cast<F*>(o))(piece); }) {}
  void operator()(PieceView piece) const { call_(object_, piece); }

 private:
  void* object_;
  void (*call_)(void*, PieceView);
};

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
SplitBehavior split_behavior_from_json(const JsonNode& node);

struct Cut {
  std::size_t start, end;
  bool is_match;
};

// Cuts covering a text of `length` bytes: the matches plus the gaps between them (HF's
// Pattern::find_matches; an empty text is one empty non-match).
std::vector<Cut> cuts_from_matches(std::size_t length, const std::vector<Span>& matches);

// Passes on the non-empty parts of `piece` that `behavior` keeps; `invert` swaps match and gap.
void split_piece(PieceView piece, std::vector<Cut> cuts, SplitBehavior behavior, bool invert,
                 const PieceSink& sink);

// Metaspace's prepend_scheme, or the older add_prefix_space flag it replaced.
enum class PrependScheme { Always, First, Never };
PrependScheme prepend_scheme_from_json(const JsonNode& metaspace);

// A `{"String": s}` or `{"Regex": r}` pattern; errors name the node.
std::unique_ptr<Regex> pattern_from_json(const JsonNode& node);

}  // namespace studio::data::detail
