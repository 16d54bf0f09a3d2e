#pragma once
// Where this process stands in a distributed run, read from the environment a launcher set:
// torchrun or `studio-train train --nproc N` (RANK, WORLD_SIZE, ...), or an srun step
// (SLURM_PROCID, SLURM_NTASKS, ...). No Torch here: the engine turns a DistEnv into a process
// group, and the launcher decides from the same variables whether it may start workers.
#include <functional>
#include <optional>
#include <string>

namespace studio::launch {

// getenv-shaped lookup, so tests and callers can pass a table instead of the real environment.
using Getenv = std::function<const char*(const char*)>;

struct DistEnv {
  int rank = 0;              // global rank, 0..world_size-1
  int local_rank = 0;        // rank on this node: picks the GPU
  int world_size = 1;        // processes in the run
  int local_world_size = 1;  // processes on this node
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";  // host of rank 0's rendezvous store
  int master_port = 29500;
  std::string source = "single";  // single | torchrun | slurm: which variables were read

  bool distributed() const { return world_size > 1; }
};

// Reads, in this order of precedence:
//  - torchrun variables: RANK and WORLD_SIZE (both or neither), LOCAL_RANK (required when
//    WORLD_SIZE > 1), LOCAL_WORLD_SIZE (else WORLD_SIZE/NNODES, else WORLD_SIZE on one node),
//    NNODES (else WORLD_SIZE/LOCAL_WORLD_SIZE), NODE_RANK or GROUP_RANK (else
//    RANK/LOCAL_WORLD_SIZE), MASTER_ADDR and MASTER_PORT (required when WORLD_SIZE > 1);
//  - inside an srun job step (SLURM_STEP_ID or SLURM_STEPID set): SLURM_PROCID, SLURM_NTASKS,
//    SLURM_LOCALID, SLURM_NNODES, SLURM_NODEID, tasks per node from SLURM_STEP_TASKS_PER_NODE,
//    SLURM_NTASKS_PER_NODE or SLURM_TASKS_PER_NODE ("4(x2),2" lists are understood),
//    MASTER_ADDR (else SLURM_LAUNCH_NODE_IPADDR, the node srun ran on: right when srun runs in
//    the batch script on the first node, wrong from a login node) and MASTER_PORT (else 29500 +
//    SLURM_JOB_ID % 10000, so every task of a job agrees and two jobs sharing a node rarely
//    collide). The step condition matters: a batch script itself also carries SLURM_PROCID=0 and
//    SLURM_NTASKS=N, and reading it as rank 0 of N would wait forever for ranks never started;
//  - nothing: a single process.
// Throws std::invalid_argument on partial or inconsistent variables (RANK without WORLD_SIZE,
// RANK >= WORLD_SIZE, a value that is not a number, a port outside 1..65535, a multi-process
// run with no MASTER_ADDR); the message names the variable, its value and what to do.
DistEnv dist_env_from(const Getenv& getenv);
DistEnv dist_env_from_environment();

// True when this process was started as one rank of a distributed job: RANK or WORLD_SIZE is
// set (torchrun, studio-train --nproc), or it is a task of an srun step of more than one task.
// A process given --nproc is a launcher regardless (see launch_options_from); this answers the
// question for a process without launcher flags. Never throws: dist_env_from reports problems.
bool is_worker_process(const Getenv& getenv);

// The variable through which `studio-train train --nproc N` hands rank 0 the listening socket
// of the run's rendezvous store: the launcher binds MASTER_PORT and listens on it before any
// worker starts, so no other process can take the port in between and ranks that connect before
// rank 0's store is up wait in the backlog instead of being refused (launcher.h).
inline constexpr const char* kStoreListenFdVariable = "STUDIO_STORE_LISTEN_FD";

// Takes the socket of kStoreListenFdVariable out of the environment (unset, so that processes
// this one starts neither see it nor inherit the descriptor, which is made close-on-exec):
// nullopt when the variable is not set. Throws std::invalid_argument, naming the variable and
// its value, when it is not a descriptor number or not a listening TCP socket of MASTER_PORT
// (`port`).
std::optional<int> take_store_listen_fd(int port);

// The port every task of Slurm job `job_id` agrees on when MASTER_PORT is not set.
int slurm_default_port(long long job_id);

}  // namespace studio::launch
