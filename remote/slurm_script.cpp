#include "studio/remote/slurm_script.h"

#include <regex>
#include <stdexcept>

#include "studio/remote/shell_quote.h"

namespace studio::remote {
namespace {

[[noreturn]] void fail(const std::string& field, const std::string& value,
                       const std::string& allowed) {
  throw std::invalid_argument("sbatch option " + field + " '" + value + "': " + allowed);
}

bool has_control_byte(std::string_view text) {
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return true;
  }
  return false;
}

// sbatch splits #SBATCH lines at whitespace and strips quotes, so values that need quoting
// there are refused rather than quoted.
void require_word(const std::string& field, const std::string& value, bool allow_empty) {
  if (value.empty()) {
    if (allow_empty) return;
    fail(field, value, "must not be empty");
  }
  if (has_control_byte(value) || value.find_first_of(" \"'#\\") != std::string::npos) {
    fail(field, value, "must not hold whitespace, newlines, quotes, '#' or '\\'");
  }
}

void require_identifier(const std::string& field, const std::string& value) {
  static const std::regex kName("[A-Za-z0-9_.,-]*");
  if (!std::regex_match(value, kName)) {
    fail(field, value, "use letters, digits and _ . , - only (a comma separates alternatives)");
  }
}

std::string sbatch_line(const std::string& directive) {
  return "#SBATCH " + directive + "\n";
}

}  // namespace

bool is_valid_slurm_time(std::string_view time) {
  static const std::regex kTime(
      "[0-9]+(:[0-9]+){0,2}|[0-9]+-[0-9]+(:[0-9]+){0,2}|[Uu][Nn][Ll][Ii][Mm][Ii][Tt][Ee][Dd]|"
      "[Ii][Nn][Ff][Ii][Nn][Ii][Tt][Ee]");
  return std::regex_match(time.begin(), time.end(), kTime);
}

void SbatchOptions::validate() const {
  require_word("job_name", job_name, false);
  if (nodes < 1) fail("nodes", std::to_string(nodes), "give 1 or more nodes");
  if (gpus_per_node < 0) fail("gpus_per_node", std::to_string(gpus_per_node), "give 0 or more");
  if (cpus_per_task < 0) fail("cpus_per_task", std::to_string(cpus_per_task), "give 0 or more");
  if (checkpoint_before_end_s < 0 || checkpoint_before_end_s > 65535) {
    fail("checkpoint_before_end_s", std::to_string(checkpoint_before_end_s),
         "give 0..65535 seconds (0: no signal before the time limit)");
  }
  if (master_port < 0 || master_port > 65535) {
    fail("master_port", std::to_string(master_port), "give 1..65535, or 0 for the default");
  }
  require_identifier("partition", partition);
  require_identifier("account", account);
  if (!time.empty() && !is_valid_slurm_time(time)) {
    fail("time", time,
         "use minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED (e.g. 1-12:00:00)");
  }
  if (array_size < 0 || array_size > kMaxArraySize) {
    fail("array_size", std::to_string(array_size),
         "give 0 (no array) to " + std::to_string(kMaxArraySize) + " tasks (Slurm's MaxArraySize)");
  }
  if (array_size > 0) {
    if (array_parallel < 0)
      fail("array_parallel", std::to_string(array_parallel), "give 0 (no limit) or more");
    if (array_index_width < 1 || array_index_width > 10)
      fail("array_index_width", std::to_string(array_index_width), "give 1..10 digits");
    static const std::regex kPrefix("[A-Za-z0-9_][A-Za-z0-9._-]*");
    if (!std::regex_match(array_dir_prefix, kPrefix))
      fail("array_dir_prefix", array_dir_prefix,
           "must be a folder name start of letters, digits and . _ - (no '/', no '%')");
  }
  for (const std::string& directive : extra_directives) {
    require_word("extra directive", directive, false);
    if (directive.front() != '-') {
      fail("extra directive", directive, "must be an sbatch option such as --exclusive");
    }
  }
}

