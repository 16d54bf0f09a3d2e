#include "studio/remote/remote_run.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "studio/runs/events.h"
#include "studio/base/whole_number.h"
#include "studio/remote/remote_error.h"
#include "studio/remote/sftp_client.h"
#include "studio/remote/shell_quote.h"
#include "studio/remote/slurm_script.h"
#include "studio/remote/slurm_state.h"
#include "remote_text.h"

namespace studio::remote {
namespace {

using nlohmann::json;

using detail::basename_of;

// `stem` as the start of a run id: [A-Za-z0-9._-], runs of others as one '-', at most 120
// characters, "run" when nothing is left.
std::string safe_stem(const std::string& stem) {
  std::string safe;
  for (char c : stem) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (ok) {
      safe += c;
    } else if (safe.empty() || safe.back() != '-') {
      safe += '-';
    }
  }
  while (!safe.empty() && (safe[0] == '.' || safe[0] == '-')) safe.erase(0, 1);
  if (safe.size() > 120) safe.resize(120);
  if (safe.empty()) safe = "run";
  return safe;
}
using detail::join_path;
using detail::last_lines;

// State and reason from the engine's status.json text; nullopt when there is none or it has no
// readable state (a reader never sees a torn file: the engine replaces it atomically). Other
// fields of an unexpected type cost only themselves.
std::optional<RunStatus> parse_status_json(const std::string& text) {
  RunStatus status;
  std::string error;
  if (!RunStatus::parse(text, status, error)) return std::nullopt;
  return status;
}

RemoteRunState from_engine_state(studio::RunState state) {
  switch (state) {
    case studio::RunState::Running:
      return RemoteRunState::Running;
    case studio::RunState::Finished:
      return RemoteRunState::Finished;
    case studio::RunState::Failed:
      return RemoteRunState::Failed;
    case studio::RunState::Stopped:
      return RemoteRunState::Stopped;
  }
  return RemoteRunState::Failed;
}

// One line that prints a file when it exists (status.json of a Slurm run, records).
std::string cat_if_exists_command(const std::string& path) {
  return shell_command({"sh", "-c", "if [ -f \"$1\" ]; then cat -- \"$1\"; fi", "studio-cat", path});
}

RemoteRunStatus detached_status(const SshSession& session, const RemoteRunRecord& record) {
  const RemoteRunLayout layout = run_layout(record);
  const ExecResult r =
      session.exec(status_command(layout, basename_of(record.engine)));
  if (r.exit_status != 0) {
    throw std::runtime_error(session.where() + ": the status of run " + record.run_id +
                             " could not be read (exit " + std::to_string(r.exit_status) +
                             "): " + last_lines(r.std_err));
  }
  const RemoteProcessStatus process = parse_status_output(r.std_out);
  RemoteRunStatus out;
  out.pid = process.pid;
  out.status_json = process.status_json;
  const auto engine = parse_status_json(process.status_json);
  switch (process.state) {
    case RemoteProcessState::NotStarted:
      out.state = RemoteRunState::Failed;
      out.reason = "no pid file in " + record.run_dir() + ": the run was never started there";
      break;
    case RemoteProcessState::Running:
      // A finished engine may still be exiting: it is over once its process is gone.
      out.state = engine ? RemoteRunState::Running : RemoteRunState::Starting;
      break;
    case RemoteProcessState::NotRunning:
      if (!engine) {
        out.state = RemoteRunState::Failed;
        out.reason = "studio-train (pid " + std::to_string(process.pid) +
                     ") exited before it started the run; see " +
                     join_path(record.run_dir(), layout.log_file) + " on " + session.where();
      } else if (engine->state == studio::RunState::Running) {
        out.state = RemoteRunState::Lost;
        out.reason = "status.json says running, but process " + std::to_string(process.pid) +
                     " is gone on " + session.where() +
                     ": the run was killed before it could record how it ended";
      } else {
        out.state = from_engine_state(engine->state);
        out.reason = engine->reason;
      }
      break;
  }
  return out;
}

RemoteRunStatus slurm_status(const SshSession& session, const RemoteRunRecord& record) {
  RemoteRunStatus out;
  const ExecResult status_file = session.exec(cat_if_exists_command(record.status_path()));
  out.status_json = status_file.std_out;
  const auto engine = parse_status_json(out.status_json);

  std::optional<JobStatus> job = parse_squeue(session.exec(squeue_command(record.job_id)).std_out,
                                              record.job_id);
  if (!job || is_terminal(job->state)) {
    auto accounted =
        parse_sacct(session.exec(sacct_command(record.job_id)).std_out, record.job_id);
    if (accounted) job = accounted;
  }
  const std::string job_name = "Slurm job " + record.job_id;
  if (job && !is_terminal(job->state)) {
    if (job->state == JobState::Pending || job->state == JobState::Configuring ||
        job->state == JobState::Requeued) {
      out.state = RemoteRunState::Queued;
      out.reason = job_name + " " + job_state_name(job->state) +
                   (job->reason.empty() ? "" : " (" + job->reason + ")");
    } else {
      out.state = engine ? RemoteRunState::Running : RemoteRunState::Starting;
      out.reason = job_name + " " + job_state_name(job->state);
    }
    return out;
  }
  // The job is over (or the scheduler forgot it): the engine's own record decides, the job's
  // end explains a run the engine could not record.
  if (engine && engine->state != studio::RunState::Running) {
    out.state = from_engine_state(engine->state);
    out.reason = engine->reason;
  } else if (job) {
    out.state = job->state == JobState::Completed   ? RemoteRunState::Finished
                : job->state == JobState::Cancelled ? RemoteRunState::Stopped
                                                    : RemoteRunState::Failed;
    out.reason = job_name + " " + job_state_name(job->state) +
                 (job->reason.empty() ? "" : ": " + job->reason);
    if (engine && out.state == RemoteRunState::Finished) {
      out.state = RemoteRunState::Lost;
      out.reason = job_name + " completed but status.json still says running";
    }
  } else {
    out.state = RemoteRunState::Lost;
    out.reason = job_name + " is known neither to squeue nor to sacct on " + session.where() +
                 (engine ? " and status.json says running" : " and the engine never started");
  }
  return out;
}

// What a Folder run's folder holds: the host's clock, each known file's modification time, and
// status.json's text. One exec; `stat -c %Y` is GNU coreutils', as on every Linux cluster.
std::string folder_probe_command(const std::string& folder) {
  return shell_command(
      {"sh", "-c",
       "cd -- \"$1\" 2>/dev/null || { echo gone; exit 0; }\n"
       "date +%s\n"
       "for f in status.json events.jsonl trainer_log.jsonl running_log.txt train.log "
       "train_results.json all_results.json; do\n"
       "  if [ -e \"$f\" ]; then printf '%s %s\\n' \"$f\" \"$(stat -c %Y -- \"$f\")\"; fi\n"
       "done\n"
       "echo ---\n"
       "if [ -f status.json ]; then cat status.json; fi\n"
       "exit 0",
       "studio-folder", folder});
}

RemoteRunStatus folder_status(const SshSession& session, const RemoteRunRecord& record) {
  const ExecResult r = session.exec(folder_probe_command(record.folder));
  if (r.exit_status != 0)
    throw std::runtime_error(session.where() + ": the folder " + record.folder +
                             " could not be looked at (exit " + std::to_string(r.exit_status) +
                             "): " + last_lines(r.std_err));
  RemoteRunStatus out;
  const std::string& text = r.std_out;
  if (text.rfind("gone", 0) == 0) {
    out.state = RemoteRunState::Lost;
    out.reason = record.folder + " is gone on " + session.where() + ": deleted or moved";
    return out;
  }
  const auto split = text.find("\n---\n");
  const std::string head = text.substr(0, split);
  if (split != std::string::npos) out.status_json = text.substr(split + 5);
  long long now = 0, newest = 0;
  std::vector<std::string> present;
  std::size_t pos = 0;
  for (bool first = true; pos < head.size(); first = false) {
    const auto end = std::min(head.find('\n', pos), head.size());
    const std::string line = head.substr(pos, end - pos);
    pos = end + 1;
    if (first) {
      now = std::atoll(line.c_str());
      continue;
    }
    const auto space = line.rfind(' ');
    if (space == std::string::npos) continue;
    const std::string name = line.substr(0, space);
    present.push_back(name);
    if (name != "train_results.json" && name != "all_results.json")
      newest = std::max(newest, std::atoll(line.c_str() + space + 1));
  }
  auto has = [&](const char* name) {
    return std::find(present.begin(), present.end(), name) != present.end();
  };
  const bool lf = record.folder_events == studio::kTrainerLogFileName;
  const std::string who = lf ? "LLaMA-Factory" : "the run";
  const auto engine = parse_status_json(out.status_json);
  if (engine && engine->state != studio::RunState::Running) {
    out.state = from_engine_state(engine->state);
    out.reason = engine->reason;
    return out;
  }
  for (const char* done : {"train_results.json", "all_results.json"}) {
    if (!has(done)) continue;
    out.state = RemoteRunState::Finished;
    out.reason = "training completed (" + std::string(done) + " written in " + record.folder + ")";
    return out;
  }
  const long long age = newest > 0 && now >= newest ? now - newest : -1;
  if (age >= 0 && age <= kRunFolderLiveSeconds) {
    out.state = has(record.folder_events.c_str()) ? RemoteRunState::Running : RemoteRunState::Starting;
    out.reason = record.folder + " last written " + std::to_string(age) + " s ago";
    return out;
  }
  out.state = RemoteRunState::Lost;
  out.reason = (engine ? "status.json says running, but nothing" : "nothing") +
               std::string(" was written in ") + record.folder + " on " + session.where() +
               " for " + (age < 0 ? std::string("a long time") : std::to_string(age / 60) + " min") +
               ", and " + who + " recorded no end: stopped, failed or stalled (the studio did "
               "not start it and cannot see its processes; attach again to follow it on)";
  return out;
}

}  // namespace

