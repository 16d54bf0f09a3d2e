#pragma once
// Starts the workers of one node and watches them, as torchrun does, without Python or Torch:
// each worker gets the torchrun environment (RANK, LOCAL_RANK, WORLD_SIZE, ...), rank 0's
// output passes through unchanged and the others' lines are tagged "[rank N] ", and the first
// worker to fail takes the others down within 10 s instead of leaving them hung in a collective.
#include <atomic>
#include <string>
#include <vector>

#include "studio/launch/launch_options.h"

namespace studio::launch {

// The launcher's exit code after a stop request (SIGINT/SIGTERM), as a shell reports Ctrl-C.
inline constexpr int kExitStopped = 130;
// A worker's exit code when it stopped because a collective broke (a peer failed first; no
// watchdog named a stalled rank): the launcher reports a peer's own failure over it when one
// comes within the stop's grace time.
inline constexpr int kExitPeerFailed = 3;

struct LaunchResult {
  // 0 when every worker exited 0; after a failure the first failing worker's exit code, or
  // 128 + signal when a signal killed it; kExitStopped after a stop request.
  int exit_code = 0;
  // Global rank of the first worker that failed (one that exited with kExitPeerFailed gives way
  // to a peer whose own failure is reaped before the others are gone); -1 when none did.
  int failed_rank = -1;
  // "" on success; else e.g. "rank 2 exited with code 1", "rank 3 was killed by signal 9
  // (SIGKILL)", "stopped: ..."; multi-node runs add the host; a failed rank > 0 adds its last
  // stderr line (its error message), after ": ".
  std::string reason;
  bool stopped = false;         // the stop flag ended the run (and no worker failed first)
  std::vector<int> exit_codes;  // per local rank, as exit_code: code, or 128 + signal
  std::string record_error;     // why recording the outcome in output_dir failed; "" if not
};

// Starts opt.nproc workers running opt.worker_argv and waits for all of them. Each worker gets
// the launcher's environment plus RANK = node_rank * nproc + local rank, LOCAL_RANK,
// WORLD_SIZE = nnodes * nproc, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, NNODES, NODE_RANK,
// GROUP_RANK, and, unless the user set them: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
// (not when PYTORCH_ALLOC_CONF is set either), TORCH_NCCL_AVOID_RECORD_STREAMS=1, and with
// nproc > 1 OMP_NUM_THREADS = usable CPUs / nproc (at least 1) so workers do not oversubscribe.
//
// When a worker exits non-zero or is killed, the others get SIGTERM, then SIGKILL after
// opt.stop_timeout_s. When *stop becomes true (the caller's SIGINT/SIGTERM handler sets it),
// every worker gets SIGTERM, then SIGKILL after opt.stop_timeout_s + opt.stop_request_extra_s
// (save_on_stop's checkpoint). A worker whose launcher dies
// (even by SIGKILL) gets SIGTERM from the kernel (PR_SET_PDEATHSIG), so none is left behind;
// the kernel sends it when the *thread* that called launch_workers exits, so call it from a
// thread that outlives the workers (the main thread).
//
// The node that hosts rank 0 of a world of several binds MASTER_PORT (the given one, or one the
// kernel picks when opt.master_port is 0) and listens on it before starting any worker (or
// takes opt.store_listen_fd, already listening on it); rank 0
// gets that socket as descriptor 3, named by STUDIO_STORE_LISTEN_FD (dist_env.h), and its c10d
// store serves on it. So the chosen port cannot be taken by another process before rank 0 is
// up, and the other ranks' connections wait in the backlog meanwhile. A port that cannot be
// bound fails the launch (exit code 1, the reason naming the port) before any worker starts.
//
// On node 0, with opt.output_dir set, a failure or a stop is recorded there by
// record_run_outcome (runs/run_outcome.h) unless rank 0 already wrote its own end event.
//
// Call it before loading anything heavy (and before CUDA): it forks. Throws
// std::invalid_argument for bad options (nproc < 1, node_rank >= nnodes, an empty worker_argv,
// a program that is not executable, master_port 0 with several nodes) and std::logic_error
// when SIGCHLD is ignored (the workers' exit status would be lost).
LaunchResult launch_workers(const LaunchOptions& opt, const std::atomic<bool>* stop);

// A TCP socket bound on every interface (IPv4) and listening: a port held from the moment it is
// chosen, for a run's rendezvous store (LaunchOptions::store_listen_fd). Closed when destroyed.
class HeldPort {
 public:
  HeldPort() = default;
  HeldPort(int fd, int port);  // takes over `fd` (-1: none)
  HeldPort(const HeldPort&) = delete;
  HeldPort(HeldPort&& other) noexcept;
  HeldPort& operator=(HeldPort&& other) noexcept;
  ~HeldPort();

  // Binds `port` (0: one the kernel picks) and listens (SO_REUSEADDR, as c10d's store does).
  // Not held(), with `error` saying which call failed and why, when it cannot.
  static HeldPort listen_on(int port, std::string& error);

  bool held() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  int port() const { return port_; }
  // The descriptor, no longer closed by this object.
  int release();

 private:
  int fd_ = -1;
  int port_ = 0;
};

// A TCP port free on every interface right now (bind port 0, read it back). Another process
// may take it before anyone binds it again: prefer a HeldPort. Throws std::runtime_error when
// no socket can be bound.
int choose_free_port();

// This program's path (/proc/self/exe resolved), for worker_argv[0].
std::string self_executable_path();

// "SIGKILL" for 9, "signal 64" for a signal without a name.
std::string signal_name(int sig);

}  // namespace studio::launch
