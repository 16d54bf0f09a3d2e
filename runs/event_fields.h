#pragma once
// Tolerant typed access to the fields of a JSON object, shared by the readers of events.jsonl,
// status.json (events.cpp) and LLaMA-Factory's trainer_log.jsonl (trainer_log.cpp). Private to
// studio_run_contract.
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "studio/runs/events.h"
#include "studio/base/json_file.h"

namespace studio::event_fields {

using json = nlohmann::json;

// One line of JSON, NaN, Infinity and -Infinity included (json_file.h); false with
// "invalid JSON at column C: ..." otherwise.
inline bool parse_json_line(std::string_view line, json& out, std::string& error) {
  JsonSyntaxError syntax;
  if (parse_json_text(line, out, syntax)) return true;
  error = "invalid JSON at column " + std::to_string(syntax.column) + ": " + syntax.what;
  return false;
}

[[noreturn]] inline void fail(const std::string& field, const char* expected, const json& got) {
  throw EventFormatError("field '" + field + "': expected " + expected + ", got " +
                         got.type_name());
}

// Accepts integral floats too (1e3, 5.0): other writers of the format may not have integers.
inline bool to_int64(const json& v, std::int64_t& out) {
  if (v.is_number_unsigned()) {
    auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return false;
    out = static_cast<std::int64_t>(u);
    return true;
  }
  if (v.is_number_integer()) {
    out = v.get<std::int64_t>();
    return true;
  }
  if (!v.is_number_float()) return false;
  double d = v.get<double>();
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || d != std::trunc(d)) {
    return false;
  }
  out = static_cast<std::int64_t>(d);
  return true;
}

inline std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

inline std::string trimmed(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// A number written as text: "1.5", "2e-5", "NaN", "Infinity", "-inf". Only the whole string.
inline std::optional<double> number_in_text(const std::string& text) {
  const std::string t = trimmed(text);
  if (t.empty()) return std::nullopt;
  const std::string l = lower(t);
  if (l == "nan" || l == "+nan" || l == "-nan") return kNoValue;
  if (l == "inf" || l == "+inf" || l == "infinity" || l == "+infinity")
    return std::numeric_limits<double>::infinity();
  if (l == "-inf" || l == "-infinity") return -std::numeric_limits<double>::infinity();
  if (l.find_first_not_of("0123456789+-.e") != std::string::npos) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const double d = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || errno == ERANGE) return std::nullopt;
  return d;
}

// An integer written as text: "12", "-3", "5.0".
inline std::optional<std::int64_t> integer_in_text(const std::string& text) {
  const auto d = number_in_text(text);
  std::int64_t out = 0;
  if (!d || !std::isfinite(*d) || !to_int64(json(*d), out)) return std::nullopt;
  return out;
}

// A device written as a name: "cuda:3", "gpu:1" -> the index; "cpu" -> -1 (a CPU run's ranks).
inline std::optional<std::int64_t> device_in_text(const std::string& text) {
  const std::string l = lower(trimmed(text));
  if (l == "cpu") return -1;
  const auto colon = l.find(':');
  if (colon == std::string::npos || colon == 0) return integer_in_text(l);
  if (l.compare(0, colon, "cuda") != 0 && l.compare(0, colon, "gpu") != 0) return std::nullopt;
  const std::string index = l.substr(colon + 1);
  if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return integer_in_text(index);
}

// How a value is shown in a message: its type, and the value itself when it is short.
inline std::string shown(const json& v) {
  std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  if (v.is_object() || v.is_array()) return std::string(v.type_name());
  return std::string(v.type_name()) + " " + text;
}