SshOptions ssh_options(const RemoteHostRef& host) {
  std::string error;
  auto parsed = parse_ssh_target(host.target, error);
  if (!parsed) throw std::invalid_argument("host '" + host.target + "': " + error);
  SshOptions options;
  options.target = *parsed;
  options.identity_file = host.identity_file;
  options.known_hosts_file = host.known_hosts_file;
  options.ssh_config_file = host.ssh_config_file;
  return options;
}

RemoteRunLayout run_layout(const RemoteRunRecord& record, int node_rank) {
  RemoteRunLayout layout;
  layout.run_dir = record.run_dir();
  layout.output_dir = record.output_dir();
  layout.log_file = record.log_file(node_rank);
  layout.pid_file = record.pid_file(node_rank);
  return layout;
}

std::string folder_run_id(const RemoteHostRef& host, const std::string& folder) {
  // FNV-1a over host and path: stable across builds and machines, unlike std::hash.
  std::uint64_t h = 1469598103934665603ull;
  for (const std::string& part : {host.target, std::string(1, '\0'), folder}) {
    for (unsigned char c : part) {
      h ^= c;
      h *= 1099511628211ull;
    }
  }
  std::string trimmed = folder;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  char hex[20];
  std::snprintf(hex, sizeof hex, "%08llx", static_cast<unsigned long long>(h & 0xffffffffull));
  return safe_stem(basename_of(trimmed)) + "-" + hex;
}

