#include "studio/launch/launcher.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "studio/launch/dist_env.h"
#include "studio/launch/line_prefixer.h"
#include "studio/runs/run_outcome.h"

extern char** environ;

namespace studio::launch {
namespace {

using Clock = std::chrono::steady_clock;

struct Worker {
  int local_rank = 0;
  int rank = 0;
  pid_t pid = -1;
  bool alive = false;
  int exit_code = -1;  // code, or 128 + signal
  int out_fd = -1;     // read ends of the output pipes; -1 for rank 0, whose output is direct
  int err_fd = -1;
};

std::string errno_text(int err) {
  return std::strerror(err);
}

void write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a closed terminal or pipe: the output is lost, the run goes on
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

void note(const LaunchOptions& opt, const std::string& message) {
  write_all(opt.stderr_fd, "[launcher] " + message + "\n");
}

int usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// The launcher's environment with the worker's variables set over it.
// The descriptor number rank 0 finds the store's listening socket at (exec_child puts it there).
constexpr int kStoreFdInChild = 3;

std::vector<std::string> worker_environment(const LaunchOptions& opt, int local_rank, int port,
                                            bool store_socket) {
  std::vector<std::pair<std::string, std::string>> ours = {
      {"RANK", std::to_string(opt.node_rank * opt.nproc + local_rank)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"WORLD_SIZE", std::to_string(opt.nnodes * opt.nproc)},
      {"LOCAL_WORLD_SIZE", std::to_string(opt.nproc)},
      {"MASTER_ADDR", opt.master_addr},
      {"MASTER_PORT", std::to_string(port)},
      {"NNODES", std::to_string(opt.nnodes)},
      {"NODE_RANK", std::to_string(opt.node_rank)},
      {"GROUP_RANK", std::to_string(opt.node_rank)},
  };
  ours.insert(ours.end(), opt.extra_env.begin(), opt.extra_env.end());
  if (store_socket) ours.emplace_back(kStoreListenFdVariable, std::to_string(kStoreFdInChild));
  std::set<std::string> inherited;
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    const bool overridden =
        std::any_of(ours.begin(), ours.end(), [&](const auto& kv) { return kv.first == name; });
    // Another launcher's socket variable (this one was started by a worker) means nothing here.
    if (overridden || name == kStoreListenFdVariable) continue;
    inherited.insert(name);
    env.push_back(entry);
  }
  for (const auto& [name, value] : ours) env.push_back(name + "=" + value);
  // Defaults the user's own settings win over.
  auto set_default = [&](const std::string& name, const std::string& value) {
    if (!inherited.count(name)) env.push_back(name + "=" + value);
  };
  // Fewer fragmentation OOMs on long sequences; PYTORCH_ALLOC_CONF is its newer name.
  if (!inherited.count("PYTORCH_ALLOC_CONF"))
    set_default("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True");
  set_default("TORCH_NCCL_AVOID_RECORD_STREAMS", "1");
  if (opt.nproc > 1)
    set_default("OMP_NUM_THREADS", std::to_string(std::max(1, usable_cpus() / opt.nproc)));
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Between fork and exec only async-signal-safe calls: the pieces are prepared before.
// `store_fd` (-1: none): the store's listening socket, kept open as kStoreFdInChild.
[[noreturn]] void exec_child(pid_t launcher, int out_fd, int err_fd, int store_fd,
                             char* const* argv, char* const* envp, const std::string& exec_error) {
  // The kernel sends SIGTERM when the launcher dies, even by SIGKILL; if it is already gone
  // (it died before this line), nobody is left to watch this worker.
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != launcher) ::_exit(128 + SIGTERM);
  if (out_fd != STDOUT_FILENO) ::dup2(out_fd, STDOUT_FILENO);
  if (err_fd != STDERR_FILENO) ::dup2(err_fd, STDERR_FILENO);
  // Handlers are reset by exec, but ignored signals and the mask are inherited.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig : {SIGINT, SIGTERM, SIGUSR1, SIGPIPE, SIGHUP, SIGQUIT, SIGCHLD})
    ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (store_fd >= 0) {
    // dup2 clears close-on-exec on the copy; a socket already at that number keeps its flag.
    if (store_fd == kStoreFdInChild)
      ::fcntl(store_fd, F_SETFD, 0);
    else if (::dup2(store_fd, kStoreFdInChild) < 0)
      ::_exit(127);
  }
  // Descriptors the caller left inheritable are not the worker's business (ENOSYS: kept).
  ::close_range(store_fd >= 0 ? kStoreFdInChild + 1 : 3, ~0u, 0);
  ::execve(argv[0], argv, envp);
  ::write(STDERR_FILENO, exec_error.data(), exec_error.size());
  ::_exit(127);
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

bool failed(int status) {
  return !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

std::string describe_exit(int rank, int status) {
  if (WIFSIGNALED(status))
    return "rank " + std::to_string(rank) + " was killed by signal " +
           std::to_string(WTERMSIG(status)) + " (" + signal_name(WTERMSIG(status)) + ")";
  return "rank " + std::to_string(rank) + " exited with code " +
         std::to_string(exit_code_of(status));
}

std::string host_suffix(const LaunchOptions& opt) {
  if (opt.nnodes == 1) return {};
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return " on node " + std::to_string(opt.node_rank) + " (" + buf + ")";
}

// Copies the non-zero ranks' output to the launcher's stdout/stderr with "[rank N] " tags. Runs
// on its own thread until every pipe is closed, or until `finishing` is set and the drain time
// is over (a grandchild that inherited a pipe can keep it open after its worker is gone).
class OutputPump {
 public:
  OutputPump(const LaunchOptions& opt, const std::vector<Worker>& workers) {
    for (const Worker& w : workers) {
      const std::string prefix = "[rank " + std::to_string(w.rank) + "] ";
      if (w.out_fd >= 0)
        streams_.push_back({w.out_fd, opt.stdout_fd, w.rank, false, LinePrefixer(prefix)});
      if (w.err_fd >= 0)
        streams_.push_back({w.err_fd, opt.stderr_fd, w.rank, true, LinePrefixer(prefix)});
    }
    if (!streams_.empty()) thread_ = std::thread([this] { run(); });
  }
  ~OutputPump() { finish(); }

  // The last line `rank` wrote on stderr ("" when it is not piped, i.e. rank 0); call after
  // finish().
  std::string last_error_line(int rank) const {
    for (const Stream& s : streams_)
      if (s.rank == rank && s.is_stderr) return s.prefixer.last_line();
    return {};
  }

  void finish() {
    finishing_ = true;
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct Stream {
    int fd;
    int target;
    int rank;
    bool is_stderr;
    LinePrefixer prefixer;
  };

  void close_stream(Stream& s) {
    std::string out;
    s.prefixer.finish(out);
    write_all(s.target, out);
    ::close(s.fd);
    s.fd = -1;
  }

  void run() {
    // Writing to a closed terminal must fail with EPIPE here, not kill the launcher; stop
    // signals stay with the thread that watches the workers.
    sigset_t block;
    sigemptyset(&block);
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGUSR1, SIGCHLD}) sigaddset(&block, sig);
    pthread_sigmask(SIG_BLOCK, &block, nullptr);

    constexpr auto kDrain = std::chrono::milliseconds(1000);
    std::optional<Clock::time_point> drain_until;
    std::vector<char> buf(std::size_t{64} << 10);
    for (;;) {
      std::vector<pollfd> fds;
      std::vector<Stream*> open;
      for (Stream& s : streams_) {
        if (s.fd < 0) continue;
        fds.push_back({s.fd, POLLIN, 0});
        open.push_back(&s);
      }
      if (open.empty()) return;
      if (finishing_ && !drain_until) drain_until = Clock::now() + kDrain;
      if (drain_until && Clock::now() >= *drain_until) {
        for (Stream* s : open) close_stream(*s);
        return;
      }
      if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
      for (std::size_t i = 0; i < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        const ssize_t n = ::read(fds[i].fd, buf.data(), buf.size());
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) {
          close_stream(*open[i]);
          continue;
        }
        std::string out;
        open[i]->prefixer.feed(std::string_view(buf.data(), static_cast<std::size_t>(n)), out);
        write_all(open[i]->target, out);
      }
    }
  }

