#include "studio/remote/detached_run.h"

#include <stdexcept>
#include <string_view>

#include "studio/runs/events.h"
#include "studio/remote/shell_quote.h"
#include "remote_text.h"

namespace studio::remote {
namespace {

// The scripts below run under `sh -c`, so they are POSIX sh (dash, bash, busybox); they take
// every variable part as a positional parameter. Fractional `sleep` is the one extension used
// (GNU coreutils and busybox both accept it).

// Runs under setsid, as the future session leader: record our pid (the engine's, since we exec
// it), then report it on stdout and exec the engine with stdout/stderr to the log. The pipe to
// the starting shell is closed by that exec, which is what lets the starting shell return.
// Args: PID_FILE LOG_FILE ENGINE ARGS...
constexpr std::string_view kChildScript =
    "pid_file=$1; log_file=$2; shift 2\n"
    "trap '' HUP\n"
    "tmp=\"$pid_file.tmp.$$\"\n"
    "{ printf '%s\\n' \"$$\" >\"$tmp\" && mv -f \"$tmp\" \"$pid_file\"; } || exit 1\n"
    "printf '%s\\n' \"$$\"\n"
    "exec \"$@\" >>\"$log_file\" 2>&1\n";

// Checks what can be checked before detaching (so errors reach the caller's stderr instead of
// the log), then starts the child in the background of a command substitution: the
// substitution ends when the child's stdout closes at exec, not when the engine exits.
// A second start in the same folder would overwrite the pid file and lose the first run, so a
// live engine recorded there is refused.
// Args: CHILD_SCRIPT PID_FILE LOG_FILE ENGINE_NAME ENGINE ARGS...
// The umask makes everything the run writes (log, pid file, events, checkpoints) the user's alone.
constexpr std::string_view kStartScript =
    "child=$1; pid_file=$2; log_file=$3; name=$4; shift 4\n"
    "umask 077\n"
    "if [ -e \"$pid_file\" ]; then read_pid \"$pid_file\"; if alive \"$pid\" && ours \"$pid\" "
    "\"$name\"; then printf '%s\\n' \"studio: a run is already running in this folder (pid "
    "$pid); stop it first\" >&2; exit 3; fi; fi\n"
    "case $1 in */*) [ -f \"$1\" ] && [ -x \"$1\" ] ;; *) command -v \"$1\" >/dev/null 2>&1 ;; "
    "esac || { printf '%s\\n' \"studio: cannot start the engine: '$1' is not an executable "
    "file here or in PATH\" >&2; exit 127; }\n"
    "command -v setsid >/dev/null 2>&1 || { printf '%s\\n' \"studio: setsid (util-linux) is "
    "not installed on this host\" >&2; exit 127; }\n"
    "pid=$(setsid sh -c \"$child\" studio-engine \"$pid_file\" \"$log_file\" \"$@\" "
    "</dev/null &)\n"
    "case $pid in ''|*[!0-9]*) printf '%s\\n' \"studio: the engine did not start; see "
    "$log_file\" >&2; exit 1 ;; esac\n"
    "printf '%s\\n' \"$pid\"\n";

// alive PID: the process exists and is not a zombie (an unreaped leader still answers kill -0).
// ours PID NAME: argv[0] or argv[1] of PID has basename NAME; NULs become newlines and newlines
// '?', so an argument holding a newline is still one line.
// read_pid FILE: sets $pid from FILE's first line, or exits 2 with a message.
constexpr std::string_view kProcessFunctions =
    "alive() { s=$(sed -n 's/.*) \\([A-Za-z]\\).*/\\1/p' \"/proc/$1/stat\" 2>/dev/null); "
    "[ -n \"$s\" ] && [ \"$s\" != Z ] && [ \"$s\" != X ]; }\n"
    "ours() { tr '\\000\\012' '\\012?' 2>/dev/null <\"/proc/$1/cmdline\" | head -n 2 | "
    "sed 's,.*/,,' | grep -Fxq -e \"$2\"; }\n"
    "read_pid() { pid=$(head -n 1 \"$1\") || exit 2; case $pid in ''|*[!0-9]*) "
    "printf '%s\\n' \"studio: $1 does not hold a pid\" >&2; exit 2 ;; esac; }\n";

// Args: PID_FILE ENGINE_NAME GRACE_SECONDS
constexpr std::string_view kCancelScript =
    "[ -e \"$1\" ] || { echo no-pid-file; exit 0; }\n"
    "read_pid \"$1\"\n"
    "if ! alive \"$pid\" || ! ours \"$pid\" \"$2\"; then echo \"not-running $pid\"; exit 0; fi\n"
    "kill -s TERM -- \"-$pid\" 2>/dev/null\n"
    "n=$(($3 * 10))\n"
    "while [ \"$n\" -gt 0 ] && alive \"$pid\"; do sleep 0.1; n=$((n - 1)); done\n"
    // Workers that outlived their launcher are still in its group: while any member is left the
    // group id cannot be reused, so signalling the group cannot reach a stranger.
    "if alive \"$pid\"; then kill -s KILL -- \"-$pid\" 2>/dev/null; echo \"killed $pid\"; "
    "else kill -s KILL -- \"-$pid\" 2>/dev/null; echo \"stopped $pid\"; fi\n";

// Args: PID_FILE ENGINE_NAME STATUS_FILE
constexpr std::string_view kStatusScript =
    "if [ ! -e \"$1\" ]; then echo no-pid-file\n"
    "else read_pid \"$1\"; if alive \"$pid\" && ours \"$pid\" \"$2\"; then echo \"running $pid\"; "
    "else echo \"not-running $pid\"; fi; fi\n"
    "if [ -f \"$3\" ]; then cat \"$3\"; fi\n";

void require_name(const std::string& value, const char* field, bool plain) {
  if (value.empty()) {
    throw std::invalid_argument(std::string("remote run: ") + field + " is empty");
  }
  if (value.front() == '-') {
    throw std::invalid_argument(std::string("remote run: ") + field + " '" + value +
                                "' starts with '-', which commands would read as an option; "
                                "prefix it with ./");
  }
  if (plain && value.find('/') != std::string::npos) {
    throw std::invalid_argument(std::string("remote run: ") + field + " '" + value +
                                "' must be a file name in the run folder, without '/'");
  }
}

void require_engine_name(const std::string& name) {
  if (name.empty() || name.find_first_of("/\n") != std::string::npos) {
    throw std::invalid_argument("remote run: engine name '" + name +
                                "' must be a program name without '/' or newlines, such as "
                                "studio-train");
  }
}

std::string sh_in_run_dir(const RemoteRunLayout& layout, std::string_view script,
                          std::vector<std::string> args) {
  std::vector<std::string> argv{"sh", "-c", std::string(script)};
  argv.insert(argv.end(), args.begin(), args.end());
  return shell_command_in_dir(layout.run_dir, argv);
}

long long parse_pid(std::string_view text, const std::string& line) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != text.npos) {
    throw std::invalid_argument("remote run: expected a process id, got '" + line + "'");
  }
  return std::stoll(std::string(text));
}

