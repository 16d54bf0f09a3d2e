#include "studio/runs/events.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "studio/config/atomic_file.h"
#include "studio/config/json_file.h"
#include "event_fields.h"

namespace studio {
namespace {

using json = nlohmann::json;
using namespace event_fields;

std::string sys_error(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

std::string join_path(const std::string& dir, const char* name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + '/' + name;
}



void read_model(const json& j, const std::string& prefix, ModelSummary& v, Issues* issues) {
  v = ModelSummary{};
  Fields f(j, prefix, issues);
  f.get("architecture", v.architecture);
  f.get("parameters", v.parameters);
  f.get("layers", v.layers);
  f.get("hidden_size", v.hidden_size);
  f.get("heads", v.heads);
  f.get("kv_heads", v.kv_heads);
  f.get("vocab_size", v.vocab_size);
}

void read_gpu(const json& j, const std::string& prefix, GpuMemory& v, Issues* issues) {
  v = GpuMemory{};
  Fields f(j, prefix, issues);
  f.get("rank", v.rank);
  f.get_device("device", v.device);
  f.get("allocated_mib", v.allocated_mib);
  f.get("reserved_mib", v.reserved_mib);
  f.get("peak_mib", v.peak_mib);
  f.get("total_mib", v.total_mib);
  f.get("model_states_mib", v.model_states_mib);
  f.get("offloaded_mib", v.offloaded_mib);
  f.get("util_percent", v.util_percent);
  f.get("power_w", v.power_w);
  f.get("power_limit_w", v.power_limit_w);
}

// The DPO metrics sit flat in the step object under the names TRL logs them with.
struct DpoField {
  const char* key;
  double DpoMetrics::*member;
  StepValue bit;
};
constexpr DpoField kDpoFields[] = {
    {"rewards/chosen", &DpoMetrics::rewards_chosen, StepValue::RewardsChosen},
    {"rewards/rejected", &DpoMetrics::rewards_rejected, StepValue::RewardsRejected},
    {"rewards/accuracies", &DpoMetrics::rewards_accuracies, StepValue::RewardsAccuracies},
    {"rewards/margins", &DpoMetrics::rewards_margins, StepValue::RewardsMargins},
    {"logps/chosen", &DpoMetrics::logps_chosen, StepValue::LogpsChosen},
    {"logps/rejected", &DpoMetrics::logps_rejected, StepValue::LogpsRejected},
};

void read_dpo(const Fields& f, StepEvent& step) {
  for (const DpoField& d : kDpoFields) {
    if (!f.find(d.key)) continue;
    if (!step.dpo) step.dpo.emplace();
    f.get(d.key, (*step.dpo).*d.member, step, d.bit);
  }
}

// A nested object or array of a wrong type costs the field (strict: throws).
std::vector<GpuMemory> read_gpus(const Fields& f) {
  const json* g = f.find("gpus");
  if (!g) return {};
  if (!g->is_array()) {
    f.wrong("gpus", "an array", *g);
    return {};
  }
  std::vector<GpuMemory> gpus;
  for (std::size_t i = 0; i < g->size(); ++i) {
    const std::string where = "gpus[" + std::to_string(i) + "]";
    if (!(*g)[i].is_object()) {
      f.wrong(where.c_str(), "an object", (*g)[i]);
      continue;
    }
    read_gpu((*g)[i], where + ".", gpus.emplace_back(), f.issues());
  }
  return gpus;
}

void read_start(const json& j, StartEvent& v, Issues* issues) {
  v = StartEvent{};
  Fields f(j, "", issues);
  f.get("time", v.time);
  if (const json* c = f.find("config")) {
    if (c->is_object())
      v.config = *c;
    else
      f.wrong("config", "an object", *c);
  }
  f.get("world_size", v.world_size);
  f.get("sequence_parallel_size", v.sequence_parallel_size);
  f.get("sequence_parallel_mode", v.sequence_parallel_mode);
  f.get("stage", v.stage);
  if (const json* m = f.find("model")) {
    if (m->is_object())
      read_model(*m, "model.", v.model, issues);
    else
      f.wrong("model", "an object", *m);
  }
  f.get("total_steps", v.total_steps);
  f.get("device_name", v.device_name);
  f.get("peak_tflops", v.peak_tflops);
}

void read_step(const json& j, StepEvent& v, Issues* issues) {
  v = StepEvent{};
  Fields f(j, "", issues);
  f.get_required("step", v.step);
  f.get("epoch", v.epoch);
  f.get("loss", v.loss, v, StepValue::Loss);
  f.get("lr", v.lr, v, StepValue::Lr);
  f.get("grad_norm", v.grad_norm, v, StepValue::GradNorm);
  f.get("tokens", v.tokens);
  f.get("tokens_per_sec", v.tokens_per_sec, v, StepValue::TokensPerSec);
  f.get("elapsed", v.elapsed);
  f.get("time", v.time);
  f.get("model_tflops", v.model_tflops, v, StepValue::ModelTflops);
  f.get("mfu", v.mfu, v, StepValue::Mfu);
  f.get("total_steps", v.total_steps);
  v.gpus = read_gpus(f);
  f.get("rss_mib", v.rss_mib);
  f.get("peak_rss_mib", v.peak_rss_mib);
  f.get("aux_loss", v.aux_loss, v, StepValue::AuxLoss);
  read_dpo(f, v);
}

void read_eval(const json& j, EvalEvent& v, Issues* issues) {
  v = EvalEvent{};
  Fields f(j, "", issues);
  f.get_required("step", v.step);
  f.get("loss", v.loss);
}

void read_checkpoint(const json& j, CheckpointEvent& v, Issues* issues) {
  v = CheckpointEvent{};
  Fields f(j, "", issues);
  f.get_required("step", v.step);
  f.get("path", v.path);
}

void read_log(const json& j, LogEvent& v, Issues* issues) {
  v = LogEvent{};
  Fields f(j, "", issues);
  f.get("level", v.level);
  f.get("rank", v.rank);
  f.get("message", v.message);
}

void read_end(const json& j, EndEvent& v, Issues* issues) {
  v = EndEvent{};
  Fields f(j, "", issues);
  f.get("state", v.state);
  f.get("reason", v.reason);
}

void read_status(const json& j, RunStatus& v, Issues* issues) {
  v = RunStatus{};
  Fields f(j, "", issues);
  f.require("state");
  const json& state = *f.find("state");
  if (!state.is_string()) fail("state", "a string", state);
  if (!parse_run_state(state.get<std::string>(), v.state)) {
    throw EventFormatError("field 'state': expected one of running|finished|failed|stopped, got \"" +
                           state.get<std::string>() + "\"");
  }
  f.get("pid", v.pid);
  f.get("host", v.host);
  f.get_optional("exit_code", v.exit_code);
  f.get("reason", v.reason);
  f.get("updated", v.updated);
  f.get_optional("step", v.step);
}

template <class T>
T read_as(void (*read)(const json&, T&, Issues*), const json& j, Issues* issues) {
  T v;
  read(j, v, issues);
  return v;
}

EventPayload parse_payload(EventKind kind, const json& j, Issues* issues) {
  switch (kind) {
    case EventKind::Start:
      return read_as(read_start, j, issues);
    case EventKind::Step:
      return read_as(read_step, j, issues);
    case EventKind::Eval:
      return read_as(read_eval, j, issues);
    case EventKind::Checkpoint:
      return read_as(read_checkpoint, j, issues);
    case EventKind::Log:
      return read_as(read_log, j, issues);
    case EventKind::End:
      return read_as(read_end, j, issues);
    case EventKind::Unknown:
      break;
  }
  return std::monostate{};
}

// Checks the object and fills `out` from it; shared by the line parser and the writer, so the
// writer cannot produce a line the reader would call bad or have to repair.
bool parse_event_object(json j, Event& out, std::string& error) {
  if (!j.is_object()) {
    error = std::string("not a JSON object but ") + j.type_name();
    return false;
  }
  auto it = j.find("event");
  if (it == j.end() || !it->is_string()) {
    error = it == j.end() ? "no \"event\" field" : "\"event\" is not a string";
    return false;
  }
  std::string name = it->get<std::string>();
  EventKind kind = event_kind_from_name(name);
  Issues issues;
  try {
    out.payload = parse_payload(kind, j, &issues);
  } catch (const EventFormatError& e) {
    error = "\"" + name + "\" event: " + e.what();
    return false;
  } catch (const json::exception& e) {  // only if a check above has a gap
    error = "\"" + name + "\" event: " + json_error_text(e.what());
    return false;
  }
  out.kind = kind;
  out.raw = std::move(j);
  out.issues = std::move(issues);
  return true;
}

// "event" first so the file reads well in `tail -f`; the rest in nlohmann's key order.
// Invalid UTF-8 (a log message cut mid-character) is replaced rather than thrown on.
std::string serialize_event(const json& event) {
  constexpr auto kReplace = json::error_handler_t::replace;
  json rest = event;
  rest.erase("event");
  std::string body = dump_json_python(rest);
  std::string line = "{\"event\":" + event.at("event").dump(-1, ' ', false, kReplace);
  line += body.size() > 2 ? "," + body.substr(1) : "}";
  line += '\n';
  return line;
}

bool is_blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; });
}

}  // namespace

