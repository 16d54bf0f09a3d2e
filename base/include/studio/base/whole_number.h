#pragma once
// Whole numbers from files other programs write (JSON, YAML), checked against the range of what
// they are read into before they are narrowed: nlohmann's get<int>() cuts 4294967299 to 3
// (4294967296 to 0), and a double holds whole numbers exactly only up to 2^53. Each reader
// returns "" with `out` set, or what is wrong with the value as written:
// "expected a whole number, got 2.5", "4294967299 is too large (at most 3)".
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#include <nlohmann/json_fwd.hpp>

namespace studio {

struct WholeRange {
  int64_t lo = std::numeric_limits<int64_t>::min();
  int64_t hi = std::numeric_limits<int64_t>::max();

  // Everything T holds (T: a signed type, or an unsigned one narrower than 64 bits).
  template <typename T>
  static constexpr WholeRange of() {
    static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
    static_assert(std::is_signed_v<T> || sizeof(T) < sizeof(int64_t));
    return {static_cast<int64_t>(std::numeric_limits<T>::min()),
            static_cast<int64_t>(std::numeric_limits<T>::max())};
  }
};

namespace detail {
std::string json_whole(const nlohmann::json& v, WholeRange range, int64_t& out);
}  // namespace detail

// Parses "5e-5", "1.0e-5", ".5", "3" strictly (the whole text, blanks around it and YAML 1.1's
// '_' aside, must be a finite number).
bool parse_double(std::string_view text, double& out);

// Text: decimal digits exactly ("-12", "+7", YAML 1.1's "1_000"), or a number with a fraction or
// an exponent whose value is whole ("1e3", "2.0").
std::string parse_whole(std::string_view text, WholeRange range, int64_t& out);

// A JSON number whose value is whole (3, and a float such as 3.0 or 1e3).
template <typename T>
std::string json_whole(const nlohmann::json& v, T& out, WholeRange range = WholeRange::of<T>()) {
  const WholeRange type = WholeRange::of<T>();
  if (range.lo < type.lo) range.lo = type.lo;
  if (range.hi > type.hi) range.hi = type.hi;
  int64_t x = 0;
  std::string problem = detail::json_whole(v, range, x);
  if (problem.empty()) out = static_cast<T>(x);
  return problem;
}

}  // namespace studio
