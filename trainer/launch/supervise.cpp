#include "studio/launch/supervise.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "studio/runs/events.h"
#include "studio/launch/launcher.h"

namespace studio::launch {
namespace {

void write_all(int fd, const char* data, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return;  // the log is gone (a full disk): the program still runs to its end
    }
    data += w;
    n -= static_cast<std::size_t>(w);
  }
}

// A program name without a slash is looked up in PATH, as execvp would.
std::string resolve(const std::string& program) {
  if (program.find('/') != std::string::npos)
    return ::access(program.c_str(), X_OK) == 0 ? program : std::string();
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, end - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return {};
}

}  // namespace

std::string last_line(const std::string& text) {
  std::size_t end = text.size();
  while (end > 0) {
    const std::size_t start = text.rfind('\n', end - 1);
    const std::size_t from = start == std::string::npos ? 0 : start + 1;
    std::string line = text.substr(from, end - from);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.pop_back();
    if (line.find_first_not_of(" \t") != std::string::npos)
      return line.size() > 300 ? line.substr(line.size() - 300) : line;
    if (start == std::string::npos) break;
    end = start;
  }
  return {};
}

SuperviseResult supervise(const SuperviseOptions& opt, const std::atomic<bool>* stop) {
  SuperviseResult result;
  const std::string status_path = studio::status_path(opt.output_dir);
  std::error_code ec;
  std::filesystem::create_directories(opt.output_dir, ec);
  RunStatus status;
  status.pid = ::getpid();
  status.host = status_host_name();
  const auto record = [&](RunState state, const std::string& reason, std::optional<int> code) {
    status.state = state;
    status.reason = reason;
    status.exit_code = code;
    status.updated = kNoValue;
    const std::string error = status.write(status_path);
    if (!error.empty()) result.status_error = error;
  };
  const std::string name = opt.argv.empty() ? std::string() : opt.argv.front();
  const std::string program = opt.argv.empty() ? std::string() : resolve(name);
  if (program.empty()) {
    const std::string why = opt.argv.empty()
                                ? "no program to supervise"
                                : "cannot run '" + name + "': not found in PATH or not executable";
    record(RunState::Failed, why, 127);
    throw std::invalid_argument(why);
  }
  record(RunState::Running, "", std::nullopt);

  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    ::setpgid(0, 0);  // its own group: a stop reaches torchrun and every worker
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(1);  // the supervisor died before prctl
    ::dup2(pipe_fds[1], 1);
    ::dup2(pipe_fds[1], 2);
    // The program's own folder first in PATH: the torchrun of its environment is the one it
    // starts (a virtual environment's llamafactory-cli runs `torchrun` from PATH).
    if (name.find('/') != std::string::npos) {
      const char* path = std::getenv("PATH");
      const std::string dir = std::filesystem::path(program).parent_path().string();
      ::setenv("PATH", (dir + (path && *path ? std::string(":") + path : std::string())).c_str(), 1);
    }
    // Under Slurm each node's supervisor gives LLaMA-Factory the node's place in the job.
    if (const char* node = std::getenv("SLURM_NODEID"); node && !std::getenv("NODE_RANK"))
      ::setenv("NODE_RANK", node, 1);
    if (const char* nodes = std::getenv("SLURM_NNODES"); nodes && !std::getenv("NNODES"))
      ::setenv("NNODES", nodes, 1);
    for (const auto& [k, v] : opt.extra_env) ::setenv(k.c_str(), v.c_str(), 1);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE}) ::sigaction(sig, &dfl, nullptr);
    std::vector<char*> args;
    for (const auto& a : opt.argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(program.c_str(), args.data());
    const std::string msg = "studio-train supervise: cannot execute " + program + ": " +
                            std::strerror(errno) + "\n";
    write_all(2, msg.data(), msg.size());
    ::_exit(127);
  }
  ::setpgid(child, child);  // also here, so that a stop right away finds the group
  ::close(pipe_fds[1]);

  std::string tail;  // the last output, for the reason of a failure
  bool stopping = false;
  auto stop_sent = std::chrono::steady_clock::time_point{};
  bool killed = false;
  auto exited_at = std::chrono::steady_clock::time_point{};
  int wstatus = 0;
  bool exited = false;
  bool pipe_open = true;
  while (!exited || pipe_open) {
    if (stop && stop->load() && !stopping && !exited) {
      stopping = true;
      stop_sent = std::chrono::steady_clock::now();
      ::kill(-child, SIGTERM);
    }
    if (stopping && !killed && !exited &&
        std::chrono::steady_clock::now() - stop_sent > std::chrono::duration<double>(opt.grace_s)) {
      killed = true;
      ::kill(-child, SIGKILL);
    }
    if (pipe_open) {
      pollfd p{pipe_fds[0], POLLIN, 0};
      const int n = ::poll(&p, 1, 200);
      if (n > 0) {
        char buf[65536];
        const ssize_t r = ::read(pipe_fds[0], buf, sizeof buf);
        if (r > 0) {
          write_all(opt.stdout_fd, buf, static_cast<std::size_t>(r));
          tail.append(buf, static_cast<std::size_t>(r));
          if (tail.size() > 16384) tail.erase(0, tail.size() - 8192);
        } else if (r == 0) {
          pipe_open = false;
        }
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!exited) {
      const pid_t w = ::waitpid(child, &wstatus, WNOHANG);
      if (w == child) {
        exited = true;
        exited_at = std::chrono::steady_clock::now();
        // Workers the program left behind in its group go with it.
        ::kill(-child, SIGTERM);
      }
    }
    // A program that exited while something of its group keeps the pipe open: SIGKILL after
    // 10 s, and stop reading 5 s later whatever holds it.
    if (exited && pipe_open) {
      const auto after = std::chrono::steady_clock::now() - exited_at;
      if (after > std::chrono::seconds(10) && !killed) killed = true, ::kill(-child, SIGKILL);
      if (after > std::chrono::seconds(15)) pipe_open = false;
    }
  }
  ::close(pipe_fds[0]);

  const std::string last = last_line(tail);
  const std::string what = std::filesystem::path(name).filename().string();
  if (stopping) {
    result.exit_code = kExitStopped;
    result.state = "stopped";
    result.reason = "stopped on request" + std::string(killed ? " (killed after the grace time)" : "");
    record(RunState::Stopped, result.reason, result.exit_code);
  } else if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) {
    result.exit_code = 0;
    result.state = "finished";
    record(RunState::Finished, "", 0);
  } else {
    result.state = "failed";
    if (WIFSIGNALED(wstatus)) {
      result.exit_code = 128 + WTERMSIG(wstatus);
      result.reason = what + " was killed by signal " + std::to_string(WTERMSIG(wstatus)) + " (" +
                      signal_name(WTERMSIG(wstatus)) + ")";
    } else {
      result.exit_code = WEXITSTATUS(wstatus);
      result.reason = what + " exited with code " + std::to_string(result.exit_code);
    }
    if (!last.empty()) result.reason += ": " + last;
    record(RunState::Failed, result.reason, result.exit_code);
  }
  return result;
}

}  // namespace studio::launch