std::string events_path(const std::string& output_dir) {
  return join_path(output_dir, kEventsFileName);
}

LineFormat line_format_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name == kTrainerLogFileName) return LineFormat::TrainerLog;
  if (name == kTrainerStateFileName) return LineFormat::TrainerState;
  return LineFormat::Events;
}

namespace {

// "checkpoint-N" -> N; nullopt for any other name.
std::optional<std::int64_t> checkpoint_number(const std::string& name) {
  constexpr std::string_view kPrefix = "checkpoint-";
  if (name.size() <= kPrefix.size() || name.compare(0, kPrefix.size(), kPrefix) != 0)
    return std::nullopt;
  std::int64_t n = 0;
  for (std::size_t i = kPrefix.size(); i < name.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i])) || n > (INT64_MAX - 9) / 10)
      return std::nullopt;
    n = n * 10 + (name[i] - '0');
  }
  return n;
}

std::string base_name(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const auto slash = p.find_last_of('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string parent_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Whether the file holds a Hugging Face log_history (ours lacks it). Reads at most the first
// 64 KiB: HF writes the keys sorted, and log_history comes early; a file whose first 64 KiB do
// not name it is still taken when it is larger (the parse then says what is wrong).
bool has_log_history(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::string head(64 << 10, '\0');
  ssize_t n;
  do {
    n = ::pread(fd, head.data(), head.size(), 0);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return false;
  head.resize(static_cast<std::size_t>(n));
  return head.find("\"log_history\"") != std::string::npos ||
         static_cast<std::size_t>(n) == (std::size_t{64} << 10);
}

std::int64_t mtime_ns(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

}  // namespace

std::string newest_trainer_state(const std::string& dir) {
  std::string best;
  std::int64_t best_mtime = -1, best_n = -1;
  auto consider = [&](const std::string& file, std::int64_t n) {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
    const std::int64_t m = mtime_ns(st);
    if (m < best_mtime || (m == best_mtime && n <= best_n)) return;
    if (!has_log_history(file)) return;
    best = file;
    best_mtime = m;
    best_n = n;
  };
  // The end of training writes it last, after the final checkpoint: it is the newest then.
  consider(join_path(dir, kTrainerStateFileName), -1);
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* entry = ::readdir(d)) {
      const std::string name = entry->d_name;
      if (const auto n = checkpoint_number(name))
        consider(join_path(join_path(dir, name.c_str()), kTrainerStateFileName), *n);
    }
    ::closedir(d);
  }
  return best;
}

std::string run_folder_of(const std::string& events_file) {
  const std::string folder = parent_of(events_file);
  if (base_name(events_file) == kTrainerStateFileName && checkpoint_number(base_name(folder)))
    return parent_of(folder);
  return folder;
}

std::string run_events_file(const std::string& dir) {
  const std::string ours = join_path(dir, kEventsFileName);
  const std::string theirs = join_path(dir, kTrainerLogFileName);
  struct stat st {};
  if (::stat(ours.c_str(), &st) == 0) return ours;
  if (::stat(theirs.c_str(), &st) == 0) return theirs;
  std::string state = newest_trainer_state(dir);
  return state.empty() ? ours : state;
}

std::string status_path(const std::string& output_dir) {
  return join_path(output_dir, kStatusFileName);
}

double unix_time_now() {
  auto since = std::chrono::system_clock::now().time_since_epoch();
  return std::chrono::duration<double>(since).count();
}

double bytes_to_mib(std::uint64_t bytes) {
  return static_cast<double>(bytes) / 1048576.0;
}

// --- kinds ---------------------------------------------------------------------------------

namespace {
constexpr std::pair<EventKind, const char*> kKindNames[] = {
    {EventKind::Start, "start"},           {EventKind::Step, "step"}, {EventKind::Eval, "eval"},
    {EventKind::Checkpoint, "checkpoint"}, {EventKind::Log, "log"},   {EventKind::End, "end"},
};
}  // namespace

const char* event_kind_name(EventKind kind) {
  for (const auto& [k, name] : kKindNames) {
    if (k == kind) return name;
  }
  return "unknown";
}

EventKind event_kind_from_name(std::string_view name) {
  for (const auto& [k, n] : kKindNames) {
    if (name == n) return k;
  }
  return EventKind::Unknown;
}

// --- to_json / from_json -------------------------------------------------------------------

namespace {

// A value that is not known: null (the line is written with NaN and Infinity for values that
// were not finite, so an unknown NaN must not be left as a number).
json known_or_null(double v) {
  if (std::isnan(v)) return nullptr;
  return v;
}

// A step's value: NaN, Infinity or -Infinity when the step had it so (StepEvent::not_finite),
// null when it had none.
json step_value(const StepEvent& step, double v, StepValue bit) {
  if (std::isnan(v) && !step.written_not_finite(bit)) return nullptr;
  return v;
}

}  // namespace

void to_json(json& j, const ModelSummary& v) {
  j = json{{"architecture", v.architecture}, {"parameters", v.parameters}, {"layers", v.layers},
           {"hidden_size", v.hidden_size},   {"heads", v.heads},           {"kv_heads", v.kv_heads},
           {"vocab_size", v.vocab_size}};
}

void from_json(const json& j, ModelSummary& v) {
  read_model(j, "", v, nullptr);
}

void to_json(json& j, const GpuMemory& v) {
  j = json{{"rank", v.rank},
           {"device", v.device},
           {"allocated_mib", known_or_null(v.allocated_mib)},
           {"reserved_mib", known_or_null(v.reserved_mib)},
           {"peak_mib", known_or_null(v.peak_mib)},
           {"total_mib", known_or_null(v.total_mib)}};
  if (std::isfinite(v.model_states_mib)) j["model_states_mib"] = v.model_states_mib;
  if (std::isfinite(v.offloaded_mib)) j["offloaded_mib"] = v.offloaded_mib;
  if (std::isfinite(v.util_percent)) j["util_percent"] = v.util_percent;
  if (std::isfinite(v.power_w)) j["power_w"] = v.power_w;
  if (std::isfinite(v.power_limit_w)) j["power_limit_w"] = v.power_limit_w;
}

void from_json(const json& j, GpuMemory& v) {
  read_gpu(j, "", v, nullptr);
}

void to_json(json& j, const StartEvent& v) {
  j = json{{"event", "start"},
           {"time", known_or_null(v.time)},
           {"config", v.config},
           {"world_size", v.world_size},
           {"sequence_parallel_size", v.sequence_parallel_size},
           {"sequence_parallel_mode", v.sequence_parallel_mode},
           {"stage", v.stage},
           {"model", v.model}};
  if (v.total_steps > 0) j["total_steps"] = v.total_steps;
  if (!v.device_name.empty()) j["device_name"] = v.device_name;
  j["peak_tflops"] = known_or_null(v.peak_tflops);  // null when not known
}

void from_json(const json& j, StartEvent& v) {
  read_start(j, v, nullptr);
}

void to_json(json& j, const StepEvent& v) {
  j = json{{"event", "step"},
           {"step", v.step},
           {"epoch", known_or_null(v.epoch)},
           {"loss", step_value(v, v.loss, StepValue::Loss)},
           {"lr", step_value(v, v.lr, StepValue::Lr)},
           {"grad_norm", step_value(v, v.grad_norm, StepValue::GradNorm)},
           {"tokens", v.tokens},
           {"tokens_per_sec", step_value(v, v.tokens_per_sec, StepValue::TokensPerSec)},
           {"elapsed", known_or_null(v.elapsed)},
           {"time", known_or_null(v.time)},
           {"gpus", v.gpus}};
  if (!std::isnan(v.rss_mib)) j["rss_mib"] = v.rss_mib;
  if (!std::isnan(v.peak_rss_mib)) j["peak_rss_mib"] = v.peak_rss_mib;
  if (!std::isnan(v.aux_loss) || v.written_not_finite(StepValue::AuxLoss))
    j["aux_loss"] = v.aux_loss;
  if (!std::isnan(v.model_tflops) || v.written_not_finite(StepValue::ModelTflops)) {
    j["model_tflops"] = v.model_tflops;
    j["mfu"] = step_value(v, v.mfu, StepValue::Mfu);  // null when the peak is not known
  }
  if (v.total_steps > 0) j["total_steps"] = v.total_steps;
  if (!v.dpo) return;
  for (const DpoField& d : kDpoFields) j[d.key] = step_value(v, (*v.dpo).*d.member, d.bit);
}

void from_json(const json& j, StepEvent& v) {
  read_step(j, v, nullptr);
}

void to_json(json& j, const EvalEvent& v) {
  j = json{{"event", "eval"}, {"step", v.step}, {"loss", v.loss}};
}

void from_json(const json& j, EvalEvent& v) {
  read_eval(j, v, nullptr);
}

void to_json(json& j, const CheckpointEvent& v) {
  j = json{{"event", "checkpoint"}, {"step", v.step}, {"path", v.path}};
}

void from_json(const json& j, CheckpointEvent& v) {
  read_checkpoint(j, v, nullptr);
}

void to_json(json& j, const LogEvent& v) {
  j = json{{"event", "log"}, {"level", v.level}, {"rank", v.rank}, {"message", v.message}};
}

void from_json(const json& j, LogEvent& v) {
  read_log(j, v, nullptr);
}

void to_json(json& j, const EndEvent& v) {
  j = json{{"event", "end"}, {"state", v.state}, {"reason", v.reason}};
}

void from_json(const json& j, EndEvent& v) {
  read_end(j, v, nullptr);
}

// --- Event ---------------------------------------------------------------------------------

std::string Event::name() const {
  auto it = raw.find("event");
  return it != raw.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::optional<std::int64_t> Event::step() const {
  if (const auto* s = get<StepEvent>()) return s->step;
  if (const auto* e = get<EvalEvent>()) return e->step;
  if (const auto* c = get<CheckpointEvent>()) return c->step;
  return std::nullopt;
}

bool parse_event_line(std::string_view line, Event& out, std::string& error) {
  json j;
  if (!parse_json_line(line, j, error)) return false;
  return parse_event_object(std::move(j), out, error);
}

// --- FieldIssue, ReadProblems ----------------------------------------------------------------

std::string FieldIssue::describe() const {
  return "field '" + field + "': " + problem +
         (converted() ? ": read as " + read_as : std::string(": dropped"));
}

void ReadProblems::count_issues(std::uint64_t line, const std::vector<FieldIssue>& issues) {
  if (issues.empty()) return;
  ++lines_with_issues;
  for (const FieldIssue& i : issues) ++(i.converted() ? converted_fields : dropped_fields);
  if (first_issue_line == 0) {
    first_issue_line = line;
    first_issue = issues.front().describe();
  }
}

void ReadProblems::count_bad_line(std::uint64_t line, std::string reason) {
  ++bad_lines;
  if (first_bad_line == 0) {
    first_bad_line = line;
    first_bad_reason = reason;
  }
  last_bad_line = line;
  last_bad_reason = std::move(reason);
}

void ReadProblems::add(const ReadProblems& later) {
  if (later.bad_lines != 0) {
    if (first_bad_line == 0) {
      first_bad_line = later.first_bad_line;
      first_bad_reason = later.first_bad_reason;
    }
    last_bad_line = later.last_bad_line;
    last_bad_reason = later.last_bad_reason;
    bad_lines += later.bad_lines;
  }
  if (later.lines_with_issues != 0 && first_issue_line == 0) {
    first_issue_line = later.first_issue_line;
    first_issue = later.first_issue;
  }
  lines_with_issues += later.lines_with_issues;
  converted_fields += later.converted_fields;
  dropped_fields += later.dropped_fields;
}

std::string ReadProblems::summary(const std::string& file) const {
  if (!any()) return {};
  auto plural = [](std::uint64_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  std::string out = file + ": ";
  if (lines_with_issues != 0) {
    out += plural(lines_with_issues, "line had", "lines had") +
           " fields not as the format says, kept without them or converted (" +
           plural(converted_fields, "field", "fields") + " converted, " +
           std::to_string(dropped_fields) + " dropped; first: line " +
           std::to_string(first_issue_line) + ": " + first_issue + ")";
  }
  if (bad_lines != 0) {
    if (lines_with_issues != 0) out += "; ";
    out += plural(bad_lines, "line", "lines") + " skipped whole (first: line " +
           std::to_string(first_bad_line) + ": " + first_bad_reason;
    if (bad_lines > 1) out += "; last: line " + std::to_string(last_bad_line) + ": " + last_bad_reason;
    out += ")";
  }
  return out;
}

bool ReadProblems::operator==(const ReadProblems& o) const {
  return bad_lines == o.bad_lines && first_bad_line == o.first_bad_line &&
         last_bad_line == o.last_bad_line && first_bad_reason == o.first_bad_reason &&
         last_bad_reason == o.last_bad_reason && lines_with_issues == o.lines_with_issues &&
         converted_fields == o.converted_fields && dropped_fields == o.dropped_fields &&
         first_issue_line == o.first_issue_line && first_issue == o.first_issue;
}

// --- EventStreamParser ---------------------------------------------------------------------

EventStreamParser::EventStreamParser(std::size_t max_line_bytes, LineFormat format)
    : max_line_bytes_(max_line_bytes), format_(format) {}

std::vector<Event> EventStreamParser::feed(std::string_view bytes) {
  std::vector<Event> out;
  feed(bytes, out);
  return out;
}

void EventStreamParser::feed(std::string_view bytes, std::vector<Event>& out) {
  while (!bytes.empty()) {
    std::size_t nl = bytes.find('\n');
    std::string_view piece = bytes.substr(0, nl);
    fed_ += piece.size();
    if (nl == std::string_view::npos) {
      append_partial(piece);
      return;
    }
    fed_ += 1;
    if (partial_.empty() && !skipping_) {
      finish_line(piece, out);  // the whole line is in this chunk: parse it without copying
    } else {
      append_partial(piece);
      std::string line = std::move(partial_);
      partial_.clear();
      finish_line(line, out);
    }
    bytes.remove_prefix(nl + 1);
  }
}

void EventStreamParser::append_partial(std::string_view piece) {
  if (skipping_) return;
  if (partial_.size() + piece.size() <= max_line_bytes_) {
    partial_.append(piece);
    return;
  }
  // Counted now, not at the newline, so a runaway line shows up even if it never ends.
  problems_.count_bad_line(lines_ + 1, "line longer than " + std::to_string(max_line_bytes_) + " bytes: dropped");
  partial_.clear();
  partial_.shrink_to_fit();
  skipping_ = true;
}

void EventStreamParser::finish_line(std::string_view line, std::vector<Event>& out) {
  std::uint64_t number = ++lines_;
  std::uint64_t start = line_start_;
  line_start_ = fed_;
  if (skipping_) {  // already counted when it crossed the cap
    skipping_ = false;
    return;
  }
  if (line.size() > max_line_bytes_) {
    problems_.count_bad_line(number, "line longer than " + std::to_string(max_line_bytes_) + " bytes: dropped");
    return;
  }
  // A CRLF line needs nothing special: JSON allows the \r as trailing whitespace.
  if (is_blank(line)) return;
  std::string error;
  if (format_ == LineFormat::TrainerLog) {
    std::vector<Event> events;  // a step and an eval event, one of them, or none
    if (!parse_trainer_log_line(line, events, error)) {
      problems_.count_bad_line(number, std::move(error));
      return;
    }
    if (!events.empty()) problems_.count_issues(number, events.front().issues);
    for (Event& event : events) {
      event.line = number;
      event.offset = start;
      out.push_back(std::move(event));
    }
    return;
  }
  Event event;
  if (!parse_event_line(line, event, error)) {
    problems_.count_bad_line(number, std::move(error));
    return;
  }
  event.line = number;
  event.offset = start;
  problems_.count_issues(number, event.issues);
  out.push_back(std::move(event));
}


void EventStreamParser::reset(std::uint64_t offset, std::uint64_t line) {
  partial_.clear();
  partial_.shrink_to_fit();
  skipping_ = false;
  line_start_ = offset;
  fed_ = offset;
  lines_ = line;
  problems_ = ReadProblems{};
}

// --- EventFileReader -----------------------------------------------------------------------

void to_json(json& j, const EventCursor& v) {
  j = json{{"offset", v.offset}, {"line", v.line}, {"device", v.device}, {"inode", v.inode}};
}

void from_json(const json& j, EventCursor& v) {
  v = EventCursor{};
  Fields f(j, "");
  std::int64_t n = 0;
  auto get = [&](const char* key, std::uint64_t& out) {
    n = 0;
    f.get(key, n);
    if (n < 0) fail(key, "a non-negative integer", j.at(key));
    out = static_cast<std::uint64_t>(n);
  };
  get("offset", v.offset);
  get("line", v.line);
  get("device", v.device);
  get("inode", v.inode);
}

EventFileReader::EventFileReader(std::string path, std::size_t max_line_bytes)
    : path_(std::move(path)), parser_(max_line_bytes, line_format_of(path_)) {
  if (parser_.format() == LineFormat::TrainerState) state_root_ = run_folder_of(path_);
}

const ReadProblems& EventFileReader::problems() const {
  return parser_.format() == LineFormat::TrainerState ? state_problems_ : parser_.problems();
}

EventCursor EventFileReader::cursor() const {
  return EventCursor{parser_.consumed(), parser_.lines(), device_, inode_};
}

void EventFileReader::set_cursor(const EventCursor& cursor) {
  parser_.reset(cursor.offset, cursor.line);
  device_ = cursor.device;
  inode_ = cursor.inode;
}

namespace {
struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};
}  // namespace

EventPollResult EventFileReader::poll(std::size_t max_bytes) {
  if (parser_.format() == LineFormat::TrainerState) return poll_trainer_state();
  EventPollResult result;
  // Only a regular file: a FIFO or a link to /dev/zero in a run folder would block or never end.
  int fd = open_regular_file(path_, result.error);
  if (fd < 0) {
    // The engine creates the file when it starts; before that there is simply nothing yet.
    if (errno == ENOENT) result.error.clear();
    return result;
  }
  FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    result.error = sys_error("cannot stat", path_);
    return result;
  }
  auto size = static_cast<std::uint64_t>(st.st_size);
  check_identity(static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino), size,
                 result);
  read_to_end(fd, size, max_bytes, result);
  return result;
}