std::string first_line(const std::string& output, std::string* rest) {
  auto end = output.find('\n');
  if (rest) *rest = end == std::string::npos ? std::string() : output.substr(end + 1);
  return output.substr(0, end);
}

}  // namespace

std::string RemoteRunLayout::status_file() const {
  return status_path(output_dir);
}

void RemoteRunLayout::validate() const {
  if (run_dir.empty()) throw std::invalid_argument("remote run: run_dir is empty");
  require_name(config_file, "config_file", false);
  require_name(log_file, "log_file", true);
  require_name(pid_file, "pid_file", true);
  require_name(output_dir, "output_dir", false);
}

void LauncherArgs::validate() const {
  auto fail = [](const std::string& what) { throw std::invalid_argument("launcher: " + what); };
  if (nproc < 1) fail("--nproc is " + std::to_string(nproc) + "; give 1 or more workers");
  if (nnodes < 1) fail("--nnodes is " + std::to_string(nnodes) + "; give 1 or more nodes");
  if (node_rank < 0 || node_rank >= nnodes) {
    fail("--node-rank " + std::to_string(node_rank) + " is outside 0.." +
         std::to_string(nnodes - 1));
  }
  if (master_port < 0 || master_port > 65535) {
    fail("--master-port " + std::to_string(master_port) + " is outside 1..65535");
  }
  if (!master_addr.empty() &&
      (master_addr.front() == '-' || master_addr.find_first_of(" \t\n") != std::string::npos)) {
    fail("--master-addr '" + master_addr + "' is not a host name or address");
  }
  if (nnodes > 1 && (master_addr.empty() || master_port == 0)) {
    fail("a run over " + std::to_string(nnodes) +
         " nodes needs --master-addr and --master-port (rank 0's host and a free port on it)");
  }
}

