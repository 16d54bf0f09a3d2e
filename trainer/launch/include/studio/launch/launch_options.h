#pragma once
// What `studio-train train CONFIG.yaml --nproc N [--nnodes M --node-rank R --master-addr A
// --master-port P]` asks of the launcher: the flags as given, and the options they resolve to
// once the environment (MASTER_ADDR, an srun step with one task per node) fills the gaps.
#include <atomic>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "studio/launch/dist_env.h"

namespace studio::launch {

struct LaunchOptions {
  int nproc = 1;                          // workers on this node
  int nnodes = 1;                         // nodes in the run, each with its own launcher
  int node_rank = 0;                      // this node's index, 0..nnodes-1; node 0 hosts rank 0
  std::string master_addr = "127.0.0.1";  // host of rank 0, reachable from every node
  int master_port = 0;  // 0: a free port is chosen (single node only; multi-node requires one)
  // Node 0: a socket already listening on master_port (a released HeldPort, launcher.h) that
  // rank 0's store serves on; launch_workers closes it. -1: launch_workers binds master_port.
  int store_listen_fd = -1;
  std::vector<std::string> worker_argv;  // program + args every worker runs (argv[0] a path)
  std::string output_dir;     // rank 0's events.jsonl/status.json: a failure is recorded there
                              // (node 0 only; empty: not recorded)
  double stop_timeout_s = 8;  // SIGTERM -> SIGKILL of the remaining workers; with the reaping
                              // that follows, all are gone within 10 s
  double stop_request_extra_s = 0;  // after a stop request (not a failure), this much longer:
                                    // the time save_on_stop's checkpoint may take
  // Non-null and true when the stop request comes: the workers get SIGUSR1 (write a checkpoint
  // of the step every rank has finished, whatever save_on_stop says, then stop) instead of
  // SIGTERM, and checkpoint_stop_extra_s instead of stop_request_extra_s. Slurm's warning
  // before the time limit (remote/slurm_script.h), so that a requeued job resumes there.
  const std::atomic<bool>* checkpoint_stop = nullptr;
  double checkpoint_stop_extra_s = 0;
  // Variables every worker gets on top of the launcher's environment (set here rather than in
  // the launcher's own environment: setenv races with any thread reading it).
  std::vector<std::pair<std::string, std::string>> extra_env;
  int stdout_fd = 1;  // where worker output goes: rank 0's unchanged, others' prefixed
  int stderr_fd = 2;
  // Whole-world restarts after a failure (torchrun's --max-restarts; LLaMA-Factory's
  // MAX_RESTARTS): the caller starts the workers again, from the newest checkpoint, up to this
  // many times. Across nodes the launchers meet at a rendezvous first
  // (trainer/parallel/node_rendezvous.h), hosted by node 0 at master_addr:master_port.
  int max_restarts = 0;
  std::string rdzv_id;       // RDZV_ID (LLaMA-Factory's): names the run at the rendezvous
  int rdzv_timeout_s = 600;  // --rdzv-timeout: how long the nodes wait for each other
  // Whether the launchers of this run meet at a rendezvous: several nodes with restarts, or an
  // RDZV_ID.
  bool elastic() const { return nnodes > 1 && (max_restarts > 0 || !rdzv_id.empty()); }
  // Whether launch_workers records a worker failure in output_dir (a stop is always recorded):
  // false while a restart is still to come, so that the run is not marked failed in between.
  bool record_failure = true;
};

// The launcher flags, in the order torchrun users know them.
inline constexpr const char* kLauncherFlags[] = {"--nproc",       "--nnodes",      "--node-rank",
                                                 "--master-addr", "--master-port", "--max-restarts",
                                                 "--rdzv-timeout"};

// Launcher flags as given on the command line; absent ones are nullopt.
struct LauncherFlags {
  std::optional<int> nproc;
  std::optional<int> nnodes;
  std::optional<int> node_rank;
  std::optional<std::string> master_addr;
  std::optional<int> master_port;
  std::optional<int> max_restarts;
  std::optional<int> rdzv_timeout;

  // True when any launcher flag was given: this process launches workers.
  bool any() const {
    return nproc || nnodes || node_rank || master_addr || master_port || max_restarts ||
           rdzv_timeout;
  }
};

// Removes every launcher flag (`--nproc 4` and `--nproc=4`) from `args` and returns their
// values; the rest of `args` is what each worker gets. Throws std::invalid_argument naming the
// flag for a missing value, a value that is not a number (or is out of range), or a flag given
// twice.
LauncherFlags take_launcher_flags(std::vector<std::string>& args);

// The launch options of a process given launcher flags (worker_argv and output_dir are left
// for the caller). Gaps are filled so that one srun task per node can be the launcher:
//  - nnodes, node_rank: the flags; else, inside an srun step (SLURM_STEP_ID) of more than one
//    task, SLURM_NNODES and SLURM_NODEID, which requires one task per node (SLURM_NTASKS ==
//    SLURM_NNODES); else 1 and 0.
//  - master_addr: the flag, MASTER_ADDR, SLURM_LAUNCH_NODE_IPADDR (multi-node under srun: the
//    node srun ran on, which is node 0 when srun runs in the batch script), else 127.0.0.1
//    on one node; multi-node without any of them is an error.
//  - master_port: the flag, MASTER_PORT, slurm_default_port(SLURM_JOB_ID) for multi-node under
//    srun, else 0 (a free port) on one node; multi-node without any of them is an error.
//  - max_restarts: the flag, else MAX_RESTARTS (LLaMA-Factory's launcher variable), else 0.
//    Restarts across nodes need a rendezvous (RDZV_ID), which is not implemented: more than one
//    node with max_restarts > 0, or RDZV_ID set, is an error that says so.
// Throws std::invalid_argument when --nproc is missing, when node_rank >= nnodes, or when this
// process is already a worker (RANK or WORLD_SIZE set: torchrun or an outer --nproc started it).
LaunchOptions launch_options_from(const LauncherFlags& flags, const Getenv& getenv);

}  // namespace studio::launch