EventPollResult EventFileReader::poll_trainer_state() {
  EventPollResult result;
  // A later checkpoint (or the end of training) has written a newer one by now.
  std::string file = newest_trainer_state(state_root_);
  if (file.empty()) file = path_;
  int fd = open_regular_file(file, result.error);
  if (fd < 0) {
    if (errno == ENOENT) result.error.clear();
    return result;
  }
  FdCloser closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    result.error = sys_error("cannot stat", file);
    return result;
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  const auto device = static_cast<std::uint64_t>(st.st_dev);
  const auto inode = static_cast<std::uint64_t>(st.st_ino);
  const std::int64_t mtime = mtime_ns(st);
  if (file == path_ && device == device_ && inode == inode_ && size == state_size_ &&
      mtime == state_mtime_ns_)
    return result;  // unchanged since it was read
  constexpr std::uint64_t kMaxStateBytes = std::uint64_t{1} << 30;
  if (size > kMaxStateBytes) {
    result.error = file + " is " + std::to_string(size >> 20) +
                   " MiB, more than the 1024 MiB read whole: not read";
    return result;
  }
  std::string text(static_cast<std::size_t>(size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::pread(fd, text.data() + got, text.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      result.error = sys_error("cannot read", file);
      return result;
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  std::vector<Event> events;
  ReadProblems problems;
  std::string error;
  if (!parse_trainer_state(text, events, error, problems)) {
    // Hugging Face writes the file in place: one caught half-written parses on the next poll.
    // Only one that stays broken is reported.
    if (unix_time_now() - static_cast<double>(mtime) * 1e-9 > 2.0)
      result.error = file + ": " + error;
    return result;
  }
  const bool again = state_mtime_ns_ >= 0;
  if (again) {
    result.restarted = true;
    result.restart_reason = file + (file == path_ ? " was written again" : " is newer than " + path_) +
                            ": reading its log_history whole";
  }
  path_ = file;
  device_ = device;
  inode_ = inode;
  state_size_ = size;
  state_mtime_ns_ = mtime;
  state_problems_ = problems;
  parser_.reset(size, static_cast<std::uint64_t>(events.size()));
  result.events = std::move(events);
  return result;
}

void EventFileReader::check_identity(std::uint64_t device, std::uint64_t inode, std::uint64_t size,
                                     EventPollResult& result) {
  bool replaced = inode_ != 0 && (inode != inode_ || device != device_);
  // fed(), not consumed(): a partial line that got shorter means the tail was rewritten too.
  bool shrank = size < parser_.fed();
  std::uint64_t old_size = parser_.fed();
  device_ = device;
  inode_ = inode;
  if (!replaced && !shrank) return;
  result.restarted = true;
  result.restart_reason = path_ +
                          (replaced ? " was replaced by a new file"
                                    : " shrank from " + std::to_string(old_size) + " to " +
                                          std::to_string(size) + " bytes") +
                          ": reading it again from the start";
  parser_.reset();
}

void EventFileReader::read_to_end(int fd, std::uint64_t size, std::size_t max_bytes,
                                  EventPollResult& result) {
  constexpr std::uint64_t kChunk = std::uint64_t{1} << 20;
  std::uint64_t pos = parser_.fed();
  // Size the buffer to what is there now; the loop still reads whatever was appended since.
  std::uint64_t want_total = size > pos ? size - pos : 0;
  std::string buf(static_cast<std::size_t>(std::clamp<std::uint64_t>(want_total, 4096, kChunk)),
                  '\0');
  std::uint64_t total = 0;
  while (max_bytes == 0 || total < max_bytes) {
    std::uint64_t want = buf.size();
    if (max_bytes != 0) want = std::min<std::uint64_t>(want, max_bytes - total);
    ssize_t n = ::pread(fd, buf.data(), static_cast<std::size_t>(want), static_cast<off_t>(pos));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      result.error = sys_error("cannot read", path_);
      return;
    }
    if (n == 0) return;
    parser_.feed(std::string_view(buf.data(), static_cast<std::size_t>(n)), result.events);
    pos += static_cast<std::uint64_t>(n);
    total += static_cast<std::uint64_t>(n);
  }
}

// --- EventWriter ---------------------------------------------------------------------------

EventWriter::~EventWriter() {
  std::lock_guard<std::mutex> lock(mutex_);
  close_locked();
}

std::string EventWriter::open(const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  close_locked();
  path_ = path;
  torn_ = false;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) return sys_error("cannot open the events file", path);
  return {};
}

bool EventWriter::is_open() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return fd_ >= 0;
}