  std::vector<Stream> streams_;
  std::atomic<bool> finishing_{false};
  std::thread thread_;
};

void validate(const LaunchOptions& opt) {
  auto fail = [](const std::string& m) { throw std::invalid_argument("launch_workers: " + m); };
  if (opt.nproc < 1) fail("nproc must be at least 1, got " + std::to_string(opt.nproc));
  if (opt.nnodes < 1) fail("nnodes must be at least 1, got " + std::to_string(opt.nnodes));
  if (opt.node_rank < 0 || opt.node_rank >= opt.nnodes)
    fail("node_rank " + std::to_string(opt.node_rank) + " is not in 0.." +
         std::to_string(opt.nnodes - 1));
  if (opt.master_port < 0 || opt.master_port > 65535)
    fail("master_port " + std::to_string(opt.master_port) + " is not in 0..65535");
  if (opt.master_port == 0 && opt.nnodes > 1)
    fail(
        "master_port 0 (choose one) works on one node only: every node must agree on the port; "
        "pass --master-port");
  if (opt.master_addr.empty()) fail("master_addr is empty");
  if (!(opt.stop_timeout_s >= 0)) fail("stop_timeout_s must be >= 0");
  if (opt.worker_argv.empty()) fail("worker_argv is empty: nothing to run");
  if (::access(opt.worker_argv[0].c_str(), X_OK) != 0)
    fail("cannot execute '" + opt.worker_argv[0] + "': " + errno_text(errno));
  struct sigaction chld {};
  if (::sigaction(SIGCHLD, nullptr, &chld) == 0 && chld.sa_handler == SIG_IGN)
    throw std::logic_error(
        "launch_workers: SIGCHLD is ignored, so the workers' exit status would "
        "be lost; restore its default before launching");
}

}  // namespace

