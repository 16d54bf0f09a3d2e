#include "studio/runs/failure_cause.h"

#include <cctype>
#include <regex>

namespace studio {

namespace {

std::string trim(std::string s) {
  const auto first = s.find_first_not_of(" \t.");
  const auto last = s.find_last_not_of(" \t.");
  return first == std::string::npos ? std::string() : s.substr(first, last - first + 1);
}

// "a, b, or c" -> {a, b, c}
std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    std::size_t next = text.find(", ", at);
    std::string item = trim(text.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (item.rfind("or ", 0) == 0) item = item.substr(3);
    if (item.rfind("and ", 0) == 0) item = item.substr(4);
    if (!item.empty()) out.push_back(item);
    if (next == std::string::npos) break;
    at = next + 2;
  }
  return out;
}

bool search(const std::string& text, const std::regex& re, std::smatch& m) {
  return std::regex_search(text, m, re);
}

}  // namespace

const char* failure_kind_name(FailureKind kind) {
  switch (kind) {
    case FailureKind::OutOfMemory: return "out of memory";
    case FailureKind::NotFinite: return "diverged (loss or gradients not finite)";
    case FailureKind::Config: return "config error";
    case FailureKind::Killed: return "killed by a signal";
    case FailureKind::Exited: return "a rank exited";
    case FailureKind::PeerLost: return "a peer rank failed or hung";
    case FailureKind::Other: break;
  }
  return "failed";
}