std::string EventWriter::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  return close_locked();
}

std::string EventWriter::close_locked() {
  if (fd_ < 0) return {};
  std::string error;
  if (::fdatasync(fd_) != 0) error = sys_error("cannot flush", path_);
  if (::close(fd_) != 0 && error.empty()) error = sys_error("cannot close", path_);
  fd_ = -1;
  return error;
}

std::string EventWriter::sync() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (fd_ < 0) return "cannot flush the events file: it is not open";
  if (::fdatasync(fd_) != 0) return sys_error("cannot flush", path_);
  return {};
}

std::string EventWriter::write(const StartEvent& e) {
  return write_object(e);
}
std::string EventWriter::write(const StepEvent& e) {
  return write_object(e);
}
std::string EventWriter::write(const EvalEvent& e) {
  return write_object(e);
}
std::string EventWriter::write(const CheckpointEvent& e) {
  return write_object(e);
}
std::string EventWriter::write(const LogEvent& e) {
  return write_object(e);
}
std::string EventWriter::write(const EndEvent& e) {
  return write_object(e);
}

std::string EventWriter::write(const json& event) {
  Event parsed;
  std::string error;
  if (!parse_event_object(event, parsed, error)) return "refusing to write an event: " + error;
  if (!parsed.issues.empty()) {
    return "refusing to write an event: \"" + parsed.name() + "\" event: " +
           parsed.issues.front().describe();
  }
  return write_object(event);
}