std::string signal_name(int sig) {
  if (const char* abbrev = ::sigabbrev_np(sig)) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(sig);
}

HeldPort::HeldPort(int fd, int port) : fd_(fd), port_(port) {}

HeldPort::HeldPort(HeldPort&& other) noexcept : fd_(other.fd_), port_(other.port_) {
  other.fd_ = -1;
}

HeldPort& HeldPort::operator=(HeldPort&& other) noexcept {
  std::swap(fd_, other.fd_);
  std::swap(port_, other.port_);
  return *this;
}

HeldPort::~HeldPort() {
  if (fd_ >= 0) ::close(fd_);
}

int HeldPort::release() {
  return std::exchange(fd_, -1);
}

HeldPort HeldPort::listen_on(int port, std::string& error) {
  HeldPort s;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    error = "socket: " + errno_text(errno);
    return s;
  }
  s.fd_ = fd;
  // As c10d's own store does: a port whose last run's connections linger in TIME_WAIT is free.
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof addr;
  const char* step = "bind";
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  if (ok) {
    step = "listen";
    ok = ::listen(fd, SOMAXCONN) == 0;
  }
  if (ok) {
    step = "getsockname";
    ok = ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  }
  if (!ok) {
    error = std::string(step) + ": " + errno_text(errno);
    ::close(fd);
    s.fd_ = -1;
    return s;
  }
  s.port_ = ntohs(addr.sin_port);
  return s;
}

int choose_free_port() {
  std::string error;
  const HeldPort held = HeldPort::listen_on(0, error);
  if (!held.held()) throw std::runtime_error("cannot find a free port: " + error);
  return held.port();
}

std::string self_executable_path() {
  std::vector<char> buf(4096);
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return "/proc/self/exe";
  return std::string(buf.data(), static_cast<std::size_t>(n));
}

