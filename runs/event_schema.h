#pragma once
// The fields of each event of events.jsonl, of status.json and of a reader's EventCursor: one
// table per type (visit_fields) listing key -> member, in the order they are read, with what
// the writer does with a value the run does not know. The same table drives the tolerant reader
// (read_fields, on the Fields of event_fields.h) and the writer (written), so adding a field is
// adding its line. nlohmann::json keeps keys sorted: the order written is not the table's.
// Private to studio_run_contract.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "event_fields.h"
#include "studio/runs/events.h"

namespace studio::event_fields {

// What the writer does with a value the run does not know: a NaN double (one a diverged step
// wrote as NaN or infinity is known: see diverging), an integer of 0 or less, "", nullopt.
enum class Unknown : std::uint8_t {
  Written,              // written as it is (NaN as NaN, 0 as 0)
  Null,                 // written as null
  Omitted,              // not written
  OmittedUnlessFinite,  // doubles: not written, nor when infinite
};

struct FieldOptions {
  Unknown unknown = Unknown::Written;
  StepValue diverges{};  // a step value: its bit in StepEvent::not_finite (none: 0)
  bool required = false;  // an integer without which the object means nothing (a step's step)
  bool device = false;    // a device index, also read from "cuda:3" and "cpu" (-1)
  const char* written_with = nullptr;  // written only when this field (listed before) was

