#include "studio/runs/events.h"
#include "studio/runs/run_folder.h"

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

#include "studio/base/atomic_file.h"
#include "studio/base/json_file.h"
#include "event_schema.h"

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

template <class T>
T read_event(const json& j, Issues* issues) {
  T v;
  read_fields(j, "", v, issues);
  return v;
}

EventPayload parse_payload(EventKind kind, const json& j, Issues* issues) {
  switch (kind) {
    case EventKind::Start:
      return read_event<StartEvent>(j, issues);
    case EventKind::Step:
      return read_event<StepEvent>(j, issues);
    case EventKind::Eval:
      return read_event<EvalEvent>(j, issues);
    case EventKind::Checkpoint:
      return read_event<CheckpointEvent>(j, issues);
    case EventKind::Log:
      return read_event<LogEvent>(j, issues);
    case EventKind::End:
      return read_event<EndEvent>(j, issues);
    case EventKind::Restart:
      return read_event<RestartEvent>(j, issues);
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
    {EventKind::Restart, "restart"},
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

// --- to_json / from_json: the field tables of event_schema.h ---------------------------------

#define STUDIO_JSON_BY_FIELD_TABLE(T)                     \
  void to_json(json& j, const T& v) { j = written(v); } \
  void from_json(const json& j, T& v) { read_fields(j, "", v, nullptr); }
STUDIO_JSON_BY_FIELD_TABLE(ModelSummary)
STUDIO_JSON_BY_FIELD_TABLE(GpuMemory)
STUDIO_JSON_BY_FIELD_TABLE(RankTime)
STUDIO_JSON_BY_FIELD_TABLE(StartEvent)
STUDIO_JSON_BY_FIELD_TABLE(StepEvent)
STUDIO_JSON_BY_FIELD_TABLE(EvalEvent)
STUDIO_JSON_BY_FIELD_TABLE(CheckpointEvent)
STUDIO_JSON_BY_FIELD_TABLE(LogEvent)
STUDIO_JSON_BY_FIELD_TABLE(EndEvent)
STUDIO_JSON_BY_FIELD_TABLE(RestartEvent)
STUDIO_JSON_BY_FIELD_TABLE(EventCursor)
STUDIO_JSON_BY_FIELD_TABLE(RunStatus)
#undef STUDIO_JSON_BY_FIELD_TABLE

// --- Event ---------------------------------------------------------------------------------

std::string Event::name() const {
  auto it = raw.find("event");
  return it != raw.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::optional<std::int64_t> Event::step() const {
  if (const auto* s = get<StepEvent>()) return s->step;
  if (const auto* e = get<EvalEvent>()) return e->step;
  if (const auto* c = get<CheckpointEvent>()) return c->step;
  if (const auto* r = get<RestartEvent>()) return r->step;
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

// A regular file opened and stat'ed for a poll (a FIFO or a link to /dev/zero in a run folder
// would block or never end); -1 with `error` set otherwise, and no error for a file that does
// not exist: the engine creates it when it starts, and before that there is simply nothing yet.
int open_to_poll(const std::string& path, struct stat& st, std::string& error) {
  const int fd = open_regular_file(path, error);
  if (fd < 0) {
    if (errno == ENOENT) error.clear();
    return -1;
  }
  if (::fstat(fd, &st) != 0) {
    error = sys_error("cannot stat", path);
    ::close(fd);
    return -1;
  }
  return fd;
}
}  // namespace

EventPollResult EventFileReader::poll(std::size_t max_bytes) {
  if (parser_.format() == LineFormat::TrainerState) return poll_trainer_state();
  EventPollResult result;
  struct stat st {};
  const int fd = open_to_poll(path_, st, result.error);
  if (fd < 0) return result;
  FdCloser closer{fd};
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
  struct stat st {};
  const int fd = open_to_poll(file, st, result.error);
  if (fd < 0) return result;
  FdCloser closer{fd};
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
std::string EventWriter::write(const RestartEvent& e) {
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
    read_fields(doc, "", out, &found);
  } catch (const json::exception& e) {  // only if a check of the reader has a gap
    error = "malformed run status: " + json_error_text(e.what());
    return false;
  } catch (const EventFormatError& e) {
    error = std::string("malformed run status: ") + e.what();
    return false;
  }
  if (issues) *issues = std::move(found);
  return true;
}

std::string status_host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace studio