namespace {

// Forks and execs every worker; returns "" or why the next one could not be started (the ones
// started before it are in `workers`, alive).
std::string spawn_workers(const LaunchOptions& opt, int port, int store_fd,
                          std::vector<Worker>& workers) {
  const pid_t self = ::getpid();
  const std::string exec_error = "studio-train: cannot execute " + opt.worker_argv[0] + "\n";
  std::vector<std::string> argv_strings = opt.worker_argv;
  const std::vector<char*> argv = c_strings(argv_strings);
  for (int local = 0; local < opt.nproc; ++local) {
    Worker& w = workers[static_cast<std::size_t>(local)];
    w.local_rank = local;
    w.rank = opt.node_rank * opt.nproc + local;
    const std::string who = "cannot start rank " + std::to_string(w.rank);
    const int child_store_fd = w.rank == 0 ? store_fd : -1;
    std::vector<std::string> env_strings =
        worker_environment(opt, local, port, child_store_fd >= 0);
    const std::vector<char*> envp = c_strings(env_strings);
    int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
    if (local > 0 && (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0)) {
      const std::string error = who + ": pipe: " + errno_text(errno);
      for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]})
        if (fd >= 0) ::close(fd);
      return error;
    }
    const int child_out = local > 0 ? out_pipe[1] : opt.stdout_fd;
    const int child_err = local > 0 ? err_pipe[1] : opt.stderr_fd;
    const pid_t pid = ::fork();
    if (pid == 0)
      exec_child(self, child_out, child_err, child_store_fd, argv.data(), envp.data(), exec_error);
    const int fork_errno = errno;
    if (local > 0) {
      ::close(out_pipe[1]);
      ::close(err_pipe[1]);
      w.out_fd = out_pipe[0];
      w.err_fd = err_pipe[0];
    }
    if (pid < 0) return who + ": fork: " + errno_text(fork_errno);
    w.pid = pid;
    w.alive = true;
  }
  return {};
}

// Waits for every worker. The first failure (or a stop request) sends SIGTERM to the rest, and
// SIGKILL to those still there opt.stop_timeout_s later. Fills the result but for exit_codes.
class Watch {
 public:
  Watch(const LaunchOptions& opt, std::vector<Worker>& workers, LaunchResult& result)
      : opt_(opt), workers_(workers), result_(result) {}

  void failed_to_start(const std::string& why) {
    result_.reason = why + host_suffix(opt_);
    result_.exit_code = 1;
    note(opt_, result_.reason + ": stopping the workers already started");
    begin_stop();
  }