  constexpr FieldOptions only_with(const char* key) const {
    FieldOptions o = *this;
    o.written_with = key;
    return o;
  }
};

inline constexpr FieldOptions kNullWhenUnknown{Unknown::Null};
inline constexpr FieldOptions kOmittedWhenUnknown{Unknown::Omitted};
inline constexpr FieldOptions kOmittedUnlessFinite{Unknown::OmittedUnlessFinite};
inline constexpr FieldOptions kRequired{Unknown::Written, StepValue{}, true};
inline constexpr FieldOptions kDevice{Unknown::Written, StepValue{}, false, true};
// A step's value that a diverged run writes as NaN, Infinity or -Infinity: read with its bit,
// written so when it has the bit, and as `unknown` when it is NaN without it.
constexpr FieldOptions diverging(StepValue bit, Unknown unknown = Unknown::Null) {
  return {unknown, bit};
}

// A table for T, called with E = T by the reader and E = const T by the writer.
template <class E, class T>
using TableOf = std::enable_if_t<std::is_same_v<std::remove_const_t<E>, T>>;

template <class V, class E>
TableOf<E, ModelSummary> visit_fields(V& v, E& e) {
  v("architecture", e.architecture);
  v("parameters", e.parameters);
  v("trainable_parameters", e.trainable_parameters);
  v("layers", e.layers);
  v("hidden_size", e.hidden_size);
  v("heads", e.heads);
  v("kv_heads", e.kv_heads);
  v("vocab_size", e.vocab_size);
}

template <class V, class E>
TableOf<E, GpuMemory> visit_fields(V& v, E& e) {
  v("rank", e.rank);
  v("device", e.device, kDevice);
  v("allocated_mib", e.allocated_mib, kNullWhenUnknown);
  v("reserved_mib", e.reserved_mib, kNullWhenUnknown);
  v("peak_mib", e.peak_mib, kNullWhenUnknown);
  v("total_mib", e.total_mib, kNullWhenUnknown);
  v("model_states_mib", e.model_states_mib, kOmittedUnlessFinite);
  v("offloaded_mib", e.offloaded_mib, kOmittedUnlessFinite);
  v("util_percent", e.util_percent, kOmittedUnlessFinite);
  v("power_w", e.power_w, kOmittedUnlessFinite);
  v("power_limit_w", e.power_limit_w, kOmittedUnlessFinite);
}

template <class V, class E>
TableOf<E, RankTime> visit_fields(V& v, E& e) {
  v("rank", e.rank);
  v("compute_s", e.compute_s, kNullWhenUnknown);
  v("sp_comm_s", e.sp_comm_s, kNullWhenUnknown);
  v("grad_comm_s", e.grad_comm_s, kNullWhenUnknown);
  v("data_s", e.data_s, kNullWhenUnknown);
  v("wait_s", e.wait_s, kNullWhenUnknown);
}

template <class V, class E>
TableOf<E, StartEvent> visit_fields(V& v, E& e) {
  v.event(EventKind::Start);
  v("time", e.time, kNullWhenUnknown);
  v("config", e.config);  // an object, kept as it is
  v("world_size", e.world_size);
  v("sequence_parallel_size", e.sequence_parallel_size);
  v("sequence_parallel_mode", e.sequence_parallel_mode);
  v("stage", e.stage);
  v("model", e.model);
  v("total_steps", e.total_steps, kOmittedWhenUnknown);
  v("device_name", e.device_name, kOmittedWhenUnknown);
  v("peak_tflops", e.peak_tflops, kNullWhenUnknown);
}

// The preference metrics sit flat in the step (and eval) object, under the names TRL and
// LLaMA-Factory log them with.
template <class V, class E>
TableOf<E, DpoMetrics> visit_fields(V& v, E& e) {
  v("rewards/chosen", e.rewards_chosen, diverging(StepValue::RewardsChosen));
  v("rewards/rejected", e.rewards_rejected, diverging(StepValue::RewardsRejected));
  v("rewards/accuracies", e.rewards_accuracies, diverging(StepValue::RewardsAccuracies));
  v("rewards/margins", e.rewards_margins, diverging(StepValue::RewardsMargins));
  v("logps/chosen", e.logps_chosen, diverging(StepValue::LogpsChosen));
  v("logps/rejected", e.logps_rejected, diverging(StepValue::LogpsRejected));
  v("kl", e.kl, diverging(StepValue::Kl, Unknown::Omitted));  // stage kto only
  v("sft_loss", e.sft_loss, diverging(StepValue::SftLoss, Unknown::Omitted));  // orpo only
  v("odds_ratio_loss", e.odds_ratio_loss, diverging(StepValue::OddsRatioLoss, Unknown::Omitted));
}

template <class V, class E>
TableOf<E, StepEvent> visit_fields(V& v, E& e) {
  v.event(EventKind::Step);
  v("step", e.step, kRequired);
  v("epoch", e.epoch, kNullWhenUnknown);
  v("loss", e.loss, diverging(StepValue::Loss));
  v("lr", e.lr, diverging(StepValue::Lr));
  v("grad_norm", e.grad_norm, diverging(StepValue::GradNorm));
  v("tokens", e.tokens);
  v("tokens_per_sec", e.tokens_per_sec, diverging(StepValue::TokensPerSec));
  v("elapsed", e.elapsed, kNullWhenUnknown);
  v("time", e.time, kNullWhenUnknown);
  v("model_tflops", e.model_tflops, diverging(StepValue::ModelTflops, Unknown::Omitted));
  // null when the peak is not known
  v("mfu", e.mfu, diverging(StepValue::Mfu).only_with("model_tflops"));
  v("total_steps", e.total_steps, kOmittedWhenUnknown);
  v("gpus", e.gpus);
  v("rank_times", e.rank_times, kOmittedWhenUnknown);
  v("rss_mib", e.rss_mib, kOmittedWhenUnknown);
  v("peak_rss_mib", e.peak_rss_mib, kOmittedWhenUnknown);
  v("aux_loss", e.aux_loss, diverging(StepValue::AuxLoss, Unknown::Omitted));
  v.flat(e.dpo);  // read as present when any of its keys is
}

template <class V, class E>
TableOf<E, EvalEvent> visit_fields(V& v, E& e) {
  v.event(EventKind::Eval);
  v("step", e.step, kRequired);
  v("loss", e.loss);
  v.flat(e.dpo);  // preference stages; read as present when any of its keys is
}

template <class V, class E>
TableOf<E, CheckpointEvent> visit_fields(V& v, E& e) {
  v.event(EventKind::Checkpoint);
  v("step", e.step, kRequired);
  v("path", e.path);
}

template <class V, class E>
TableOf<E, LogEvent> visit_fields(V& v, E& e) {
  v.event(EventKind::Log);
  v("level", e.level);
  v("rank", e.rank);
  v("message", e.message);
}

template <class V, class E>
TableOf<E, EndEvent> visit_fields(V& v, E& e) {
  v.event(EventKind::End);
  v("state", e.state);
  v("reason", e.reason);
}

template <class V, class E>
TableOf<E, RestartEvent> visit_fields(V& v, E& e) {
  v.event(EventKind::Restart);
  v("time", e.time, kNullWhenUnknown);
  v("attempt", e.attempt, kRequired);
  v("max_restarts", e.max_restarts);
  v("failed_rank", e.failed_rank);
  v("reason", e.reason);
  v("resume_from", e.resume_from);
  v("step", e.step);
}

template <class V, class E>
TableOf<E, RunStatus> visit_fields(V& v, E& e) {
  v("state", e.state);  // required, and one of the states, even when tolerant
  v("pid", e.pid);
  v("host", e.host);
  v("exit_code", e.exit_code, kNullWhenUnknown);
  v("reason", e.reason);
  v("updated", e.updated);
  v("step", e.step, kOmittedWhenUnknown);
}

template <class V, class E>
TableOf<E, EventCursor> visit_fields(V& v, E& e) {
  v("offset", e.offset);
  v("line", e.line);
  v("device", e.device);
  v("inode", e.inode);
}

// --- the reader and the writer the tables drive ----------------------------------------------

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};