std::string array_task_dir(const std::string& prefix, int width, int index) {
  std::string digits = std::to_string(index);
  if (static_cast<int>(digits.size()) < width)
    digits.insert(0, static_cast<std::size_t>(width) - digits.size(), '0');
  return prefix + digits;
}

std::string sbatch_script(const SbatchOptions& options, const std::string& engine,
                          const std::string& config_file) {
  options.validate();
  LauncherArgs launcher;
  launcher.nproc = options.gpus_per_node > 0 ? options.gpus_per_node : 1;
  launcher.llamafactory_cli = options.llamafactory_cli;
  launcher.output_dir = options.output_dir;
  std::string script = "#!/bin/bash\n";
  script += sbatch_line("--job-name=" + options.job_name);
  script += sbatch_line("--nodes=" + std::to_string(options.nodes));
  script += sbatch_line("--ntasks-per-node=1");
  if (options.gpus_per_node > 0) {
    script += sbatch_line("--gpus-per-node=" + std::to_string(options.gpus_per_node));
  }
  if (options.cpus_per_task > 0) {
    script += sbatch_line("--cpus-per-task=" + std::to_string(options.cpus_per_task));
  }
  if (!options.partition.empty()) script += sbatch_line("--partition=" + options.partition);
  if (!options.time.empty()) script += sbatch_line("--time=" + options.time);
  if (!options.account.empty()) script += sbatch_line("--account=" + options.account);
  if (options.array_size > 0) {
    std::string array = "--array=0-" + std::to_string(options.array_size - 1);
    if (options.array_parallel > 0) array += "%" + std::to_string(options.array_parallel);
    script += sbatch_line(array);
  }
  // LLaMA-Factory neither saves on a signal nor resumes on its own where overwrite_output_dir
  // is set (its examples set it): its jobs are left as the cluster's defaults make them.
  const bool engine_job = options.llamafactory_cli.empty();
  const bool trap = engine_job && options.checkpoint_before_end_s > 0;
  if (engine_job) script += sbatch_line(options.requeue ? "--requeue" : "--no-requeue");
  if (trap) {
    script += sbatch_line("--signal=B:USR1@" + std::to_string(options.checkpoint_before_end_s));
  }
  for (const std::string& directive : options.extra_directives) script += sbatch_line(directive);
  script += "# Written by SeqStudio: one engine launcher per node, started by srun.\n";
  // pipefail: a failing scontrol must stop the script, not leave MASTER_ADDR empty.
  script += "set -euo pipefail\n";
  // Everything the run writes on the cluster (events, status, checkpoints, logs) is the user's
  // alone.
  script += "umask 077\n";
  if (options.array_size > 0) {
    // Each task trains one point, in that point's run folder (config, output/, train.log).
    script += "cd -- ../" + shell_quote(options.array_dir_prefix) + "\"$(printf '%0" +
              std::to_string(options.array_index_width) + "d' \"$SLURM_ARRAY_TASK_ID\")\"\n";
  }
  // The batch script runs on the allocation's first node, which is where srun puts task 0 and
  // so rank 0's rendezvous store.
  script += "MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n";
  script += "export MASTER_ADDR\n";
  if (options.master_port > 0) {
    script += "export MASTER_PORT=" + std::to_string(options.master_port) + "\n";
  } else {
    script += "export MASTER_PORT=$((29500 + SLURM_JOB_ID % 10000))\n";
  }
  // --kill-on-bad-exit: when one node's launcher fails, the others are stopped instead of
  // waiting for it in a collective until the time limit.
  std::vector<std::string> srun{"srun", "--ntasks-per-node=1", "--kill-on-bad-exit=1"};
  // Slurm 22.05 stopped passing the job's --cpus-per-task on to srun steps (23.11 restored it),
  // so the step asks for it again.
  if (options.cpus_per_task > 0) {
    srun.push_back("--cpus-per-task=" + std::to_string(options.cpus_per_task));
  }
  for (std::string& arg : engine_argv(engine, config_file, launcher)) srun.push_back(arg);
  if (!trap) {
    script += "exec " + shell_join(srun) + "\n";
    return script;
  }
  // Slurm sends SIGUSR1 to this shell alone (B:) before the time limit. srun passes it on to
  // every node's launcher, which has its workers write a checkpoint and stop; then the job goes
  // back into the queue, and the next run resumes from that checkpoint. bash runs a trap only
  // between commands, so srun runs in the background and `wait` (which a trapped signal
  // interrupts) is repeated until srun has really ended.
  script += "step=\n";
  script += "checkpointed=0\n";
  script += "on_time_limit() {\n";
  script += "  checkpointed=1\n";
  script += "  echo \"SeqStudio: job $SLURM_JOB_ID is near its time limit (SIGUSR1): writing a "
            "checkpoint, then " +
            std::string(options.requeue ? "requeueing the job" : "stopping (--no-requeue)") +
            "\" >&2\n";
  script += "  if [ -n \"$step\" ]; then kill -USR1 \"$step\" 2>/dev/null || true; fi\n";
  script += "}\n";
  script += "trap on_time_limit USR1\n";
  script += shell_join(srun) + " &\n";
  script += "step=$!\n";
  script += "set +e\n";
  script += "while :; do\n";
  script += "  wait \"$step\"\n";
  script += "  status=$?\n";
  script += "  kill -0 \"$step\" 2>/dev/null || break\n";
  script += "done\n";
  if (options.requeue) {
    script += "if [ \"$checkpointed\" = 1 ]; then\n";
    script += "  echo \"SeqStudio: requeueing job $SLURM_JOB_ID (the engine stopped with status "
              "$status)\" >&2\n";
    script += "  scontrol requeue \"$SLURM_JOB_ID\"\n";
    script += "fi\n";
  }
  script += "exit \"$status\"\n";
  return script;
}

