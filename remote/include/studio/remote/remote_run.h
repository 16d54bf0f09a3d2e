#pragma once
// A training run on a remote host as the studio and the headless subcommands know it. The run's
// state lives on the remote host (its folder, the engine's status.json and events.jsonl, the pid
// file or the Slurm job) plus one record, studio-remote.json, written into the remote run folder
// at submit time and copied into the local mirror folder: with the host and the run id, any
// studio session (or `studio attach`) can find the run again.
//
// Remote layout: <remote_root>/<run_id>/ holds config.yaml (paths rewritten for the remote side),
// data/ (the uploaded dataset files), studio-remote.json, train.log (+ train.<node>.log for the
// other nodes of a multi-node run), train.pid, job.sbatch for Slurm, and output/ (the config's
// output_dir: status.json, events.jsonl, checkpoints).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "studio/remote/detached_run.h"
#include "studio/remote/ssh_session.h"

namespace studio::remote {

inline constexpr const char* kRemoteRecordFileName = "studio-remote.json";
// Relative to the login directory of the remote user.
inline constexpr const char* kDefaultRemoteRoot = "seqstudio-runs";

// Detached and Slurm: runs the studio started (submit_run). Folder: a run folder on the host the
// studio did not start (a LLaMA-Factory output_dir, or a studio-train one launched by hand),
// attached to by its path (attach_folder): followed, never stopped.
enum class RemoteRunKind { Detached, Slurm, Folder };
const char* to_string(RemoteRunKind kind);

// How to reach the host again: everything SshOptions needs that is not a default.
struct RemoteHostRef {
  std::string target;            // "[user@]host[:port]" or a ~/.ssh/config alias, as given
  std::string identity_file;     // empty: agent, config, ~/.ssh/id_*
  std::string known_hosts_file;  // empty: ~/.ssh/known_hosts
  std::string ssh_config_file;   // empty: ~/.ssh/config

  // Throws std::invalid_argument (message names the target) when target does not parse.
  SshOptions ssh_options() const;
};

// Opens a session to another node of a multi-node run (the GUI passes one with its prompts).
using NodeConnector = std::function<SshSession(const RemoteHostRef& node)>;

struct RemoteRunRecord {
  int version = 1;
  std::string run_id;       // folder name under remote_root: [A-Za-z0-9._-]+, not starting '.'/'-'
  RemoteHostRef host;       // node 0, or the Slurm login node
  std::string remote_root;  // absolute, or relative to the login directory
  std::string engine = "studio-train";  // path or PATH name of studio-train on the remote side
  RemoteRunKind kind = RemoteRunKind::Detached;
  int nproc = 1;                   // workers per node
  int nnodes = 1;                  // nodes
  std::vector<std::string> nodes;  // multi-node without Slurm: SSH targets of nodes 1..n-1
  std::string master_addr;         // multi-node without Slurm: rank 0's address
  std::string job_id;              // Slurm: what sbatch printed
  std::string config_name;         // local config file name it was submitted from (display)
  double submitted = 0;            // unix time of the submit
  // SIGTERM -> SIGKILL when cancelled: kDefaultCancelGraceSeconds, plus ddp_timeout when the
  // config saves on stop (stop_grace_seconds); records written before it existed lack it.
  int stop_grace_s = kDefaultCancelGraceSeconds;
  // "" for studio-train; else LLaMA-Factory's llamafactory-cli (path or PATH name on the host),
  // run under `studio-train supervise`: its events are output/trainer_log.jsonl.
  std::string llamafactory_cli;
  // Folder: the run folder on the host (absolute, or relative to the login directory) and the
  // events file in it (events.jsonl or LLaMA-Factory's trainer_log.jsonl).
  std::string folder;
  std::string folder_events;