template <class T>
void read_fields(const json& j, const std::string& prefix, T& out, Issues* issues);

// Reads each field of a table through Fields: absent fields keep the member's default, a field
// of the wrong type throws (strict) or is converted or dropped and listed (tolerant).
class FieldReader {
 public:
  FieldReader(const Fields& f, StepEvent* step) : f_(f), step_(step) {}

  void event(EventKind) {}  // "event" is read by the line's parser

  template <class T>
  void operator()(const char* key, T& out, FieldOptions o = {}) {
    const json* v = f_.find(key);
    if (v) found_ = true;
    if constexpr (std::is_same_v<T, double>) {
      if (o.diverges != StepValue{} && step_)
        f_.get(key, out, *step_, o.diverges);
      else
        f_.get(key, out);
    } else if constexpr (std::is_same_v<T, std::int64_t>) {
      if (o.required)
        f_.get_required(key, out);
      else
        f_.get(key, out);
    } else if constexpr (std::is_same_v<T, int>) {
      if (o.device)
        f_.get_device(key, out);
      else
        f_.get(key, out);
    } else if constexpr (std::is_same_v<T, std::uint64_t>) {
      read_count(key, out);
    } else if constexpr (std::is_same_v<T, std::string>) {
      f_.get(key, out);
    } else if constexpr (std::is_same_v<T, RunState>) {
      read_state(key, out);
    } else if constexpr (is_optional<T>::value) {
      f_.get_optional(key, out);
    } else if constexpr (is_vector<T>::value) {
      if (v) read_list(key, *v, out);
    } else if (v && !v->is_object()) {
      f_.wrong(key, "an object", *v);
    } else if (v) {
      if constexpr (std::is_same_v<T, json>)
        out = *v;  // kept as written
      else  // a nested object with a table of its own
        read_fields(*v, f_.name(key) + ".", out, f_.issues());
    }
  }

  // An optional struct whose fields sit in this object: present when any of them is.
  template <class T>
  void flat(std::optional<T>& out) {
    T value{};
    FieldReader fields(f_, step_);
    visit_fields(fields, value);
    if (fields.found_) out = value;
  }

