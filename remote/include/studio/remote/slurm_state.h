#pragma once
// What sbatch, squeue and sacct print about a job, read into one state the studio can show.
// squeue knows queued and running jobs (and finished ones for a few minutes, MinJobAge); sacct
// knows every job the accounting storage kept, with exit codes. A job squeue no longer lists is
// looked up with sacct.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace studio::remote {

enum class JobState {
  Pending, Configuring, Running, Completing, Suspended, Requeued, Resizing,  // not over yet
  Completed, Failed, Cancelled, Timeout, NodeFail, OutOfMemory, Preempted, BootFail, Deadline,
  Unknown  // a word this code does not know; treated as not over
};

// Slurm's state word ("RUNNING", "CANCELLED", "OUT_OF_MEMORY", also squeue's short codes like
// "R", "PD", "CA") to a JobState; anything else is Unknown.
JobState job_state_from(std::string_view word);
// Lowercase name for display and tests: "pending", "out_of_memory", ...
const char* job_state_name(JobState state);
// True when the job has ended and will not run again by itself.
bool is_terminal(JobState state);

struct SubmittedJob {
  std::string job_id;   // "123"
  std::string cluster;  // from --parsable "123;cluster", else empty
};

// sbatch's stdout: "Submitted batch job 123" or, with --parsable, "123" or "123;cluster". Other
// lines are skipped. Throws std::invalid_argument quoting the output when no line matches.
SubmittedJob parse_sbatch_output(const std::string& output);

struct JobStep {
  std::string step_id;  // "123.batch", "123.extern", "123.0"
  JobState state = JobState::Unknown;
  std::string state_text;  // as printed, e.g. "CANCELLED by 1000"
  int exit_code = 0;       // ExitCode "X:S": X
  int signal = 0;          // and S, the signal that ended it (0: none)
  std::string elapsed;     // "00:01:05", "1-02:03:04"
};

struct JobStatus {
  std::string job_id;
  JobState state = JobState::Unknown;
  std::string state_text;  // the state as printed
  // For the user: squeue's pending reason ("Resources") or "on NODES"; sacct's "cancelled by
  // uid 1000", "exit code 2 in step 123.0", "signal 9 in step 123.0", "time limit reached", ...
  std::string reason;
  std::string elapsed;       // as printed
  int exit_code = 0;         // sacct only: the job's ExitCode "X:S"
  int signal = 0;
  std::vector<JobStep> steps;  // sacct only, in printed order
};

// Output of squeue_command (`squeue -h -t all -j ID -o "%i|%T|%M|%R"`). nullopt when the job is not
// listed (empty output: ask sacct). Throws std::invalid_argument naming the line for a line
// that is not four '|'-separated fields, or for a job id other than `job_id`.
std::optional<JobStatus> parse_squeue(const std::string& output, const std::string& job_id);

// Output of sacct_command (`sacct -n -P -j ID --format=JobID,State,ExitCode,Elapsed`): the
// job's own line plus its steps. nullopt when sacct printed no line for the job (accounting
// not enabled, or the job not recorded yet). Throws std::invalid_argument naming the line for
// a malformed line, a bad exit code, or a line of another job.
std::optional<JobStatus> parse_sacct(const std::string& output, const std::string& job_id);

}  // namespace studio::remote
