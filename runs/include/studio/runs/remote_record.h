#pragma once
// studio-remote.json: the record of a training run on a remote host (over SSH, or under Slurm),
// written into the remote run folder at submit time and copied into the studio's local mirror
// folder. With the host and the run id, any studio session (or `studio attach`) finds the run
// again. The record also says where the run's files are on the host. No Qt, no SSH: the remote
// layer (remote/remote_run.h) reaches the host.
//
// Remote layout: <remote_root>/<run_id>/ holds config.yaml (paths rewritten for the remote side),
// data/ (the uploaded dataset files), studio-remote.json, train.log (+ train.<node>.log for the
// other nodes of a multi-node run), train.pid (+ train.<node>.pid), job.sbatch for Slurm, and
// output/ (the config's output_dir: status.json, events.jsonl, checkpoints).
#include <string>
#include <vector>

#include "studio/runs/run_folder.h"

namespace studio {

// Relative to the login directory of the remote user.
inline constexpr const char* kDefaultRemoteRoot = "seqstudio-runs";
// The run's OUTPUT_DIR inside its remote folder.
inline constexpr const char* kRemoteOutputDir = "output";

// How long a stop waits after SIGTERM before SIGKILL: the engine's launcher needs up to 10 s to
// stop its workers (LaunchOptions::stop_timeout_s plus reaping).
inline constexpr int kDefaultCancelGraceSeconds = 15;

// Detached and Slurm: runs the studio started (submit_run). Folder: a run folder on the host the
// studio did not start (a LLaMA-Factory output_dir, or a studio-train one launched by hand),
// attached to by its path (attach_folder): followed, never stopped.
enum class RemoteRunKind { Detached, Slurm, Folder };
const char* to_string(RemoteRunKind kind);

// How to reach the host again: everything the SSH options need that is not a default
// (remote::ssh_options makes them).
struct RemoteHostRef {
  std::string target;            // "[user@]host[:port]" or a ~/.ssh/config alias, as given
  std::string identity_file;     // empty: agent, config, ~/.ssh/id_*
  std::string known_hosts_file;  // empty: ~/.ssh/known_hosts
  std::string ssh_config_file;   // empty: ~/.ssh/config
};

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
  // A point of a sweep submitted as a Slurm job array (remote::submit_sweep): the sweep's folder
  // name under remote_root (its sweep.json, base config and job script) and the point's name
  // there ("01-learning_rate=3e-5"); job_id is then the array task's "ARRAYID_INDEX". Empty for
  // a run of its own.
  std::string sweep_id;
  std::string sweep_point;
  std::string sweep_name;               // as given (--name), for display
  std::vector<std::string> sweep_keys;  // the swept keys, in the sweep's order

  std::string run_dir() const;  // remote_root + "/" + run_id; Folder: folder
  // The run's files in run_dir for one node: node 0 logs to train.log with its pid in train.pid,
  // node k > 0 to train.k.log / train.k.pid, so nodes sharing a file system (an NFS home) never
  // overwrite each other's. Folder: LLaMA-Factory's running_log.txt (or train.log), no pid file
  // that the studio reads, and the events in run_dir itself (output_dir ".").
  std::string log_file(int node_rank = 0) const;
  std::string pid_file(int node_rank = 0) const;
  std::string output_dir() const;
  // Node k's SSH target: host for 0, nodes[k-1] otherwise (same identity and known_hosts).
  // Throws std::out_of_range for a node the run does not have.
  RemoteHostRef node_host(int node_rank) const;
  // output/events.jsonl (output/trainer_log.jsonl for LLaMA-Factory), output/status.json,
  // train.log: relative to the login directory or absolute, ready for SFTP. Folder: the events
  // file, status.json and the log in folder.
  std::string events_file_name() const;  // events.jsonl or trainer_log.jsonl
  std::string events_path() const;
  std::string status_path() const;
  std::string log_path() const;

  std::string to_json() const;
  // Throws std::invalid_argument naming `where` (a file or "host:path") and the bad key.
  static RemoteRunRecord from_json(const std::string& text, const std::string& where);
};

// True for run ids submit_run makes and attach/cancel accept.
bool is_valid_run_id(const std::string& run_id);
// Throws std::invalid_argument unless `job_id` is a Slurm job id such as 1234 or 1234_7.
void require_job_id(const std::string& job_id);

}  // namespace studio
