#include "studio/remote/remote_run.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <random>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "studio/config/events.h"
#include "studio/remote/sftp_client.h"
#include "studio/remote/shell_quote.h"
#include "studio/remote/slurm_script.h"
#include "studio/remote/slurm_state.h"
#include "remote_text.h"

namespace studio::remote {
namespace {

using nlohmann::json;

constexpr const char* kOutputDir = "output";

using detail::basename_of;
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
  const RemoteRunLayout layout = record.layout();
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

}  // namespace

const char* to_string(RemoteRunKind kind) {
  return kind == RemoteRunKind::Slurm ? "slurm" : "detached";
}

SshOptions RemoteHostRef::ssh_options() const {
  std::string error;
  auto parsed = parse_ssh_target(target, error);
  if (!parsed) throw std::invalid_argument("host '" + target + "': " + error);
  SshOptions options;
  options.target = *parsed;
  options.identity_file = identity_file;
  options.known_hosts_file = known_hosts_file;
  options.ssh_config_file = ssh_config_file;
  return options;
}

std::string RemoteRunRecord::run_dir() const { return join_path(remote_root, run_id); }

RemoteRunLayout RemoteRunRecord::layout(int node_rank) const {
  RemoteRunLayout layout;
  layout.run_dir = run_dir();
  layout.output_dir = kOutputDir;
  if (node_rank > 0) {
    layout.log_file = "train." + std::to_string(node_rank) + ".log";
    layout.pid_file = "train." + std::to_string(node_rank) + ".pid";
  }
  return layout;
}

RemoteHostRef RemoteRunRecord::node_host(int node_rank) const {
  if (node_rank == 0) return host;
  if (node_rank < 0 || node_rank > static_cast<int>(nodes.size())) {
    throw std::out_of_range("run " + run_id + " has no node " + std::to_string(node_rank));
  }
  RemoteHostRef node = host;
  node.target = nodes[static_cast<std::size_t>(node_rank - 1)];
  return node;
}

std::string RemoteRunRecord::events_file_name() const {
  return llamafactory_cli.empty() ? studio::kEventsFileName : studio::kTrainerLogFileName;
}

std::string RemoteRunRecord::events_path() const {
  return join_path(run_dir(), join_path(kOutputDir, events_file_name()));
}
std::string RemoteRunRecord::status_path() const {
  return join_path(run_dir(), studio::status_path(kOutputDir));
}
std::string RemoteRunRecord::log_path() const { return join_path(run_dir(), layout().log_file); }

std::string RemoteRunRecord::to_json() const {
  json j{{"version", version},
         {"run_id", run_id},
         {"host", {{"target", host.target},
                   {"identity_file", host.identity_file},
                   {"known_hosts_file", host.known_hosts_file},
                   {"ssh_config_file", host.ssh_config_file}}},
         {"remote_root", remote_root},
         {"engine", engine},
         {"kind", to_string(kind)},
         {"nproc", nproc},
         {"nnodes", nnodes},
         {"nodes", nodes},
         {"master_addr", master_addr},
         {"job_id", job_id},
         {"config_name", config_name},
         {"submitted", submitted},
         {"stop_grace_s", stop_grace_s}};
  if (!llamafactory_cli.empty()) j["llamafactory_cli"] = llamafactory_cli;
  return j.dump(2) + "\n";
}

RemoteRunRecord RemoteRunRecord::from_json(const std::string& text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse errors, and numbers too large for a double
    throw std::invalid_argument(where + ": not a run record (" + std::string(e.what()) + ")");
  }
  RemoteRunRecord r;
  std::string key;
  try {
    if (!j.is_object()) throw std::invalid_argument("not a JSON object");
    auto get = [&](const json& obj, const char* name, auto& out) {
      key = name;
      if (!obj.contains(name)) throw std::invalid_argument("missing");
      obj.at(name).get_to(out);
    };
    get(j, "version", r.version);
    if (r.version != 1) {
      throw std::invalid_argument("version " + std::to_string(r.version) +
                                  " is newer than this studio reads (1); update the studio");
    }
    get(j, "run_id", r.run_id);
    if (!is_valid_run_id(r.run_id)) throw std::invalid_argument("'" + r.run_id + "' is not a run id");
    key = "host";
    const json& host = j.at("host");
    get(host, "target", r.host.target);
    get(host, "identity_file", r.host.identity_file);
    get(host, "known_hosts_file", r.host.known_hosts_file);
    get(host, "ssh_config_file", r.host.ssh_config_file);
    get(j, "remote_root", r.remote_root);
    get(j, "engine", r.engine);
    std::string kind;
    get(j, "kind", kind);
    if (kind == "slurm") {
      r.kind = RemoteRunKind::Slurm;
    } else if (kind == "detached") {
      r.kind = RemoteRunKind::Detached;
    } else {
      throw std::invalid_argument("'" + kind + "' is not detached or slurm");
    }
    get(j, "nproc", r.nproc);
    get(j, "nnodes", r.nnodes);
    get(j, "nodes", r.nodes);
    get(j, "master_addr", r.master_addr);
    get(j, "job_id", r.job_id);
    get(j, "config_name", r.config_name);
    get(j, "submitted", r.submitted);
    if (j.contains("stop_grace_s")) {
      get(j, "stop_grace_s", r.stop_grace_s);
      if (r.stop_grace_s < 0) throw std::invalid_argument("must not be negative");
    }
    if (j.contains("llamafactory_cli")) get(j, "llamafactory_cli", r.llamafactory_cli);
    if (r.kind == RemoteRunKind::Slurm && !r.job_id.empty()) {
      key = "job_id";
      require_job_id(r.job_id);
    }
  } catch (const std::exception& e) {
    throw std::invalid_argument(where + ": run record key '" + key + "': " + e.what());
  }
  return r;
}

bool is_valid_run_id(const std::string& run_id) {
  if (run_id.empty() || run_id.size() > 200 || run_id[0] == '.' || run_id[0] == '-') return false;
  return run_id.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
         std::string::npos;
}

std::string make_run_id(const std::string& stem) {
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
  return record.kind == RemoteRunKind::Slurm ? slurm_status(session, record)
                                             : detached_status(session, record);
}

std::vector<std::string> cancel_run(const SshSession& session, const RemoteRunRecord& record,
                                    int grace_seconds, const NodeConnector& connect_node) {
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
    const ExecResult r = s.exec(cancel_command(record.layout(node), engine_name, grace_seconds),
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
