#include "studio/base/whole_number.h"

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>


namespace studio {
namespace {

std::string too_large(std::string_view written, WholeRange range) {
  return std::string(written) + " is too large (at most " + std::to_string(range.hi) + ")";
}

std::string too_small(std::string_view written, WholeRange range) {
  return std::string(written) + " is too small (at least " + std::to_string(range.lo) + ")";
}

std::string checked(int64_t v, WholeRange range, std::string_view written, int64_t& out) {
  if (v > range.hi) return too_large(written, range);
  if (v < range.lo) return too_small(written, range);
  out = v;
  return {};
}

std::string whole_double(double d, WholeRange range, std::string_view written, int64_t& out) {
  if (std::isnan(d) || d != std::floor(d))
    return "expected a whole number, got " + std::string(written);
  // 2^63: every double below it and at or above -2^63 converts to int64 exactly.
  constexpr double kLimit = 9223372036854775808.0;
  if (d >= kLimit) return too_large(written, range);
  if (d < -kLimit) return too_small(written, range);
  return checked(static_cast<int64_t>(d), range, written, out);
}

}  // namespace

std::string parse_whole(std::string_view text, WholeRange range, int64_t& out) {
  std::string s(text);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());  // YAML 1.1 allows 1_000
  const auto b = s.find_first_not_of(" \t\r\n");
  s = b == std::string::npos ? std::string() : s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
  std::string_view digits = s;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  const bool negative = !digits.empty() && digits.front() == '-';
  if (digits.size() > size_t(negative) &&
      digits.find_first_not_of("0123456789", negative) == std::string_view::npos) {
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec == std::errc::result_out_of_range)
      return negative ? too_small(s, range) : too_large(s, range);
    return checked(v, range, s, out);
  }
  double d = 0;
  if (!parse_double(s, d)) return "expected a whole number, got '" + std::string(text) + "'";
  return whole_double(d, range, s, out);
}

bool parse_double(std::string_view text, double& out) {
  std::size_t b = 0, e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
  std::string s(text.substr(b, e - b));
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());  // YAML 1.1 allows 1_000
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' ||
          c == '+' || c == '-'))
      return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v)) return false;
  out = v;
  return true;
}

namespace detail {

std::string json_whole(const nlohmann::json& v, WholeRange range, int64_t& out) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<int64_t>::max()))
      return too_large(v.dump(), range);
    return checked(static_cast<int64_t>(u), range, v.dump(), out);
  }
  if (v.is_number_integer()) return checked(v.get<std::int64_t>(), range, v.dump(), out);
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isinf(d)) return d > 0 ? too_large("Infinity", range) : too_small("-Infinity", range);
    return whole_double(d, range, std::isnan(d) ? "NaN" : v.dump(), out);
  }
  return std::string("expected a whole number, got ") + v.type_name();
}

}  // namespace detail
}  // namespace studio