RemoteRunRecord attach_folder(const SshSession& session, const RemoteHostRef& host,
                              const std::string& folder) {
  if (folder.empty()) throw std::invalid_argument("no folder given to attach to");
  // ~ is the login directory, where a command starts: the shell below sees the path quoted.
  const std::string path = folder == "~"                ? std::string(".")
                           : folder.rfind("~/", 0) == 0 ? folder.substr(2)
                                                        : folder;
  const ExecResult r = session.exec(shell_command(
      {"sh", "-c",
       "cd -- \"$1\" 2>/dev/null || { echo gone; exit 0; }\n"
       "pwd\n"
       "for f in events.jsonl trainer_log.jsonl studio-remote.json ../studio-remote.json; do\n"
       "  if [ -e \"$f\" ]; then echo \"$f\"; fi\n"
       "done\n"
       "exit 0",
       "studio-attach", path}));
  if (r.exit_status != 0)
    throw std::runtime_error(session.where() + ": the folder " + folder +
                             " could not be looked at (exit " + std::to_string(r.exit_status) +
                             "): " + last_lines(r.std_err));
  std::vector<std::string> lines;
  std::size_t pos = 0;
  while (pos < r.std_out.size()) {
    const auto end = std::min(r.std_out.find('\n', pos), r.std_out.size());
    lines.push_back(r.std_out.substr(pos, end - pos));
    pos = end + 1;
  }
  if (lines.empty() || lines[0] == "gone")
    throw RemoteError(RemoteError::Kind::Transfer, session.where(),
                      "no folder " + folder + " on " + session.where() +
                          " (or it cannot be entered): check the path; a relative one starts at "
                          "the login directory");
  auto has = [&](const char* name) { return std::find(lines.begin() + 1, lines.end(), name) != lines.end(); };
  if (has("studio-remote.json") || has("../studio-remote.json"))
    throw std::invalid_argument(
        folder + " on " + session.where() +
        " belongs to a run the studio submitted: attach to it by its run id (List Runs shows it)");
  RemoteRunRecord record;
  record.kind = RemoteRunKind::Folder;
  record.host = host;
  record.folder = lines[0];
  if (has(studio::kEventsFileName)) {
    record.folder_events = studio::kEventsFileName;
  } else if (has(studio::kTrainerLogFileName)) {
    record.folder_events = studio::kTrainerLogFileName;
  } else {
    throw std::invalid_argument(
        record.folder + " on " + session.where() + " holds neither " + studio::kEventsFileName +
        " (studio-train) nor " + studio::kTrainerLogFileName +
        " (LLaMA-Factory): not a run folder to follow; give the run's output_dir, or attach "
        "again once the run has logged its first step");
  }
  record.run_id = folder_run_id(host, folder);
  record.engine.clear();
  record.config_name = basename_of(record.folder);
  record.submitted = static_cast<double>(std::time(nullptr));
  return record;
}

