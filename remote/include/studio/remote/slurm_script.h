#pragma once
// The batch script and command lines of a run submitted to Slurm. The script asks for one task
// per node and runs the engine's launcher in it through srun; inside that srun step the launcher
// reads SLURM_NNODES/SLURM_NODEID for --nnodes/--node-rank (trainer/launch/launch_options.h) and
// MASTER_ADDR/MASTER_PORT from the environment the script exports, so the script passes only
// --nproc. The job runs in the directory sbatch was called from: the run folder.
#include <string>
#include <string_view>
#include <vector>

#include "studio/remote/detached_run.h"

namespace studio::remote {

struct SbatchOptions {
  std::string job_name = "studio-train";  // printable, no whitespace, quotes, '#' or '\'
  int nodes = 1;                          // >= 1; one launcher per node
  int gpus_per_node = 1;                  // workers per node (--nproc); 0: CPU only, 1 worker
  std::string partition;                  // empty: the cluster's default
  std::string time;                       // wall-clock limit in a Slurm format; empty: default
  std::string account;                    // empty: the user's default
  int cpus_per_task = 0;                  // CPUs for each node's launcher and workers; 0: default
  int master_port = 0;  // 0: 29500 + SLURM_JOB_ID % 10000, the engine's own Slurm default
  // Non-empty: each node runs LLaMA-Factory under `ENGINE supervise` (detached_run.h's
  // engine_argv); supervise takes NODE_RANK and NNODES from Slurm.
  std::string llamafactory_cli;
  std::string output_dir = "output";
  // studio-train jobs (llamafactory_cli empty) only:
  // - requeue: `#SBATCH --requeue`, so that Slurm puts the job back in the queue after a
  //   preemption or a node failure; false writes --no-requeue.
  // - checkpoint_before_end_s > 0: `#SBATCH --signal=B:USR1@S`. S seconds before the time limit
  //   (Slurm may send it up to 60 s earlier) the script sends SIGUSR1 to the engine, which
  //   writes a checkpoint of the step every rank has finished and stops; with `requeue` the
  //   script then requeues the job (`scontrol requeue`), and the engine of the next run
  //   resumes from its newest checkpoint (SLURM_RESTART_COUNT; app/cmd_train.cpp). The same
  //   happens at a preemption where the cluster sets preempt_send_user_signal. 0: no signal.
  bool requeue = true;
  int checkpoint_before_end_s = 300;
  // More directives, each written as "#SBATCH <directive>", e.g. "--mail-type=END",
  // "--exclusive", "--constraint=a100". Each must start with '-' and hold no newline.
  std::vector<std::string> extra_directives;
  // A job array (a sweep, remote::submit_sweep): array_size > 0 writes `#SBATCH
  // --array=0-(array_size-1)[%array_parallel]`, and task I first enters the run folder
  // ../array_dir_prefix + I (I zero-padded to array_index_width digits), a sibling of the
  // folder sbatch was called from: each task is an ordinary run of one point, with its own job id
  // (SLURM_JOB_ID, hence its own MASTER_PORT), requeue and time-limit checkpoint.
  int array_size = 0;      // 0: no array; at most kMaxArraySize tasks
  int array_parallel = 0;  // tasks running at once; 0: as many as the cluster allows
  std::string array_dir_prefix;
  int array_index_width = 2;

  // Throws std::invalid_argument naming the field, the value and what is allowed.
  void validate() const;
};

// Slurm's default MaxArraySize is 1001 (indices 0..1000); a cluster may set it lower.
inline constexpr int kMaxArraySize = 1001;

// The run folder of array task `index`: prefix + index zero-padded to `width` digits, as the
// script enters it and as sbatch's %<width>a writes the task's log path.
std::string array_task_dir(const std::string& prefix, int width, int index);

// True for the --time formats sbatch accepts: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, UNLIMITED or
// INFINITE (any case).
bool is_valid_slurm_time(std::string_view time);

// The whole batch script (bash): #SBATCH lines, MASTER_ADDR (the first host of the allocation,
// where the batch script and rank 0 run) and MASTER_PORT, then
// `srun --ntasks-per-node=1 --kill-on-bad-exit=1 [--cpus-per-task=C] ENGINE train CONFIG
// --nproc G`: run in the background and waited for when the script handles the time-limit
// signal (checkpoint_before_end_s), exec'd otherwise.
std::string sbatch_script(const SbatchOptions& options, const std::string& engine,
                          const std::string& config_file);

// One line that cd's to the run folder and submits SCRIPT_FILE (relative to it) with
// --parsable, output appended to the layout's log file. Prints "JOBID" or "JOBID;CLUSTER".
std::string sbatch_submit_command(const RemoteRunLayout& layout, const std::string& script_file);

// A job array's submit: cd's to `dir` (the sweep's folder) and submits SCRIPT_FILE with
// --parsable; each task's output is appended to OUTPUT_DIR_PREFIX<index>/train.log, where
// <index> is the task index padded to `width` digits (sbatch's %<width>a).
std::string sbatch_array_submit_command(const std::string& dir, const std::string& dir_prefix,
                                        int width, const std::string& script_file);

// Job ids as sbatch prints them: digits, optionally "_N" for an array task. Throws
// std::invalid_argument otherwise, so no other text reaches a command line (runs/remote_record.h,
// where a record's job_id is checked too).
using studio::require_job_id;

// `squeue -h -r -t all -j ID -o "%i|%T|%M|%R"` (-r: one line per array task, so a pending
// task "123_4" is listed as itself, not inside "123_[4-9]"): read with parse_squeue.
std::string squeue_command(const std::string& job_id);
// `sacct -n -P -j ID --format=JobID,State,ExitCode,Elapsed`: read with parse_sacct.
std::string sacct_command(const std::string& job_id);
// `scancel ID`: Slurm sends SIGTERM to every step, then SIGKILL after its KillWait.
std::string scancel_command(const std::string& job_id);

}  // namespace studio::remote