std::vector<std::string> LauncherArgs::to_flags() const {
  validate();
  std::vector<std::string> flags{"--nproc", std::to_string(nproc)};
  if (nnodes > 1) {
    flags.insert(flags.end(), {"--nnodes", std::to_string(nnodes), "--node-rank",
                               std::to_string(node_rank)});
  }
  if (!master_addr.empty()) flags.insert(flags.end(), {"--master-addr", master_addr});
  if (master_port != 0) flags.insert(flags.end(), {"--master-port", std::to_string(master_port)});
  return flags;
}

std::vector<std::string> engine_argv(const std::string& engine, const std::string& config_file,
                                     const LauncherArgs& launcher) {
  require_name(engine, "engine", false);
  if (!launcher.llamafactory_cli.empty()) {
    require_name(launcher.llamafactory_cli, "llamafactory_cli", false);
    std::vector<std::string> argv{engine, "supervise", "--output-dir", launcher.output_dir,
                                  "--env", "FORCE_TORCHRUN=1",
                                  "--env", "NPROC_PER_NODE=" + std::to_string(launcher.nproc)};
    if (launcher.nnodes > 1 && !launcher.master_addr.empty()) {
      for (const std::string& kv :
           {"NNODES=" + std::to_string(launcher.nnodes),
            "NODE_RANK=" + std::to_string(launcher.node_rank), "MASTER_ADDR=" + launcher.master_addr,
            "MASTER_PORT=" + std::to_string(launcher.master_port > 0 ? launcher.master_port : 29500)})
        argv.insert(argv.end(), {"--env", kv});
    }
    argv.insert(argv.end(), {"--", launcher.llamafactory_cli, "train", config_file});
    return argv;
  }
  std::vector<std::string> argv{engine, "train", config_file};
  for (std::string& flag : launcher.to_flags()) argv.push_back(std::move(flag));
  return argv;
}

std::string detached_start_command(const RemoteRunLayout& layout, const std::string& engine,
                                   const LauncherArgs& launcher) {
  layout.validate();
  std::vector<std::string> argv = engine_argv(engine, layout.config_file, launcher);
  std::string name = detail::basename_of(engine);
  require_engine_name(name);
  std::vector<std::string> args{"studio-start", std::string(kChildScript), layout.pid_file,
                                layout.log_file, name};
  for (std::string& arg : argv) args.push_back(std::move(arg));
  return sh_in_run_dir(layout, std::string(kProcessFunctions) + std::string(kStartScript),
                       std::move(args));
}

std::string cancel_command(const RemoteRunLayout& layout, const std::string& engine_name,
                           int grace_seconds) {
  layout.validate();
  require_engine_name(engine_name);
  if (grace_seconds < 0 || grace_seconds > 3600) {
    throw std::invalid_argument("remote run: cancel grace period " +
                                std::to_string(grace_seconds) + " s is outside 0..3600");
  }
  std::string script = std::string(kProcessFunctions) + std::string(kCancelScript);
  return sh_in_run_dir(layout, script,
                       {"studio-cancel", layout.pid_file, engine_name,
                        std::to_string(grace_seconds)});
}

std::string status_command(const RemoteRunLayout& layout, const std::string& engine_name) {
  layout.validate();
  require_engine_name(engine_name);
  std::string script = std::string(kProcessFunctions) + std::string(kStatusScript);
  return sh_in_run_dir(layout, script,
                       {"studio-status", layout.pid_file, engine_name, layout.status_file()});
}

RemoteProcessStatus parse_status_output(const std::string& output) {
  RemoteProcessStatus status;
  std::string line = first_line(output, &status.status_json);
  std::string_view view(line);
  if (view == "no-pid-file") return status;
  for (auto [prefix, state] : {std::pair{std::string_view("running "), RemoteProcessState::Running},
                               std::pair{std::string_view("not-running "),
                                         RemoteProcessState::NotRunning}}) {
    if (view.substr(0, prefix.size()) == prefix) {
      status.state = state;
      status.pid = parse_pid(view.substr(prefix.size()), line);
      return status;
    }
  }
  throw std::invalid_argument("remote run: unexpected status output '" + line +
                              "'; expected 'running PID', 'not-running PID' or 'no-pid-file'");
}

long long parse_start_output(const std::string& output) {
  std::string line = first_line(output, nullptr);
  return parse_pid(line, line);
}

}  // namespace studio::remote