FailureCause explain_failure(std::string_view reason_view) {
  FailureCause c;
  std::string reason(reason_view);
  c.summary = reason.substr(0, reason.find('\n'));
  std::smatch m;
  // The launcher's words come first ("rank 1 exited with code 1: <the rank's own error>"); the
  // rank's own error says more.
  static const std::regex exited(R"(^rank (\d+) exited with code (\d+))");
  static const std::regex killed(R"(^rank (\d+) was killed by signal (\d+) \((\w+)\))");
  if (search(reason, killed, m)) {
    c.kind = FailureKind::Killed;
    c.rank = std::stoi(m[1]);
    const std::string sig = m[3];
    if (sig == "SIGKILL")
      c.changes = {"SIGKILL comes from outside the process: the kernel's out-of-memory killer "
                   "(host memory; see dmesg), a scheduler's time or memory limit, or a user",
                   "if it was the out-of-memory killer: compare the estimate's host memory "
                   "(studio-train estimate) with the node's; offload_optimizer and offload_param "
                   "move states into host memory, and each process per node adds its own"};
    else if (sig == "SIGSEGV" || sig == "SIGBUS" || sig == "SIGABRT")
      c.changes = {"a crash inside the process: the rank's last log lines and its core dump "
                   "tell where; report it with the config"};
    else
      c.changes = {"something sent " + sig + " to the rank: a scheduler's preemption or a user"};
    return c;
  }
  if (search(reason, exited, m)) {
    const int rank = std::stoi(m[1]);
    std::string rest = reason.substr(static_cast<std::size_t>(m.position(0) + m.length(0)));
    if (rest.rfind(": ", 0) == 0) rest = rest.substr(2);
    // The rank's own "studio-train <command>: " prefix.
    static const std::regex command(R"(^studio-train \w+: )");
    std::smatch p;
    if (std::regex_search(rest, p, command)) rest = rest.substr(static_cast<std::size_t>(p.length(0)));
    if (!rest.empty()) {
      FailureCause inner = explain_failure(rest);
      if (inner.rank < 0) inner.rank = rank;
      return inner;
    }
    c.kind = FailureKind::Exited;
    c.rank = rank;
    c.changes = {"the rank's last log lines say why"};
    return c;
  }
  static const std::regex oom(R"(out of memory on rank (\d+) at step (\d+), in ([^:]+):)");
  if (search(reason, oom, m)) {
    c.kind = FailureKind::OutOfMemory;
    c.rank = std::stoi(m[1]);
    c.step = std::stoll(m[2]);
    c.phase = m[3];
    c.summary = "out of memory on rank " + m[1].str() + " at step " + m[2].str() + ", in " + c.phase;
    static const std::regex estimate(R"((The memory estimate for this run is [^;]*))");
    std::smatch e;
    if (search(reason, estimate, e)) c.summary += ". " + trim(e[1]);
    const std::string lowers = "what lowers it (studio-train estimate shows each): ";
    if (const auto at = reason.find(lowers); at != std::string::npos)
      c.changes = split_list(reason.substr(at + lowers.size()));
    return c;
  }
  static const std::regex nonfinite(
      R"(^step (\d+): (the [^(]*?)(?: \(first on rank (\d+), (in [^)]*)\))?: training stopped)");
  if (search(reason, nonfinite, m)) {
    c.kind = FailureKind::NotFinite;
    c.step = std::stoll(m[1]);
    if (m[3].matched) c.rank = std::stoi(m[3]);
    if (m[4].matched) c.phase = m[4].str().substr(3);
    c.summary = "step " + m[1].str() + ": " + m[2].str();
    const auto advice = reason.rfind(". ");
    if (advice != std::string::npos) c.changes = split_list(reason.substr(advice + 2));
    return c;
  }
  static const std::regex config(R"(^([^\s:]+\.(?:ya?ml|json)):(\d+):(?:(\d+):)? ([\w.\-]+): )");
  if (search(reason, config, m)) {
    c.kind = FailureKind::Config;
    c.config_file = m[1];
    c.config_line = std::stoi(m[2]);
    if (m[3].matched) c.config_column = std::stoi(m[3]);
    c.key = m[4];
    const std::string message = reason.substr(static_cast<std::size_t>(m.length(0)));
    c.summary = c.key + ": " + message.substr(0, message.find('\n'));
    c.changes = {c.key + " on line " + m[2].str() + " of " + c.config_file};
    return c;
  }
  static const std::regex peer(
      R"(^(?:error: )?rank (\d+): (\w+\([^)]*\) in group [\w.]+) (failed|timed out))");
  if (search(reason, peer, m)) {
    c.kind = FailureKind::PeerLost;
    c.rank = std::stoi(m[1]);
    c.phase = m[2];
    if (m[3] == "timed out")
      c.changes = {"a rank stalled: the watchdog's words in the reason name it; raise ddp_timeout "
                   "only if the step is legitimately that slow"};
    else
      c.changes = {"another rank died first: its log says why"};
    return c;
  }
  static const std::regex at_step(R"(\bat step (\d+)\b)");
  if (search(reason, at_step, m)) c.step = std::stoll(m[1]);
  static const std::regex on_rank(R"(\bon rank (\d+)\b)");
  if (search(reason, on_rank, m)) c.rank = std::stoi(m[1]);
  return c;
}

std::vector<std::string> rank_log_tail(std::string_view log, int rank, std::size_t count) {
  std::vector<std::string> lines;
  const std::string tag = "[rank " + std::to_string(rank) + "] ";
  std::size_t at = 0;
  while (at < log.size()) {
    std::size_t end = log.find('\n', at);
    if (end == std::string_view::npos) end = log.size();
    std::string_view line = log.substr(at, end - at);
    at = end + 1;
    // A progress bar rewrites its line with carriage returns: its last state counts.
    if (const auto cr = line.rfind('\r'); cr != std::string_view::npos) line = line.substr(cr + 1);
    if (line.empty()) continue;
    if (rank == 0) {
      if (line.rfind("[rank ", 0) == 0 || line.rfind("[launcher]", 0) == 0 ||
          line.rfind("[#", 0) == 0 || line.rfind("[-", 0) == 0)
        continue;
      lines.emplace_back(line);
    } else if (line.rfind(tag, 0) == 0) {
      lines.emplace_back(line.substr(tag.size()));
    }
  }
  if (lines.size() > count) lines.erase(lines.begin(), lines.end() - static_cast<std::ptrdiff_t>(count));
  return lines;
}

}  // namespace studio