std::string EventWriter::write_object(const json& event) {
  std::string line = serialize_event(event);
  std::lock_guard<std::mutex> lock(mutex_);
  if (fd_ < 0) return "cannot write an event: the events file is not open";
  if (torn_) line.insert(line.begin(), '\n');
  std::size_t done = 0;
  while (done < line.size()) {
    // One call normally writes it all; a short count only comes with a full disk or a signal.
    ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string error = sys_error("cannot append to", path_);
      if (done > 0) torn_ = line[done - 1] != '\n';
      return error;
    }
    done += static_cast<std::size_t>(n);
  }
  torn_ = false;
  return {};
}

// --- RunStatus -----------------------------------------------------------------------------

const char* run_state_name(RunState state) {
  switch (state) {
    case RunState::Running:
      return "running";
    case RunState::Finished:
      return "finished";
    case RunState::Failed:
      return "failed";
    case RunState::Stopped:
      return "stopped";
  }
  return "running";
}

bool parse_run_state(std::string_view name, RunState& out) {
  for (RunState s : {RunState::Running, RunState::Finished, RunState::Failed, RunState::Stopped}) {
    if (name == run_state_name(s)) {
      out = s;
      return true;
    }
  }
  return false;
}

void to_json(json& j, const RunStatus& v) {
  j = json{{"state", run_state_name(v.state)},
           {"pid", v.pid},
           {"host", v.host},
           {"exit_code", v.exit_code ? json(*v.exit_code) : json(nullptr)},
           {"reason", v.reason},
           {"updated", v.updated}};
  if (v.step) j["step"] = *v.step;
}