 private:
  // A list of objects: one of a wrong type costs that element (strict: throws).
  template <class T>
  void read_list(const char* key, const json& list, std::vector<T>& out) const {
    if (!list.is_array()) {
      f_.wrong(key, "an array", list);
      return;
    }
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string where = std::string(key) + "[" + std::to_string(i) + "]";
      if (list[i].is_object())
        read_fields(list[i], f_.name(where.c_str()) + ".", out.emplace_back(), f_.issues());
      else
        f_.wrong(where.c_str(), "an object", list[i]);
    }
  }

  void read_count(const char* key, std::uint64_t& out) const {
    std::int64_t n = 0;
    f_.get(key, n);
    if (n >= 0)
      out = static_cast<std::uint64_t>(n);
    else
      f_.wrong(key, "a non-negative integer", *f_.find(key));
  }

  void read_state(const char* key, RunState& out) const {
    f_.require(key);
    const json& state = *f_.find(key);
    if (!state.is_string()) fail(f_.name(key), "a string", state);
    if (!parse_run_state(state.get<std::string>(), out)) {
      throw EventFormatError("field '" + f_.name(key) +
                             "': expected one of running|finished|failed|stopped, got \"" +
                             state.get<std::string>() + "\"");
    }
  }

  const Fields& f_;
  StepEvent* step_;     // the step whose not_finite bits diverging values set; null for others
  bool found_ = false;  // any field of the table was there
};

// `out` reset and read from the object `j`; `prefix` locates it in messages ("gpus[1].").
template <class T>
void read_fields(const json& j, const std::string& prefix, T& out, Issues* issues) {
  out = T{};
  const Fields f(j, prefix, issues);
  StepEvent* step = nullptr;
  if constexpr (std::is_same_v<T, StepEvent>) step = &out;
  FieldReader reader(f, step);
  visit_fields(reader, out);
}

template <class T>
json written(const T& v);

// Writes each field of a table into one object, as the table's options say.
class FieldWriter {
 public:
  FieldWriter(json& j, std::uint32_t not_finite) : j_(j), not_finite_(not_finite) {}

  void event(EventKind kind) { j_["event"] = event_kind_name(kind); }

  template <class T>
  void operator()(const char* key, const T& v, FieldOptions o = {}) {
    if (o.written_with && !j_.contains(o.written_with)) return;
    if constexpr (std::is_same_v<T, double>) {
      const bool diverged = (not_finite_ & static_cast<std::uint32_t>(o.diverges)) != 0;
      put(key, v, o.unknown == Unknown::OmittedUnlessFinite ? !std::isfinite(v)
                                                            : std::isnan(v) && !diverged,
          o);
    } else if constexpr (std::is_integral_v<T>) {
      put(key, v, !(v > 0), o);
    } else if constexpr (std::is_same_v<T, std::string>) {
      put(key, v, v.empty(), o);
    } else if constexpr (std::is_same_v<T, RunState>) {
      j_[key] = run_state_name(v);
    } else if constexpr (is_optional<T>::value) {
      put(key, v ? json(*v) : json(nullptr), !v, o);
    } else if constexpr (std::is_same_v<T, json>) {
      j_[key] = v;
    } else if constexpr (is_vector<T>::value) {
      if (v.empty() && o.unknown == Unknown::Omitted) return;
      json list = json::array();
      for (const auto& item : v) list.push_back(written(item));
      j_[key] = std::move(list);
    } else {
      j_[key] = written(v);
    }
  }

  template <class T>
  void flat(const std::optional<T>& v) {
    if (v) visit_fields(*this, *v);
  }

 private:
  template <class T>
  void put(const char* key, const T& v, bool unknown, FieldOptions o) {
    if (!unknown || o.unknown == Unknown::Written)
      j_[key] = v;
    else if (o.unknown == Unknown::Null)
      j_[key] = nullptr;
  }

  json& j_;
  std::uint32_t not_finite_;  // a step's StepEvent::not_finite; 0 for others
};

// The object the table of T writes for `v` ("event" included for events).
template <class T>
json written(const T& v) {
  json j = json::object();
  std::uint32_t not_finite = 0;
  if constexpr (std::is_same_v<T, StepEvent>) not_finite = v.not_finite;
  FieldWriter writer(j, not_finite);
  visit_fields(writer, v);
  return j;
}

}  // namespace studio::event_fields