std::string make_run_id(const std::string& stem) {
  const std::string safe = safe_stem(stem);
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &utc);
  std::random_device random;
  char suffix[8];
  std::snprintf(suffix, sizeof suffix, "%04x", static_cast<unsigned>(random() & 0xffffu));
  return safe + "-" + stamp + "-" + suffix;
}

const char* to_string(RemoteRunState state) {
  switch (state) {
    case RemoteRunState::Queued:
      return "queued";
    case RemoteRunState::Starting:
      return "starting";
    case RemoteRunState::Running:
      return "running";
    case RemoteRunState::Finished:
      return "finished";
    case RemoteRunState::Failed:
      return "failed";
    case RemoteRunState::Stopped:
      return "stopped";
    case RemoteRunState::Lost:
      return "lost";
  }
  return "unknown";
}

bool is_terminal(RemoteRunState state) {
  return state == RemoteRunState::Finished || state == RemoteRunState::Failed ||
         state == RemoteRunState::Stopped || state == RemoteRunState::Lost;
}

RemoteRunStatus query_status(const SshSession& session, const RemoteRunRecord& record) {
  if (record.kind == RemoteRunKind::Folder) return folder_status(session, record);
  return record.kind == RemoteRunKind::Slurm ? slurm_status(session, record)
                                             : detached_status(session, record);
}

std::vector<std::string> cancel_run(const SshSession& session, const RemoteRunRecord& record,
                                    int grace_seconds, const NodeConnector& connect_node) {
  if (record.kind == RemoteRunKind::Folder)
    throw std::invalid_argument(
        "run " + record.run_id + " is " + record.folder + " on " + session.where() +
        ", a folder the studio attached to, not a run it started: stop it where it was started "
        "(its terminal, kill, or scancel); the studio sees it end");
  std::vector<std::string> lines;
  if (record.kind == RemoteRunKind::Slurm) {
    const ExecResult r = session.exec(scancel_command(record.job_id));
    if (r.exit_status != 0) {
      throw std::runtime_error(session.where() + ": scancel " + record.job_id + " failed: " +
                               last_lines(r.std_err + r.std_out));
    }
    lines.push_back("job " + record.job_id + ": cancel requested");
    return lines;
  }
  const std::string engine_name = basename_of(record.engine);
  if (grace_seconds < 0) grace_seconds = record.stop_grace_s;
  auto cancel_on = [&](const SshSession& s, int node) {
    const ExecResult r = s.exec(cancel_command(run_layout(record, node), engine_name, grace_seconds),
                                std::chrono::seconds(grace_seconds + s.operation_timeout_s()));
    if (r.exit_status != 0) {
      throw std::runtime_error(s.where() + ": cancelling node " + std::to_string(node) +
                               " of run " + record.run_id + " failed: " + last_lines(r.std_err));
    }
    lines.push_back("node " + std::to_string(node) + ": " + last_lines(r.std_out));
  };
  // Other nodes first: their launchers would otherwise wait for the gone rank 0 until timeout.
  for (int node = 1; node < record.nnodes && node <= static_cast<int>(record.nodes.size()); ++node) {
    if (!connect_node) {
      throw std::invalid_argument("run " + record.run_id + " spans " +
                                  std::to_string(record.nnodes) +
                                  " nodes: cancelling it needs a connection to each");
    }
    cancel_on(connect_node(record.node_host(node)), node);
  }
  cancel_on(session, 0);
  return lines;
}

