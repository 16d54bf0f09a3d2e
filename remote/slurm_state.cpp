#include "studio/remote/slurm_state.h"

#include <array>
#include <regex>
#include <stdexcept>
#include <utility>

namespace studio::remote {
namespace {

struct StateWord {
  std::string_view long_name;   // squeue %T, sacct State
  std::string_view short_name;  // squeue %t
  JobState state;
};

constexpr std::array<StateWord, 16> kStates{{
    {"PENDING", "PD", JobState::Pending},
    {"CONFIGURING", "CF", JobState::Configuring},
    {"RUNNING", "R", JobState::Running},
    {"COMPLETING", "CG", JobState::Completing},
    {"SUSPENDED", "S", JobState::Suspended},
    {"REQUEUED", "RQ", JobState::Requeued},
    {"RESIZING", "RS", JobState::Resizing},
    {"COMPLETED", "CD", JobState::Completed},
    {"FAILED", "F", JobState::Failed},
    {"CANCELLED", "CA", JobState::Cancelled},
    {"TIMEOUT", "TO", JobState::Timeout},
    {"NODE_FAIL", "NF", JobState::NodeFail},
    {"OUT_OF_MEMORY", "OOM", JobState::OutOfMemory},
    {"PREEMPTED", "PR", JobState::Preempted},
    {"BOOT_FAIL", "BF", JobState::BootFail},
    {"DEADLINE", "DL", JobState::Deadline},
}};

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

// Non-empty lines without a trailing '\r' (output fetched through some terminals has one).
std::vector<std::string> lines_of(const std::string& output) {
  std::vector<std::string> lines;
  for (std::string line : split(output, '\n')) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) lines.push_back(std::move(line));
  }
  return lines;
}

[[noreturn]] void bad_line(const char* tool, const std::string& line, const std::string& why) {
  throw std::invalid_argument(std::string(tool) + " output line '" + line + "': " + why);
}

std::vector<std::string> fields_of(const char* tool, const std::string& line, size_t count) {
  std::vector<std::string> fields = split(line, '|');
  if (fields.size() != count) {
    bad_line(tool, line,
             "expected " + std::to_string(count) + " '|'-separated fields, got " +
                 std::to_string(fields.size()) + "; run the command this studio builds");
  }
  return fields;
}

// The job id of a line or step: "123" for "123", "123.batch" and "123.0".
std::string job_of(const std::string& id) {
  return id.substr(0, id.find('.'));
}

// "CANCELLED by 1000" -> Cancelled and "by uid 1000"; "RUNNING" -> Running and "".
std::pair<JobState, std::string> read_state(const std::string& text) {
  auto space = text.find(' ');
  JobState state = job_state_from(text.substr(0, space));
  std::string rest = space == std::string::npos ? "" : text.substr(space + 1);
  if (rest.rfind("by ", 0) == 0) rest = "by uid " + rest.substr(3);
  return {state, rest};
}

// ExitCode "X:S": the exit status and the signal that ended the process.
std::pair<int, int> read_exit_code(const std::string& line, const std::string& text) {
  static const std::regex kExit("([0-9]{1,3}):([0-9]{1,3})");
  std::smatch m;
  if (!std::regex_match(text, m, kExit)) {
    bad_line("sacct", line, "exit code '" + text + "' is not of the form STATUS:SIGNAL");
  }
  return {std::stoi(m[1].str()), std::stoi(m[2].str())};
}

// Why a finished job ended, in words; the first step that failed tells more than the job line,
// which for a cancelled job or a killed step only says 0:15 or 0:9.
std::string sacct_reason(const JobStatus& job, const std::string& cancelled_by) {
  switch (job.state) {
    case JobState::Cancelled: return cancelled_by.empty() ? "cancelled" : "cancelled " +
                                                                              cancelled_by;
    case JobState::Timeout: return "time limit reached";
    case JobState::OutOfMemory: return "out of memory";
    case JobState::NodeFail: return "a node failed";
    case JobState::BootFail: return "a node failed to boot";
    case JobState::Preempted: return "preempted";
    case JobState::Deadline: return "deadline reached";
    case JobState::Failed: break;
    default: return "";
  }
  // srun steps (123.0) first: the batch step only fails because one of them did.
  for (bool srun_steps : {true, false}) {
    for (const JobStep& step : job.steps) {
      std::string name = step.step_id.substr(step.step_id.find('.') + 1);
      bool numbered = !name.empty() && name.front() >= '0' && name.front() <= '9';
      if (numbered != srun_steps) continue;
      if (step.signal != 0) {
        return "signal " + std::to_string(step.signal) + " in step " + step.step_id;
      }
      if (step.exit_code != 0) {
        return "exit code " + std::to_string(step.exit_code) + " in step " + step.step_id;
      }
    }
  }
  if (job.signal != 0) return "signal " + std::to_string(job.signal);
  return "exit code " + std::to_string(job.exit_code);
}

}  // namespace

