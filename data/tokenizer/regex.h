#pragma once
// The regular expressions of tokenizer.json. HF compiles them with Oniguruma (Ruby syntax); we run
// them on PCRE2 (UTF + UCP, JIT when available) after translating the escapes whose meaning
// differs: Oniguruma's \s is [\t\n\v\f\r\x85\p{Zs}\x{2028}\x{2029}] (PCRE2 adds U+180E), its \w
// is Alphabetic + marks + decimal digits + connectors (PCRE2: [\p{L}\p{N}_]), its \h is a hex
// digit (PCRE2: horizontal space), and its \p{Han} is the Script property (PCRE2: Script
// Extensions). ^ and $ match at line boundaries, as in Ruby.
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace studio::data::detail {

using Span = std::pair<std::size_t, std::size_t>;  // [first, second) byte offsets

class Regex {
 public:
  enum class Syntax { Oniguruma, Literal };
  // Throws std::invalid_argument with PCRE2's reason and the offset in `pattern`.
  Regex(std::string_view pattern, Syntax syntax);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends every match in `text` (valid UTF-8), left to right and non-overlapping. An empty
  // match right where the previous match ended is skipped, as the onig crate's find_iter does.
  void find_all(std::string_view text, std::vector<Span>& out) const;

 private:
  bool match_at(std::string_view text, std::size_t start, Span& found) const;

  struct Compiled;
  Compiled* compiled_;
};

// The PCRE2 pattern with Oniguruma's meaning of `pattern`; exposed for tests.
std::string oniguruma_to_pcre2(std::string_view pattern);

}  // namespace studio::data::detail
