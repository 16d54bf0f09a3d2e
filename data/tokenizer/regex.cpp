#include "regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>
#include <stdexcept>

#include "unicode.h"

namespace studio::data::detail {

namespace {

// Class bodies with Oniguruma's Unicode meaning, usable inside [...] and [^...].
constexpr std::string_view kSpaceBody = R"(\t\n\x0B\f\r\x{85}\p{Zs}\x{2028}\x{2029})";
// Oniguruma's \w is Alphabetic, marks, decimal digits and connectors, plus the Latin-1
// superscripts and fractions its single-byte table calls word characters.
constexpr std::string_view kWordBody =
    R"(\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{B2}\x{B3}\x{B9}\x{BC}-\x{BE})";
constexpr std::string_view kHexBody = "0-9a-fA-F";

std::string_view class_body(char escape) {
  switch (escape) {
    case 's':
    case 'S':
      return kSpaceBody;
    case 'w':
    case 'W':
      return kWordBody;
    case 'h':
    case 'H':
      return kHexBody;
    default:
      return {};
  }
}

// Per-thread match state: PCRE2 match data is not shareable, and a JIT stack larger than the
// default 32 KiB keeps long whitespace or letter runs from failing with a stack limit.
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  MatchScratch() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~MatchScratch() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

MatchScratch& scratch() {
  thread_local MatchScratch instance;
  return instance;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

// Whether PCRE2 knows `name` as a script. Oniguruma's \p{Han} is the Script property, while
// PCRE2 10.40+ reads a bare script name as Script_Extensions (which adds 、。 etc. to Han).
bool is_script_name(std::string_view name) {
  const std::string probe = "\\p{sc:" + std::string(name) + "}";
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(probe.data()), probe.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  pcre2_code_free(code);
  return code != nullptr;
}

// Copies a \p{...} or \P{...} property starting at pattern[i] (the 'p'), naming scripts
// through sc:, and returns the index of its closing brace.
std::size_t copy_property(std::string_view pattern, std::size_t i, std::string& out) {
  const std::size_t close = pattern.find('}', i);
  if (pattern.substr(i + 1, 1) != "{" || close == std::string_view::npos) {
    out += pattern[i];
    return i;
  }
  std::string_view name = pattern.substr(i + 2, close - i - 2);
  out += pattern[i];
  out += '{';
  if (!name.empty() && name.front() == '^') {
    out += '^';
    name.remove_prefix(1);
  }
  if (name.find(':') == std::string_view::npos && is_script_name(name)) out += "sc:";
  out.append(name);
  out += '}';
  return close;
}

}  // namespace

std::string oniguruma_to_pcre2(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 32);
  bool in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char escape = pattern[++i];
      if (escape == 'p' || escape == 'P') {
        out += c;
        i = copy_property(pattern, i, out);
        continue;
      }
      const std::string_view body = class_body(escape);
      const bool negated = escape >= 'A' && escape <= 'Z';
      if (body.empty() || (in_class && negated)) {
        // Other escapes mean the same in both; a negated class escape inside [...] has no
        // class-body form and keeps PCRE2's meaning.
        out += c;
        out += escape;
      } else if (in_class) {
        out += body;
      } else {
        out += negated ? "[^" : "[";
        out += body;
        out += ']';
      }
    } else if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];  // literal ]
    } else if (c == '[' && in_class && pattern.substr(i, 2) == "[:") {
      const std::size_t end = pattern.find(":]", i + 2);
      if (end == std::string_view::npos) throw std::invalid_argument("unterminated POSIX class");
      out.append(pattern.substr(i, end + 2 - i));
      i = end + 1;
    } else if (in_class && (c == '[' || pattern.substr(i, 2) == "&&")) {
      throw std::invalid_argument(
          "nested character classes and class intersection (&&) are not supported");
    } else {
      if (c == ']' && in_class) in_class = false;
      out += c;
    }
  }
  return out;
}

struct Regex::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
};

Regex::Regex(std::string_view pattern, Syntax syntax) : compiled_(new Compiled) {
  std::unique_ptr<Compiled> guard(compiled_);
  const std::string source =
      syntax == Syntax::Literal ? std::string(pattern) : oniguruma_to_pcre2(pattern);
  const uint32_t options = syntax == Syntax::Literal ? (PCRE2_LITERAL | PCRE2_UTF)
                                                     : (PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE);
  int error = 0;
  PCRE2_SIZE offset = 0;
  compiled_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(),
                                  options, &error, &offset, nullptr);
  if (compiled_->code == nullptr) {
    throw std::invalid_argument(pcre2_message(error) + " (at offset " + std::to_string(offset) +
                                " of the PCRE2 form '" + source + "')");
  }
  compiled_->jit = pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE) == 0;
  guard.release();
}

Regex::~Regex() {
  pcre2_code_free(compiled_->code);
  delete compiled_;
}

bool Regex::match_at(std::string_view text, std::size_t start, Span& found) const {
  MatchScratch& s = scratch();
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const int rc = compiled_->jit ? pcre2_jit_match(compiled_->code, subject, text.size(), start, 0,
                                                  s.data, s.context)
                                : pcre2_match(compiled_->code, subject, text.size(), start,
                                              PCRE2_NO_UTF_CHECK, s.data, s.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  // rc == 0 only says the one-pair ovector had no room for capture groups; the match is there.
  if (rc < 0) throw std::runtime_error("regular expression match failed: " + pcre2_message(rc));
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(s.data);
  found = {ovector[0], ovector[1]};
  return true;
}

void Regex::find_all(std::string_view text, std::vector<Span>& out) const {
  std::size_t search_from = 0;
  bool have_previous = false;
  std::size_t previous_end = 0;
  Span found;
  while (search_from <= text.size() && match_at(text, search_from, found)) {
    if (found.first == found.second && have_previous && previous_end == found.second) {
      if (search_from == text.size()) break;
      search_from += utf8_length(static_cast<unsigned char>(text[search_from]));
      continue;
    }
    out.push_back(found);
    have_previous = true;
    previous_end = found.second;
    search_from = found.second;
  }
}

}  // namespace studio::data::detail