  void run(const std::atomic<bool>* stop) {
    while (alive() > 0) {
      reap();
      if (!stopping_ && stop != nullptr && stop->load()) {
        result_.stopped = true;
        result_.exit_code = kExitStopped;
        const bool save = opt_.checkpoint_stop != nullptr && opt_.checkpoint_stop->load();
        result_.reason = save ? "stopped: the launcher was asked to checkpoint and stop (SIGUSR1)"
                              : "stopped: the launcher was asked to stop (SIGINT/SIGTERM)";
        begin_stop(save ? opt_.checkpoint_stop_extra_s : opt_.stop_request_extra_s,
                   save ? SIGUSR1 : SIGTERM);
        note(opt_, std::string("stop requested: ") + (save ? "SIGUSR1" : "SIGTERM") + " to " +
                       std::to_string(alive()) + " worker(s)");
      }
      if (stopping_ && !killed_ && Clock::now() >= kill_at_ && alive() > 0) kill_the_rest();
      if (alive() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

 private:
  long alive() const {
    return std::count_if(workers_.begin(), workers_.end(), [](const Worker& w) { return w.alive; });
  }

  void begin_stop(double extra_s = 0, int signal = SIGTERM) {
    stopping_ = true;
    grace_s_ = opt_.stop_timeout_s + extra_s;
    kill_at_ = Clock::now() +
               std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(grace_s_));
    for (const Worker& w : workers_)
      if (w.alive) ::kill(w.pid, signal);
  }

  void reap() {
    for (Worker& w : workers_) {
      if (!w.alive) continue;
      int status = 0;
      const pid_t r = ::waitpid(w.pid, &status, WNOHANG);
      if (r == 0 || (r < 0 && errno == EINTR)) continue;
      w.alive = false;
      if (r < 0) status = 255 << 8;  // reaped elsewhere: the status is lost
      w.exit_code = exit_code_of(status);
      if (!failed(status)) continue;
      if (stopping_) {
        // A rank that only saw a broken collective gives way to the rank whose own failure
        // broke it, when that one comes before the others are gone (not by our SIGTERM/SIGKILL).
        const bool ours = w.exit_code == 128 + SIGTERM || (killed_ && w.exit_code == 128 + SIGKILL);
        if (result_.exit_code == kExitPeerFailed && result_.failed_rank >= 0 && !result_.stopped &&
            w.exit_code != kExitPeerFailed && !ours) {
          result_.failed_rank = w.rank;
          result_.exit_code = w.exit_code;
          result_.reason = describe_exit(w.rank, status) + host_suffix(opt_);
          note(opt_, result_.reason + " (the failure the others stopped for)");
        }
        continue;
      }
      result_.failed_rank = w.rank;
      result_.exit_code = w.exit_code;
      result_.reason = describe_exit(w.rank, status) + host_suffix(opt_);
      begin_stop();
      note(opt_,
           result_.reason + ": stopping the " + std::to_string(alive()) + " remaining worker(s)");
    }
  }

  void kill_the_rest() {
    killed_ = true;
    std::string ranks;
    for (const Worker& w : workers_) {
      if (!w.alive) continue;
      ::kill(w.pid, SIGKILL);
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(w.rank);
    }
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", grace_s_);
    note(opt_, "rank(s) " + ranks + " did not exit within " + seconds + " s of SIGTERM: SIGKILL");
  }

  const LaunchOptions& opt_;
  std::vector<Worker>& workers_;
  LaunchResult& result_;
  bool stopping_ = false;
  bool killed_ = false;
  double grace_s_ = 0;
  Clock::time_point kill_at_;
};

}  // namespace

LaunchResult launch_workers(const LaunchOptions& opt, const std::atomic<bool>* stop) {
  // The caller's held port, taken over first so that it is closed whatever happens next.
  HeldPort store(opt.store_listen_fd, opt.master_port);
  validate(opt);
  std::vector<Worker> workers(static_cast<std::size_t>(opt.nproc));
  LaunchResult result;
  // Rank 0's store socket, listening before any worker starts (this node hosts rank 0 of a
  // world of several): the port is held from the moment it is chosen.
  std::string listen_error;
  if (!store.held() && opt.node_rank == 0 && opt.nnodes * opt.nproc > 1)
    store = HeldPort::listen_on(opt.master_port, listen_error);
  if (!listen_error.empty()) {
    result.exit_code = 1;
    result.reason = "cannot listen on port " + std::to_string(opt.master_port) +
                    " for the run's rendezvous store: " + listen_error +
                    (opt.master_port != 0
                         ? " (another run on this host holds it? pass another --master-port, or "
                           "none and a free one is chosen)"
                         : std::string()) +
                    host_suffix(opt);
    note(opt, result.reason);
  } else {
    const int port = store.held()           ? store.port()
                     : opt.master_port != 0 ? opt.master_port
                                            : choose_free_port();
    const std::string spawn_failure = spawn_workers(opt, port, store.fd(), workers);
    store = HeldPort();  // rank 0 holds its own copy now
    OutputPump pump(opt, workers);
    Watch watch(opt, workers, result);
    if (!spawn_failure.empty()) watch.failed_to_start(spawn_failure);
    watch.run(stop);
    pump.finish();
    // Say why, not only how: a failed rank's last line is usually its error message.
    if (result.failed_rank >= 0) {
      const std::string last = pump.last_error_line(result.failed_rank);
      if (!last.empty()) result.reason += ": " + last.substr(0, 2000);
    }
  }

  for (const Worker& w : workers) result.exit_codes.push_back(w.exit_code);
  const bool record = result.stopped || (result.exit_code != 0 && opt.record_failure);
  if (!opt.output_dir.empty() && opt.node_rank == 0 && record)
    result.record_error = record_run_outcome(
        opt.output_dir,
        RunOutcome{result.exit_code, result.stopped && result.failed_rank < 0, result.reason});
  return result;
}

}  // namespace studio::launch
