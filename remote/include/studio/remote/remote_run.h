#pragma once
// A training run on a remote host as the studio and the headless subcommands know it. The run's
// state lives on the remote host (its folder, the engine's status.json and events.jsonl, the pid
// file or the Slurm job) plus one record, studio-remote.json (runs/remote_record.h: its format and
// the run folder's layout), written into the remote run folder at submit time and copied into
// the local mirror folder. This layer reaches the host: it reads the record there, asks for the
// run's state, attaches to a folder and stops a run.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "studio/remote/detached_run.h"
#include "studio/remote/ssh_session.h"
#include "studio/runs/remote_record.h"

namespace studio::remote {

// The record and its parts are the run contract's (runs/remote_record.h), known here by their
// names of old too.
using studio::is_valid_run_id;
using studio::kDefaultRemoteRoot;
using studio::kRemoteRecordFileName;
using studio::RemoteHostRef;
using studio::RemoteRunKind;
using studio::RemoteRunRecord;
using studio::to_string;

// The SSH options that reach `host`. Throws std::invalid_argument (message names the target)
// when its target does not parse.
SshOptions ssh_options(const RemoteHostRef& host);

// The run's files on the remote side for one node (RemoteRunRecord::log_file, pid_file,
// output_dir), as the command lines of detached_run.h take them.
RemoteRunLayout run_layout(const RemoteRunRecord& record, int node_rank = 0);

// Opens a session to another node of a multi-node run (the GUI passes one with its prompts).
using NodeConnector = std::function<SshSession(const RemoteHostRef& node)>;

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

// Stops a sweep submitted as a Slurm job array (submit_sweep): one scancel of the array, so its
// running tasks get Slurm's SIGTERM (KillWait is the grace) and its pending ones never start.
// `points`: records of the sweep's points, at least one, all of one sweep (sweep_id) and one
// array (job ids ARRAYID_INDEX); std::invalid_argument otherwise, naming the odd one. Returns
// the line saying what was asked ("job array 42 (sweep lr, 3 points): cancel requested").
std::vector<std::string> cancel_sweep(const SshSession& session,
                                      const std::vector<RemoteRunRecord>& points);

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