std::vector<std::string> cancel_sweep(const SshSession& session,
                                      const std::vector<RemoteRunRecord>& points) {
  if (points.empty()) throw std::invalid_argument("no point of the sweep to cancel was given");
  const RemoteRunRecord& first = points.front();
  const std::string array = first.job_id.substr(0, first.job_id.find('_'));
  for (const RemoteRunRecord& p : points) {
    const std::string what = "run " + p.run_id;
    if (p.kind != RemoteRunKind::Slurm || p.sweep_id.empty())
      throw std::invalid_argument(what + " is not a point of a sweep submitted as a Slurm job array: "
                                  "stop it on its own");
    if (p.sweep_id != first.sweep_id)
      throw std::invalid_argument(what + " belongs to sweep " + p.sweep_id + ", not to " +
                                  first.sweep_id);
    if (p.host.target != first.host.target || p.remote_root != first.remote_root)
      throw std::invalid_argument(what + " is under " + p.remote_root + " on " + p.host.target +
                                  ", not where the sweep's other points are (" +
                                  first.remote_root + " on " + first.host.target + ")");
    const std::size_t underscore = p.job_id.find('_');
    if (underscore == std::string::npos)
      throw std::invalid_argument(what + " is Slurm job " + p.job_id +
                                  ", not a task of a job array");
    if (p.job_id.substr(0, underscore) != array)
      throw std::invalid_argument(what + " is Slurm job " + p.job_id + ", not a task of job array " +
                                  array + " like the sweep's other points");
  }
  require_job_id(array);
  const ExecResult r = session.exec(scancel_command(array));
  if (r.exit_status != 0) {
    throw std::runtime_error(session.where() + ": scancel " + array + " (sweep " + first.sweep_id +
                             ") failed: " + last_lines(r.std_err + r.std_out));
  }
  const std::string name = first.sweep_name.empty() ? first.sweep_id : first.sweep_name;
  return {"job array " + array + " (sweep " + name + ", " + std::to_string(points.size()) +
          " point" + (points.size() == 1 ? "" : "s") + "): cancel requested"};
}

RemoteRunRecord read_remote_record(const SshSession& session, const std::string& remote_root,
                                   const std::string& run_id) {
  if (!is_valid_run_id(run_id)) {
    throw std::invalid_argument("'" + run_id +
                                "' is not a run id (letters, digits, '.', '_' and '-'; as "
                                "`studio submit` printed it)");
  }
  RemoteRunRecord probe;
  probe.remote_root = remote_root;
  probe.run_id = run_id;
  const std::string path = join_path(probe.run_dir(), kRemoteRecordFileName);
  SftpClient sftp(session);
  if (!sftp.stat(path)) {
    throw RemoteError(RemoteError::Kind::Transfer, session.where(),
                      session.where() + ": no run " + run_id + " under " + remote_root +
                          " (" + path + " does not exist); `studio runs --host ...` lists them");
  }
  return RemoteRunRecord::from_json(sftp.read_from(path, 0, 1 << 20),
                                    session.where() + ":" + path);
}

std::vector<RemoteRunRecord> list_remote_runs(const SshSession& session,
                                              const std::string& remote_root,
                                              std::vector<std::string>* problems) {
  // Each record is printed after a line "\036DIR"; folders without one are skipped.
  constexpr const char* kScript =
      "cd -- \"$1\" 2>/dev/null || exit 0\n"
      "for d in */; do f=\"${d}$2\"; [ -f \"$f\" ] || continue; "
      "printf '\\036%s\\n' \"${d%/}\"; cat -- \"$f\"; printf '\\n'; done\n";
  const ExecResult r =
      session.exec(shell_command({"sh", "-c", kScript, "studio-runs", remote_root, kRemoteRecordFileName}));
  if (r.exit_status != 0) {
    throw std::runtime_error(session.where() + ": listing " + remote_root + " failed: " +
                             last_lines(r.std_err));
  }
  std::vector<RemoteRunRecord> runs;
  std::size_t pos = r.std_out.find('\036');
  while (pos != std::string::npos) {
    const std::size_t next = r.std_out.find('\036', pos + 1);
    const std::string chunk = r.std_out.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1);
    const std::size_t eol = chunk.find('\n');
    const std::string dir = chunk.substr(0, eol);
    const std::string where = session.where() + ":" + join_path(join_path(remote_root, dir), kRemoteRecordFileName);
    try {
      RemoteRunRecord record = RemoteRunRecord::from_json(
          eol == std::string::npos ? std::string() : chunk.substr(eol + 1), where);
      if (record.run_id != dir) {
        throw std::invalid_argument(where + ": its run_id '" + record.run_id +
                                    "' is not its folder's name");
      }
      record.remote_root = remote_root;  // the folder may have been moved since
      runs.push_back(std::move(record));
    } catch (const std::exception& e) {
      if (problems) problems->push_back(e.what());
    }
    pos = next;
  }
  std::stable_sort(runs.begin(), runs.end(), [](const RemoteRunRecord& a, const RemoteRunRecord& b) {
    return a.submitted < b.submitted;
  });
  return runs;
}

}  // namespace studio::remote
