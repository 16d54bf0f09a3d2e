#include "studio/runs/run_outcome.h"

#include <filesystem>
#include <fstream>
#include <optional>

#include <fcntl.h>
#include <unistd.h>

#include "studio/runs/events.h"

namespace studio {
namespace {

constexpr std::streamoff kTailBytes = std::streamoff{1} << 20;

struct EventsTail {
  std::optional<EndEvent> end;  // the `end` after the last `start`, if any
  bool torn = false;            // the file does not end in '\n'
};

// Reads the tail of events.jsonl; a missing file is an empty run.
bool read_tail(const std::string& path, EventsTail& out, std::string& error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!std::filesystem::exists(path)) return true;
    error = "cannot read " + path;
    return false;
  }
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff start = size > kTailBytes ? size - kTailBytes : 0;
  std::string bytes(static_cast<std::size_t>(size - start), '\0');
  in.seekg(start);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!in) {
    error = "cannot read " + path;
    return false;
  }
  out.torn = !bytes.empty() && bytes.back() != '\n';
  // Parse from a line start: past the first newline unless the tail is the whole file.
  std::string_view lines(bytes);
  if (start > 0) {
    const std::size_t nl = lines.find('\n');
    lines.remove_prefix(nl == std::string_view::npos ? lines.size() : nl + 1);
  }
  EventStreamParser parser;
  for (const Event& e : parser.feed(lines)) {
    if (e.kind == EventKind::Start) out.end.reset();
    if (const auto* end = e.get<EndEvent>()) out.end = *end;
  }
  return true;
}

std::string append_end(const std::string& path, bool torn, const nlohmann::json& end) {
  if (torn) {
    // A worker killed mid-write left half a line: end it so the `end` line stands alone.
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    const bool ok = fd >= 0 && ::write(fd, "\n", 1) == 1;
    if (fd >= 0) ::close(fd);
    if (!ok) return "cannot append to " + path;
  }
  EventWriter writer;
  std::string error = writer.open(path);
  if (error.empty()) error = writer.write(end);
  const std::string closed = writer.close();
  return error.empty() ? closed : error;
}

}  // namespace

std::string record_run_outcome(const std::string& output_dir, const RunOutcome& result) {
  if (result.exit_code == 0 && !result.stopped) return {};
  const RunState state = result.stopped ? RunState::Stopped : RunState::Failed;
  std::error_code ec;
  std::filesystem::create_directories(output_dir, ec);
  if (ec) return "cannot create the output directory " + output_dir + ": " + ec.message();

  const std::string events = events_path(output_dir);
  EventsTail tail;
  std::string error;
  if (!read_tail(events, tail, error)) return error;

  RunStatus old;
  std::string status_error;
  const bool have_old = RunStatus::read(status_path(output_dir), old, status_error);

  RunStatus status;
  status.pid = ::getpid();
  status.host = status_host_name();
  status.exit_code = result.exit_code;
  if (have_old) status.step = old.step;
  if (tail.end) {
    if (have_old && old.state != RunState::Running) return {};
    if (!parse_run_state(tail.end->state, status.state)) status.state = state;
    status.reason = tail.end->reason;
  } else {
    nlohmann::json end = EndEvent{run_state_name(state), result.reason};
    end["exit_code"] = result.exit_code;
    if (std::string e = append_end(events, tail.torn, end); !e.empty()) return e;
    status.state = state;
    status.reason = result.reason;
  }
  return status.write(status_path(output_dir));
}

}  // namespace studio