void from_json(const json& j, RunStatus& v) {
  read_status(j, v, nullptr);
}

std::string RunStatus::write(const std::string& path) const {
  json j = *this;
  if (std::isnan(updated)) j["updated"] = unix_time_now();
  return write_file_atomic(path, j.dump(2, ' ', false, json::error_handler_t::replace) + "\n");
}

bool RunStatus::read(const std::string& path, RunStatus& out, std::string& error,
                     std::vector<FieldIssue>* issues) {
  std::string text;
  if (!read_small_file(path, kRunMetadataMaxBytes, text, error)) return false;
  if (!parse(text, out, error, issues)) {
    error = path + ": " + error;
    return false;
  }
  return true;
}

bool RunStatus::parse(const std::string& text, RunStatus& out, std::string& error,
                      std::vector<FieldIssue>* issues) {
  if (is_blank(text)) {
    error = "the run status file is empty";
    return false;
  }
  Issues found;
  json doc;
  JsonSyntaxError syntax;
  if (!parse_json_text(text, doc, syntax)) {
    error = "the run status file is not valid JSON: " + syntax.describe();
    return false;
  }
  try {
    read_status(doc, out, &found);
  } catch (const json::exception& e) {  // only if a check of read_status has a gap
    error = "malformed run status: " + json_error_text(e.what());
    return false;
  } catch (const EventFormatError& e) {
    error = std::string("malformed run status: ") + e.what();
    return false;
  }
  if (issues) *issues = std::move(found);
  return true;
}

}  // namespace studio