  std::string run_dir() const;  // remote_root + "/" + run_id; Folder: folder
  // The run's files on the remote side for one node: node 0 logs to train.log with its pid in
  // train.pid, node k > 0 to train.k.log / train.k.pid, so nodes sharing a file system (an NFS
  // home) never overwrite each other's.
  RemoteRunLayout layout(int node_rank = 0) const;
  // Node k's SSH target: host for 0, nodes[k-1] otherwise (same identity and known_hosts).
  RemoteHostRef node_host(int node_rank) const;
  // output/events.jsonl (output/trainer_log.jsonl for LLaMA-Factory), output/status.json,
  // train.log: relative to the login directory or absolute, ready for SFTP. Folder: the events
  // file, status.json and the log (running_log.txt for LLaMA-Factory, else train.log) in folder.
  std::string events_file_name() const;  // events.jsonl or trainer_log.jsonl
  std::string events_path() const;
  std::string status_path() const;
  std::string log_path() const;

  std::string to_json() const;
  // Throws std::invalid_argument naming `where` (a file or "host:path") and the bad key.
  static RemoteRunRecord from_json(const std::string& text, const std::string& where);
};

// A Folder run whose files were written this recently (seconds) is running: neither
// LLaMA-Factory nor a run the studio did not start leaves it a process to look at.
inline constexpr int kFolderLiveSeconds = 15 * 60;

// The record of a run folder on the host that the studio did not start, after checking it is
// one: it holds events.jsonl (ours) or trainer_log.jsonl (LLaMA-Factory's). Its run id (the
// local mirror's name) is the folder's name plus a hash of host and path, so attaching to the
// same folder again finds the same mirror. Throws RemoteError(Transfer) naming the host when the
// folder is not there, std::invalid_argument when it holds neither file (saying which it looked
// for and what to do).
RemoteRunRecord attach_folder(const SshSession& session, const RemoteHostRef& host,
                              const std::string& folder);
// The run id attach_folder gives `folder` on `host` (no connection needed).
std::string folder_run_id(const RemoteHostRef& host, const std::string& folder);

// True for run ids submit_run makes and attach/cancel accept.
bool is_valid_run_id(const std::string& run_id);
// "<stem>-YYYYmmdd-HHMMSS-xxxx" (UTC, 4 random hex digits), stem made safe.
std::string make_run_id(const std::string& stem);

enum class RemoteRunState {
  Queued,    // Slurm: pending
  Starting,  // started, the engine has not written status.json yet
  Running,
  Finished,
  Failed,
  Stopped,
  Lost,  // status.json says running, but the process (or the job) is gone
};
const char* to_string(RemoteRunState state);
bool is_terminal(RemoteRunState state);

struct RemoteRunStatus {
  RemoteRunState state = RemoteRunState::Starting;
  std::string reason;       // why it ended / why Lost; the scheduler's state for Slurm
  long long pid = 0;        // node 0's engine pid (Detached)
  std::string status_json;  // the engine's status.json as read, "" when none yet
};

// One exec (Detached: status_command; Slurm: squeue, then sacct when squeue no longer knows the
// job, plus status.json). Throws RemoteError / SshError on connection problems,
// std::runtime_error when the remote output cannot be read.
RemoteRunStatus query_status(const SshSession& session, const RemoteRunRecord& record);

// Stops the run: (a Folder run is refused with std::invalid_argument: the studio did not start
// it) the detached process group on every node (SIGTERM, SIGKILL after the grace
// time, record.stop_grace_s when < 0; nodes other than the session's through `connect_node`) or
// scancel (Slurm's KillWait is the grace there). Returns one line per
// node saying what happened ("node 0: stopped 1234", "job 42: cancelled", ...).
std::vector<std::string> cancel_run(const SshSession& session, const RemoteRunRecord& record,
                                    int grace_seconds = -1,
                                    const NodeConnector& connect_node = {});

// Reads <remote_root>/<run_id>/studio-remote.json. Throws RemoteError(Transfer) naming the host
// and the path when it is missing ("no run RUN_ID under ROOT on HOST").
RemoteRunRecord read_remote_record(const SshSession& session, const std::string& remote_root,
                                   const std::string& run_id);

// Every run folder under remote_root holding a readable record, oldest first. Folders whose
// record cannot be read are returned in `problems` ("path: why"), not thrown.
std::vector<RemoteRunRecord> list_remote_runs(const SshSession& session,
                                              const std::string& remote_root,
                                              std::vector<std::string>* problems = nullptr);

}  // namespace studio::remote