std::string sbatch_submit_command(const RemoteRunLayout& layout, const std::string& script_file) {
  layout.validate();
  if (script_file.empty() || script_file.front() == '-') {
    throw std::invalid_argument("sbatch: script file '" + script_file +
                                "' is empty or starts with '-'; prefix it with ./");
  }
  // sbatch expands %j, %N, ... in --output; "%%" is a literal '%'.
  std::string output;
  for (char c : layout.log_file) output += c == '%' ? std::string("%%") : std::string(1, c);
  // sbatch hands its umask to the job (SLURM_UMASK): the log it creates is private too.
  return "umask 077 && " +
         shell_command_in_dir(layout.run_dir, {"sbatch", "--parsable", "--output=" + output,
                                               "--open-mode=append", script_file});
}

std::string sbatch_array_submit_command(const std::string& dir, const std::string& dir_prefix,
                                        int width, const std::string& script_file) {
  if (script_file.empty() || script_file.front() == '-') {
    throw std::invalid_argument("sbatch: script file '" + script_file +
                                "' is empty or starts with '-'; prefix it with ./");
  }
  if (dir_prefix.find_first_of("%/") != std::string::npos || dir_prefix.empty())
    throw std::invalid_argument("sbatch: array folder prefix '" + dir_prefix +
                                "' must be a folder name start without '/' or '%'");
  // The tasks' folders are siblings of `dir`; %<width>a is the task index, zero-padded.
  const std::string output = "../" + dir_prefix + "%" + std::to_string(width) + "a/train.log";
  return "umask 077 && " +
         shell_command_in_dir(dir, {"sbatch", "--parsable", "--output=" + output,
                                    "--open-mode=append", script_file});
}

std::string squeue_command(const std::string& job_id) {
  require_job_id(job_id);
  // -t all: without it squeue drops a job the moment it ends, although slurmctld still knows it
  // (for MinJobAge seconds) and sacct may not (no accounting storage).
  return shell_command({"squeue", "-h", "-r", "-t", "all", "-j", job_id, "-o", "%i|%T|%M|%R"});
}

std::string sacct_command(const std::string& job_id) {
  require_job_id(job_id);
  return shell_command(
      {"sacct", "-n", "-P", "-j", job_id, "--format=JobID,State,ExitCode,Elapsed"});
}

std::string scancel_command(const std::string& job_id) {
  require_job_id(job_id);
  return shell_command({"scancel", job_id});
}

}  // namespace studio::remote