JobState job_state_from(std::string_view word) {
  for (const StateWord& s : kStates) {
    if (word == s.long_name || word == s.short_name) return s.state;
  }
  return JobState::Unknown;
}

const char* job_state_name(JobState state) {
  switch (state) {
    case JobState::Pending: return "pending";
    case JobState::Configuring: return "configuring";
    case JobState::Running: return "running";
    case JobState::Completing: return "completing";
    case JobState::Suspended: return "suspended";
    case JobState::Requeued: return "requeued";
    case JobState::Resizing: return "resizing";
    case JobState::Completed: return "completed";
    case JobState::Failed: return "failed";
    case JobState::Cancelled: return "cancelled";
    case JobState::Timeout: return "timeout";
    case JobState::NodeFail: return "node_fail";
    case JobState::OutOfMemory: return "out_of_memory";
    case JobState::Preempted: return "preempted";
    case JobState::BootFail: return "boot_fail";
    case JobState::Deadline: return "deadline";
    case JobState::Unknown: return "unknown";
  }
  return "unknown";
}

bool is_terminal(JobState state) {
  switch (state) {
    case JobState::Completed:
    case JobState::Failed:
    case JobState::Cancelled:
    case JobState::Timeout:
    case JobState::NodeFail:
    case JobState::OutOfMemory:
    case JobState::Preempted:
    case JobState::BootFail:
    case JobState::Deadline:
      return true;
    default:
      return false;
  }
}

SubmittedJob parse_sbatch_output(const std::string& output) {
  static const std::regex kHuman("Submitted batch job ([0-9]+)(?: on cluster (\\S+))?");
  static const std::regex kParsable("([0-9]+)(?:;(\\S+))?");
  for (const std::string& line : lines_of(output)) {
    std::smatch m;
    if (std::regex_match(line, m, kHuman) || std::regex_match(line, m, kParsable)) {
      return {m[1].str(), m[2].str()};
    }
  }
  throw std::invalid_argument("sbatch printed no job id (expected 'Submitted batch job N' or "
                              "'N;cluster'); its output was: '" + output + "'");
}

std::optional<JobStatus> parse_squeue(const std::string& output, const std::string& job_id) {
  std::optional<JobStatus> found;
  for (const std::string& line : lines_of(output)) {
    std::vector<std::string> f = fields_of("squeue", line, 4);
    if (f[0] != job_id) bad_line("squeue", line, "is not about job " + job_id);
    JobStatus job;
    job.job_id = f[0];
    job.state_text = f[1];
    job.state = job_state_from(f[1]);
    job.elapsed = f[2];
    // %R: "(Resources)" while waiting, the node list once running.
    const std::string& r = f[3];
    if (r.size() >= 2 && r.front() == '(' && r.back() == ')') {
      job.reason = r.substr(1, r.size() - 2);
      if (job.reason == "None") job.reason.clear();
    } else if (!r.empty()) {
      job.reason = "on " + r;
    }
    found = std::move(job);
  }
  return found;
}

std::optional<JobStatus> parse_sacct(const std::string& output, const std::string& job_id) {
  std::optional<JobStatus> job;
  std::string cancelled_by;
  std::vector<JobStep> steps;
  for (const std::string& line : lines_of(output)) {
    std::vector<std::string> f = fields_of("sacct", line, 4);
    if (job_of(f[0]) != job_id) bad_line("sacct", line, "is not about job " + job_id);
    auto [state, by] = read_state(f[1]);
    auto [exit_code, signal] = read_exit_code(line, f[2]);
    if (f[0] == job_id) {
      job = JobStatus{};
      job->job_id = f[0];
      job->state = state;
      job->state_text = f[1];
      job->elapsed = f[3];
      job->exit_code = exit_code;
      job->signal = signal;
      cancelled_by = by;
    } else {
      steps.push_back({f[0], state, f[1], exit_code, signal, f[3]});
    }
  }
  if (!job) return std::nullopt;
  job->steps = std::move(steps);
  job->reason = sacct_reason(*job, cancelled_by);
  return job;
}

}  // namespace studio::remote