// Python's str(timedelta): "H:MM:SS", "H:MM:SS.ffffff", "D day, H:MM:SS", "D days, H:MM:SS".
inline std::optional<double> duration_in_text(const std::string& text) {
  std::string t = trimmed(text);
  double days = 0;
  if (const auto comma = t.find(','); comma != std::string::npos) {
    const std::string head = trimmed(t.substr(0, comma));
    const auto space = head.find(' ');
    if (space == std::string::npos) return std::nullopt;
    const std::string unit = head.substr(space + 1);
    if (unit != "day" && unit != "days") return std::nullopt;
    const auto n = number_in_text(head.substr(0, space));
    if (!n || !std::isfinite(*n)) return std::nullopt;
    days = *n;
    t = trimmed(t.substr(comma + 1));
  }
  const auto c1 = t.find(':'), c2 = c1 == std::string::npos ? c1 : t.find(':', c1 + 1);
  if (c2 == std::string::npos) return std::nullopt;
  const auto h = number_in_text(t.substr(0, c1));
  const auto m = number_in_text(t.substr(c1 + 1, c2 - c1 - 1));
  const auto s = number_in_text(t.substr(c2 + 1));
  if (!h || !m || !s || !std::isfinite(*h) || !std::isfinite(*m) || !std::isfinite(*s) ||
      *h < 0 || *m < 0 || *m >= 60 || *s < 0 || *s >= 60)
    return std::nullopt;
  return days * 86400 + *h * 3600 + *m * 60 + *s;
}

inline std::string number_text(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return json(d).dump();
}

using Issues = std::vector<FieldIssue>;

// Typed access to the fields of one JSON object. `prefix` locates nested objects in messages
// ("gpus[1]."). Absent fields leave the target alone. A field of the wrong type throws
// EventFormatError when `issues` is null (strict: from_json); otherwise it is converted when
// the intent is unambiguous or dropped (the target keeps its value), and listed in `issues`.
class Fields {
 public:
  Fields(const json& j, std::string prefix, Issues* issues = nullptr)
      : j_(j), prefix_(std::move(prefix)), issues_(issues) {
    if (!j_.is_object()) {
      if (prefix_.empty()) {
        throw EventFormatError(std::string("expected a JSON object, got ") + j_.type_name());
      }
      fail(prefix_.substr(0, prefix_.size() - 1), "an object", j_);
    }
  }

  const json* find(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() ? nullptr : &*it;
  }
  std::string name(const char* key) const { return prefix_ + key; }
  Issues* issues() const { return issues_; }

  void require(const char* key) const {
    if (!find(key)) throw EventFormatError("missing field '" + name(key) + "'");
  }
  // A field that must be read for the object to mean anything (a step's `step`): wrong types
  // are converted when unambiguous and throw otherwise, also when tolerant.
  void get_required(const char* key, std::int64_t& out) const {
    require(key);
    const json* v = find(key);
    if (to_int64(*v, out)) return;
    if (issues_ && v->is_string()) {
      if (const auto n = integer_in_text(v->get<std::string>())) {
        out = *n;
        report(key, "an integer", *v, std::to_string(*n));
        return;
      }
    }
    fail(name(key), "an integer", *v);
  }

