#pragma once
// The command lines that start, stop and inspect a training run on a remote host without
// Slurm. The run must outlive the SSH connection that started it, so the engine runs in its own
// session and process group (setsid), with stdin from /dev/null and its output appended to a log
// in the run folder; the pid of that session leader is written to a pid file (atomically: a
// reader sees no file or a whole pid) so a later connection, or a restarted studio, can find it.
//
// Every line is built with shell_command_in_dir: it cd's to the run folder and execs `sh -c
// SCRIPT NAME ARGS...`, where SCRIPT is a constant of this library and every piece of user text
// (paths, flags) arrives as a positional argument. Nothing the user typed is ever parsed by a
// shell, whatever bytes it holds.
#include <string>
#include <vector>

#include "studio/runs/remote_record.h"

namespace studio::remote {

// Where a run lives on the remote host. The file names are relative to run_dir, which is
// absolute or relative to the login directory (see shell_command_in_dir).
struct RemoteRunLayout {
  std::string run_dir;                       // the run folder; the engine's working directory
  std::string config_file = "config.yaml";   // the run config the engine is given
  std::string log_file = "train.log";        // stdout and stderr of the engine, appended
  std::string pid_file = "train.pid";        // the session leader's pid, one line
  std::string output_dir = "output";         // the config's output_dir: status.json lives here

  // output_dir/status.json, relative to run_dir (or absolute when output_dir is).
  std::string status_file() const;
  // Throws std::invalid_argument naming the field for an empty run_dir, an empty or '-'-led
  // file name, or a file name holding '/' where a plain name is needed (log_file, pid_file).
  void validate() const;
};

// The engine's launcher flags (trainer/launch/launch_options.h), as `studio-train train CONFIG`
// takes them. One node: --nproc only (plus --master-port when given). Several nodes: every flag,
// since each node runs its own launcher and they must agree on rank 0's address and port.
struct LauncherArgs {
  int nproc = 1;            // workers (GPUs) on this node, >= 1
  int nnodes = 1;           // nodes in the run, >= 1
  int node_rank = 0;        // 0..nnodes-1; node 0 hosts rank 0
  std::string master_addr;  // rank 0's host, reachable from every node (multi-node: required)
  int master_port = 0;      // 0: the engine picks a free one (one node only)
  // Non-empty: the node runs LLaMA-Factory (`LLAMAFACTORY_CLI train CONFIG`, FORCE_TORCHRUN) under
  // `ENGINE supervise --output-dir OUTPUT_DIR` instead of `ENGINE train`.
  std::string llamafactory_cli;
  std::string output_dir = "output";

  // Throws std::invalid_argument naming the flag and the allowed range.
  void validate() const;
  // The flags, e.g. {"--nproc", "2", "--nnodes", "2", "--node-rank", "1", ...}.
  std::vector<std::string> to_flags() const;
};

// The argv of the engine: ENGINE train CONFIG FLAGS..., or for LLaMA-Factory
// ENGINE supervise --output-dir OUTPUT --env FORCE_TORCHRUN=1 --env NPROC_PER_NODE=N
// [--env NNODES=M --env NODE_RANK=R --env MASTER_ADDR=A --env MASTER_PORT=P] -- CLI train CONFIG
// (under Slurm supervise takes the node's rank from SLURM_NODEID).
std::vector<std::string> engine_argv(const std::string& engine, const std::string& config_file,
                                     const LauncherArgs& launcher);

// One line that cd's to the run folder and starts ENGINE train CONFIG FLAGS... detached: its own
// session and process group (setsid), SIGHUP ignored, stdin </dev/null, stdout and stderr
// appended to the log. The engine process itself writes its pid to the pid file (via a temporary
// file and rename) just before exec, and the line prints that pid on stdout and exits 0 once the
// engine has been exec'd (it does not wait for the run). It exits non-zero with a message on
// stderr when the folder, setsid or the engine is missing (127), or with 3 when the pid file
// names a live engine (same check as cancel_command): one run per folder. `engine` is a path (absolute, or
// relative to the run folder) or a name looked up in PATH.
std::string detached_start_command(const RemoteRunLayout& layout, const std::string& engine,
                                   const LauncherArgs& launcher);

// How long cancel_command waits after SIGTERM before SIGKILL (runs/remote_record.h).
using studio::kDefaultCancelGraceSeconds;

// One line that stops the run whose pid the pid file holds: SIGTERM to its process group, then,
// if the leader is still alive after `grace_seconds`, SIGKILL to the group. Before signalling it
// checks that /proc/PID/cmdline still names `engine_name` (argv[0] or, for an interpreted
// script, argv[1], compared by basename), so a pid reused by another program is never signalled.
// Prints one line: "stopped PID" (ended after SIGTERM), "killed PID" (needed SIGKILL),
// "not-running PID" (already gone, or the pid now belongs to another program) or "no-pid-file";
// exits 0 for all of them and non-zero, with a message on stderr, for an unreadable pid file.
std::string cancel_command(const RemoteRunLayout& layout,
                           const std::string& engine_name = "studio-train",
                           int grace_seconds = kDefaultCancelGraceSeconds);

// One line that prints the run's process state on the first line ("running PID", "not-running
// PID" or "no-pid-file", with the same ownership check as cancel_command) followed, when it
// exists, by the content of the engine's status.json (docs/events.md), verbatim.
std::string status_command(const RemoteRunLayout& layout,
                           const std::string& engine_name = "studio-train");

enum class RemoteProcessState { NotStarted, Running, NotRunning };

struct RemoteProcessStatus {
  RemoteProcessState state = RemoteProcessState::NotStarted;
  long long pid = 0;        // 0 for NotStarted
  std::string status_json;  // status.json as read, empty when there was none
};

// Reads status_command's output; throws std::invalid_argument quoting the first line when it is
// not one the command prints (e.g. the remote shell printed a banner first).
RemoteProcessStatus parse_status_output(const std::string& output);

// Reads detached_start_command's stdout: the pid. Throws std::invalid_argument otherwise.
long long parse_start_output(const std::string& output);

}  // namespace studio::remote
