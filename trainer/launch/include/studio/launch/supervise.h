#pragma once
// `studio-train supervise`: runs another trainer (LLaMA-Factory's llamafactory-cli) under the same
// run-folder contract as studio-train's own runs, so that the studio starts, follows, detaches
// from, reattaches to and stops it exactly as it does its own (docs/LLAMAFACTORY.md):
//  - OUTPUT_DIR/status.json says running (this process's pid and host) from the start, and how
//    the program ended: finished (exit 0), failed (its exit code or signal and the last line it
//    wrote, e.g. a Python exception), or stopped (SIGINT/SIGTERM, exit code 130);
//  - the program's stdout and stderr pass through to this process's, line by line;
//  - SIGINT or SIGTERM to this process is passed to the program's whole process group (torchrun
//    and its workers), which gets `grace_s` to end before SIGKILL.
// The program runs in a process group of its own so that nothing of it outlives a stop; it gets
// SIGTERM when this process dies (PR_SET_PDEATHSIG). Given as a path, its folder goes first in its
// PATH (a virtual environment's llamafactory-cli starts that environment's torchrun). Under Slurm
// it gets NODE_RANK = SLURM_NODEID and NNODES = SLURM_NNODES unless they are set.
#include <atomic>
#include <string>
#include <utility>
#include <vector>

namespace studio::launch {

struct SuperviseOptions {
  std::string output_dir;
  std::vector<std::string> argv;  // the program (a path or a name found in PATH) and its arguments
  std::vector<std::pair<std::string, std::string>> extra_env;  // on top of this environment
  double grace_s = 30;            // after a stop request, before SIGKILL
  int stdout_fd = 1;
  int stderr_fd = 2;
};

struct SuperviseResult {
  int exit_code = 0;   // the program's, 128 + signal when a signal killed it, 130 after a stop
  std::string state;   // finished | failed | stopped
  std::string reason;  // "" when it finished
  std::string status_error;  // why status.json could not be written; "" when it was
};

// Runs the program to its end (or until *stop, set by the caller's signal handler). Throws
// std::invalid_argument for an empty argv or a program that cannot be found or executed (the
// status then says failed with that reason too).
SuperviseResult supervise(const SuperviseOptions& options, const std::atomic<bool>* stop);

// The last non-blank line of `text` (at most 300 characters, from its end), for the reason.
std::string last_line(const std::string& text);

}  // namespace studio::launch