  void get(const char* key, double& out) const {
    const json* v = find(key);
    if (!v) return;
    if (v->is_null()) {
      out = kNoValue;  // NaN and infinity are written as null
    } else if (v->is_number()) {
      out = v->get<double>();
    } else if (const auto d = v->is_string() && issues_ ? number_in_text(v->get<std::string>())
                                                       : std::nullopt) {
      out = *d;
      report(key, "a number", *v, number_text(*d));
    } else {
      wrong(key, "a number", *v);
    }
  }
  // A step's value, which a diverged run writes as NaN, Infinity or -Infinity (or the same as
  // text): read as above, and marked in step.not_finite when it was written so.
  void get(const char* key, double& out, StepEvent& step, StepValue bit) const {
    get(key, out);
    const json* v = find(key);
    if (v == nullptr) return;
    bool written = v->is_number_float() && !std::isfinite(v->get<double>());
    if (!written && v->is_string() && issues_) {
      const auto d = number_in_text(v->get<std::string>());
      written = d && !std::isfinite(*d);
    }
    if (written) step.set_not_finite(bit);
  }
  void get(const char* key, std::int64_t& out) const {
    const json* v = find(key);
    if (!v || to_int64(*v, out)) return;
    convert_text(key, "an integer", *v, integer_in_text, out);
  }
  void get(const char* key, int& out) const { get_int(key, out, "a 32-bit integer", integer_in_text); }
  // A device index: also "cuda:3" (3) and "cpu" (-1).
  void get_device(const char* key, int& out) const {
    get_int(key, out, "an integer device index", device_in_text);
  }
  void get(const char* key, std::string& out) const {
    const json* v = find(key);
    if (!v) return;
    if (v->is_string()) {
      out = v->get<std::string>();
    } else if (issues_ && (v->is_number() || v->is_boolean())) {
      out = v->dump();
      report(key, "a string", *v, "\"" + out + "\"");
    } else {
      wrong(key, "a string", *v);
    }
  }

  // A field that may be null or absent (nullopt); set only when read or converted.
  template <class T>
  void get_optional(const char* key, std::optional<T>& out) const {
    const json* v = find(key);
    if (!v || v->is_null()) return;
    T value{};
    const std::size_t before = issues_ ? issues_->size() : 0;
    get(key, value);
    const bool dropped = issues_ && issues_->size() > before && !issues_->back().converted();
    if (!dropped) out = value;
  }

  // A duration in seconds, written as Python's str(timedelta) writes one: "H:MM:SS",
  // "H:MM:SS.ffffff", "D day(s), H:MM:SS". A number is taken as seconds (converted).
  void get_duration(const char* key, double& out) const {
    const json* v = find(key);
    if (!v || v->is_null()) return;
    if (v->is_string()) {
      if (const auto d = duration_in_text(v->get<std::string>())) {
        out = *d;
        return;
      }
    } else if (v->is_number() && issues_) {
      out = v->get<double>();
      report(key, "a duration \"H:MM:SS\"", *v, number_text(out) + " s");
      return;
    }
    wrong(key, "a duration \"H:MM:SS\"", *v);
  }

  // A wrong type that cannot be read: thrown when strict, else reported as dropped.
  void wrong(const char* key, const char* expected, const json& v) const {
    if (!issues_) fail(name(key), expected, v);
    report(key, expected, v, "");
  }

 private:
  using TextReader = std::optional<std::int64_t> (*)(const std::string&);

  static bool fits_int(std::int64_t n) {
    return n >= std::numeric_limits<int>::min() && n <= std::numeric_limits<int>::max();
  }

  void get_int(const char* key, int& out, const char* expected, TextReader text) const {
    const json* v = find(key);
    if (!v) return;
    std::int64_t wide = 0;
    if (to_int64(*v, wide) && fits_int(wide)) {
      out = static_cast<int>(wide);
      return;
    }
    if (!convert_text(key, expected, *v, text, wide)) return;
    if (fits_int(wide))
      out = static_cast<int>(wide);
    else
      issues_->back().read_as.clear();  // read, but out of range: dropped after all
  }

  // A string holding the value: converted (and reported) when `text` reads it, else dropped.
  template <class T>
  bool convert_text(const char* key, const char* expected, const json& v, TextReader text,
                    T& out) const {
    if (issues_ && v.is_string()) {
      if (const auto n = text(v.get<std::string>())) {
        out = static_cast<T>(*n);
        report(key, expected, v, std::to_string(*n));
        return true;
      }
    }
    wrong(key, expected, v);
    return false;
  }

  void report(const char* key, const char* expected, const json& v, std::string read_as) const {
    issues_->push_back({name(key), std::string("expected ") + expected + ", got " + shown(v),
                        std::move(read_as)});
  }

  const json& j_;
  std::string prefix_;
  Issues* issues_;
};

}  // namespace studio::event_fields
