// studio-train sweep: one base config trained at several values of some keys, as a queue of
// runs on this machine (docs/SWEEPS.md). Every point is checked before anything runs; each is
// an ordinary `studio-train train` run in a folder of its own under the sweep's folder, so the
// studio's runs list, dashboard and comparison open it like any run.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <thread>

#include "cli_args.h"
#include "commands.h"
#include "studio/base/atomic_file.h"
#include "studio/config/config_io.h"
#include "studio/config/sweep.h"
#include "studio/config/validate.h"
#include "studio/runs/events.h"
#include "studio/trainer/checkpoint.h"
#include "studio/trainer/fault_injection.h"

namespace studio::app {
namespace {

namespace fs = std::filesystem;

std::atomic<bool> g_sweep_stop{false};
extern "C" void on_sweep_stop(int) { g_sweep_stop = true; }

std::string self_exe() {
  std::error_code ec;
  const auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("studio-train") : p.string();
}

// A point's state from its folder: finished, failed, stopped, running (a status.json left
// "running" by a sweep that was killed counts as not done), or pending (never started).
std::string point_state(const std::string& dir) {
  RunStatus st;
  std::string error;
  if (!RunStatus::read(status_path(dir), st, error)) return "pending";
  return run_state_name(st.state);
}

// The first and last loss a point's events report ("" when none).
std::string loss_span(const std::string& dir) {
  std::string text, error;
  if (!read_file(events_path(dir), text, error)) return {};
  double first = kNoValue, last = kNoValue;
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    Event e;
    std::string why;
    if (parse_event_line(std::string_view(text).substr(at, end - at), e, why))
      if (const auto* s = e.get<StepEvent>(); s && std::isfinite(s->loss)) {
        if (std::isnan(first)) first = s->loss;
        last = s->loss;
      }
    at = end + 1;
  }
  if (std::isnan(first)) return {};
  char buf[64];
  std::snprintf(buf, sizeof buf, "loss %.4f -> %.4f", first, last);
  return buf;
}

// This process runs the whole queue of `sweep_dir`: it holds kSweepLockFileName (refusing when
// another process does) and says so in kSweepStatusFileName. The lock goes with the process,
// however it ends; the status is rewritten by end().
class QueueDriver {
 public:
  ~QueueDriver() {
    if (fd_ >= 0) ::close(fd_);
  }
  // "" or why the queue cannot be run by this process.
  std::string take(const std::string& sweep_dir) {
    dir_ = sweep_dir;
    const std::string lock = sweep_dir + "/" + kSweepLockFileName;
    fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) return "cannot open " + lock + ": " + std::strerror(errno);
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      if (err == ENOLCK || err == ENOSYS || err == EOPNOTSUPP) {
        // A file system without locks (Lustre mounted noflock, NFS without lockd): the queue
        // runs unguarded against a second one; the open file still tells a stop it is this one.
        std::cerr << "studio-train sweep: warning: " << lock << " cannot be locked here ("
                  << std::strerror(err) << "): do not --resume this sweep while it runs\n";
      } else {
        ::close(fd_);
        fd_ = -1;
        if (err != EWOULDBLOCK) return "cannot lock " + lock + ": " + std::strerror(err);
      RunStatus other;
      std::string why;
      const bool known = RunStatus::read(status_file(), other, why);
      return "another studio-train sweep" +
             (known ? " (pid " + std::to_string(other.pid) + " on " + other.host + ")"
                    : std::string()) +
             " is running the queue of " + sweep_dir +
             ": wait for it, or stop it first (the studio's Stop Sweep, or kill -TERM " +
             (known ? std::to_string(other.pid) : std::string("its pid")) +
             ": its running points stop and the queue can be resumed)";
      }
    }
    return record(RunState::Running).write(status_file());
  }
  // Records how the queue ended; a failure to write is said on stderr (the points' own folders
  // hold their results all the same).
  void end(RunState state, int exit_code, const std::string& reason) const {
    RunStatus done = record(state);
    done.exit_code = exit_code;
    done.reason = reason;
    if (const std::string e = done.write(status_file()); !e.empty())
      std::cerr << "studio-train sweep: " << e << "\n";
  }

 private:
  std::string status_file() const { return dir_ + "/" + kSweepStatusFileName; }
  // This process, in `state`, on this host.
  static RunStatus record(RunState state) {
    RunStatus status;
    status.state = state;
    status.pid = ::getpid();
    status.host = status_host_name();
    return status;
  }
  std::string dir_;
  int fd_ = -1;
};

struct Child {
  pid_t pid = -1;
  std::size_t point = 0;
  int slot = 0;
};

// Starts `studio-train train CONFIG --nproc N` for a point, its output in DIR/train.log, in a
// process group of its own (a stop reaches all its workers), with `devices` visible.
pid_t start_point(const std::string& dir, int nproc, const std::string& devices,
                  const std::vector<std::string>& extra_sets) {
  std::vector<std::string> args{self_exe(), "train", dir + "/config.yaml", "--nproc",
                                std::to_string(nproc)};
  for (const std::string& s : extra_sets) args.insert(args.end(), {"--set", s});
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::setpgid(0, 0);
  const int log = ::open((dir + "/train.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log >= 0) {
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
  }
  const int null = ::open("/dev/null", O_RDONLY);
  if (null >= 0) ::dup2(null, STDIN_FILENO);
  if (!devices.empty()) ::setenv("CUDA_VISIBLE_DEVICES", devices.c_str(), 1);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  ::execv(argv[0], argv.data());
  std::fprintf(stderr, "studio-train sweep: cannot run %s\n", argv[0]);
  ::_exit(127);
}

// The GPUs this machine shows (CUDA_VISIBLE_DEVICES, else /dev/nvidia<N>), as device ids.
std::vector<std::string> visible_gpus() {
  std::vector<std::string> out;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v && *v) {
    std::string s = v, item;
    for (char c : s + ",") {
      if (c == ',') {
        if (!item.empty()) out.push_back(item);
        item.clear();
      } else {
        item += c;
      }
    }
    return out;
  }
  for (int i = 0; i < 64; ++i)
    if (fs::exists("/dev/nvidia" + std::to_string(i))) out.push_back(std::to_string(i));
  return out;
}

}  // namespace

int cmd_sweep(const Argv& argv) {
  cli::Args args(argv, {"--sweep", "--out", "--nproc", "--parallel", "--name", "--resume", "--point"},
                 {"--list", "--dry-run", "--prepare", "--cpu"});
  if (!args.ok()) return usage_error("sweep: " + args.error());
  int nproc = args.positive_int("--nproc", 1);
  int parallel = args.positive_int("--parallel", 1);
  if (!args.ok()) return usage_error("sweep: " + args.error());

  std::string sweep_dir;
  SweepFile sweep;
  if (const auto resume = args.value("--resume")) {
    if (!args.positional().empty() || !args.values("--sweep").empty())
      return usage_error("sweep: --resume DIR takes no config and no --sweep: the folder has them");
    sweep_dir = *resume;
    try {
      sweep = read_sweep(sweep_dir);
    } catch (const std::exception& e) {
      std::cerr << "studio-train sweep: " << e.what() << "\n";
      return kExitInvalid;
    }
    if (!args.value("--nproc")) nproc = sweep.nproc;
  } else {
    if (args.positional().size() != 1)
      return usage_error("sweep: give one base CONFIG.yaml (or --resume SWEEP_DIR)");
    const auto out = args.value("--out");
    if (!out) return usage_error("sweep: needs --out SWEEP_DIR, the folder the points' runs go in");
    sweep_dir = *out;
    sweep.name = args.value("--name").value_or(fs::path(sweep_dir).filename().string());
    sweep.spec.mode = args.flag("--list") ? SweepMode::List : SweepMode::Grid;
    sweep.nproc = nproc;
    try {
      for (const std::string& a : args.values("--sweep")) sweep.spec.axes.push_back(parse_sweep_axis(a));
      sweep.points = expand_sweep(sweep.spec);
    } catch (const std::exception& e) {
      return usage_error(std::string("sweep: ") + e.what());
    }
    std::error_code ec;
    if (fs::exists(fs::path(sweep_dir) / kSweepFileName, ec)) {
      std::cerr << "studio-train sweep: " << sweep_dir << " already holds a sweep: continue it with "
                << "--resume " << sweep_dir << ", or choose another --out\n";
      return kExitInvalid;
    }
    // Every point checked before anything is written.
    ValidateOptions vo;
    vo.nproc_per_node = nproc;
    vo.for_training = true;  // as each point's `studio-train train` checks it
    const CheckResult base = check_config_file(args.positional().front(), vo);
    if (!print_check(base, args.positional().front())) return kExitInvalid;
    const std::string root = fs::absolute(sweep_dir).lexically_normal().string();
    bool bad = false;
    std::vector<RunConfig> configs;
    for (const SweepPoint& p : sweep.points) {
      SweepPointConfig pc = sweep_point_config(base.config, p, root + "/" + p.name, vo);
      for (Diagnostic& d : pc.diagnostics) {
        if (d.severity != Severity::Error) continue;
        bad = true;
        std::cerr << "studio-train sweep: point " << p.name << ": " << d.format() << "\n";
      }
      pc.config.overwrite_output_dir = true;  // its folder holds config.yaml and train.log
      configs.push_back(std::move(pc.config));
    }
    if (bad) {
      std::cerr << "studio-train sweep: nothing was started: change the swept values or the base "
                   "config so that every point is valid\n";
      return kExitInvalid;
    }
    if (args.flag("--dry-run")) {
      for (const SweepPoint& p : sweep.points) std::cout << p.name << "\n";
      return kExitOk;
    }
    if (args.value("--point"))
      return usage_error("sweep: --point I runs one point of a prepared sweep: give --resume DIR");
    fs::create_directories(sweep_dir, ec);
    std::string error;
    std::string base_text;
    if (!read_file(args.positional().front(), base_text, error) ||
        !(error = write_file_atomic(sweep_dir + "/base.yaml", base_text)).empty()) {
      std::cerr << "studio-train sweep: " << error << "\n";
      return kExitFailed;
    }
    for (std::size_t i = 0; i < sweep.points.size(); ++i) {
      // Fault point sweep.write.slow: a slow or busy file system, each point's folder 1 s later.
      if (trainer::fault_requested("sweep.write.slow", static_cast<std::int64_t>(i), 0))
        std::this_thread::sleep_for(std::chrono::seconds(1));
      const std::string dir = sweep_dir + "/" + sweep.points[i].name;
      fs::create_directories(dir, ec);
      if (const std::string e = save_config_file(configs[i], dir + "/config.yaml"); !e.empty()) {
        std::cerr << "studio-train sweep: " << e << "\n";
        return kExitFailed;
      }
    }
    // sweep.json last: whoever sees it (the studio, which starts following the sweep then, or a
    // --resume) finds every point's folder and config.yaml already there. Written first, a
    // studio that looked in between listed a sweep without points and, with nothing active, did
    // not look again.
    if (!(error = write_file_atomic(sweep_dir + "/" + kSweepFileName,
                                    sweep_to_json(sweep).dump(2) + "\n"))
             .empty()) {
      std::cerr << "studio-train sweep: " << error << "\n";
      return kExitFailed;
    }
    if (args.flag("--prepare")) {
      // The folder for a Slurm job array (or a later --resume): one point per array task.
      std::cout << sweep.points.size() << "\n";
      return kExitOk;
    }
  }

  // --point I: that point alone, in this process's slot (a Slurm array task runs one).
  std::optional<std::size_t> only;
  if (const auto point = args.value("--point")) {
    try {
      std::size_t used = 0;
      const long i = std::stol(*point, &used);
      if (used != point->size() || i < 0 || static_cast<std::size_t>(i) >= sweep.points.size())
        throw std::out_of_range(*point);
      only = static_cast<std::size_t>(i);
    } catch (const std::exception&) {
      return usage_error("sweep: --point " + *point + ": not a point of the sweep (0 to " +
                         std::to_string(sweep.points.size() - 1) + ")");
    }
    parallel = 1;
  }

  // Slots: on GPUs, --parallel runs at once with nproc GPUs each (CUDA_VISIBLE_DEVICES); on the
  // CPU (or --cpu), --parallel runs at once sharing the cores.
  const std::vector<std::string> gpus = args.flag("--cpu") ? std::vector<std::string>{} : visible_gpus();
  std::vector<std::string> slot_devices;
  if (!gpus.empty()) {
    const int fit = static_cast<int>(gpus.size()) / nproc;
    if (fit == 0) {
      std::cerr << "studio-train sweep: --nproc " << nproc << " needs that many GPUs; this machine "
                << "shows " << gpus.size() << "\n";
      return kExitInvalid;
    }
    if (parallel > fit)
      std::cerr << "studio-train sweep: " << fit << " run(s) at once: " << gpus.size()
                << " GPUs / --nproc " << nproc << "\n";
    parallel = std::min(parallel, fit);
    for (int s = 0; s < parallel; ++s) {
      std::string d;
      for (int k = 0; k < nproc; ++k) d += (k ? "," : "") + gpus[static_cast<std::size_t>(s * nproc + k)];
      slot_devices.push_back(d);
    }
  } else {
    slot_devices.assign(static_cast<std::size_t>(parallel), std::string());
  }

  // The whole queue (not a Slurm array task's one point): one process at a time, recorded for
  // a stop. Taken before the handlers: a refused second driver ends as any invalid call does.
  QueueDriver driver;
  if (!only) {
    if (const std::string why = driver.take(sweep_dir); !why.empty()) {
      std::cerr << "studio-train sweep: " << why << "\n";
      return kExitInvalid;
    }
  }

  // A stop sets a flag the loop below checks on every turn (at most 100 ms apart).
  struct sigaction sa {};
  sa.sa_handler = on_sweep_stop;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  const std::size_t n = sweep.points.size();
  std::vector<std::string> state(n);
  std::size_t next = only ? *only : 0;
  const std::size_t end = only ? *only + 1 : n;
  std::vector<Child> running;
  std::vector<bool> slot_busy(slot_devices.size(), false);
  int failed = 0;
  std::cout << "studio-train sweep: " << n << " point(s) in " << sweep_dir << ", " << parallel
            << " at a time\n";
  auto dir_of = [&](std::size_t i) { return sweep_dir + "/" + sweep.points[i].name; };
  bool relayed = false;
  while (true) {
    // Fill free slots with the next points that are not finished.
    while (!g_sweep_stop && next < end) {
      const auto free_slot = std::find(slot_busy.begin(), slot_busy.end(), false);
      if (free_slot == slot_busy.end()) break;
      const std::size_t i = next++;
      const std::string dir = dir_of(i);
      if (point_state(dir) == "finished") {
        state[i] = "finished";
        std::cout << "studio-train sweep: " << sweep.points[i].name << ": finished before, skipped\n";
        continue;
      }
      // A point started before resumes from its newest checkpoint that verifies.
      std::vector<std::string> sets;
      if (const auto ckpt = trainer::last_good_checkpoint(dir))
        sets = {"resume_from_checkpoint=" + fs::absolute(*ckpt).string(), "overwrite_output_dir=false"};
      // Fault point sweep.slow: the gap between two points that verifying a large checkpoint makes.
      if (trainer::fault_requested("sweep.slow", static_cast<std::int64_t>(i), 0))
        for (int t = 0; t < 3000 && !g_sweep_stop; ++t)
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
      // Verifying a checkpoint can take seconds: a stop that came meanwhile starts nothing.
      if (g_sweep_stop) {
        --next;
        break;
      }
      const int slot = static_cast<int>(free_slot - slot_busy.begin());
      const pid_t pid = start_point(dir, nproc, slot_devices[static_cast<std::size_t>(slot)], sets);
      if (pid > 0) ::setpgid(pid, pid);  // the child does too: a stop right after the fork finds its group
      if (pid < 0) {
        std::cerr << "studio-train sweep: cannot start " << sweep.points[i].name << "\n";
        state[i] = "failed";
        ++failed;
        continue;
      }
      *free_slot = true;
      running.push_back({pid, i, slot});
      std::cout << "studio-train sweep: " << sweep.points[i].name << ": started ("
                << (slot_devices[static_cast<std::size_t>(slot)].empty()
                        ? std::string("CPU")
                        : "GPU " + slot_devices[static_cast<std::size_t>(slot)])
                << ", log " << dir << "/train.log)\n" << std::flush;
    }
    // A stop: every running point gets SIGTERM once (each stops at a step boundary; save_on_stop
    // decides whether it saves), and no new point starts. Checked on every turn, so a signal that
    // came between the check above and a fork still reaches the point just started.
    if (g_sweep_stop && !relayed) {
      for (const Child& c : running) ::kill(-c.pid, SIGTERM);
      relayed = true;
    }
    if (running.empty()) break;
    // Polled, not a blocking wait: a signal that lands just before a blocking waitpid would not
    // interrupt it, and the stop would wait for a point to end by itself.
    int status = 0;
    const pid_t done = ::waitpid(-1, &status, WNOHANG);
    if (done == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (done < 0) {
      if (errno == EINTR) continue;
      break;
    }
    const auto it = std::find_if(running.begin(), running.end(), [&](const Child& c) { return c.pid == done; });
    if (it == running.end()) continue;
    const std::size_t i = it->point;
    slot_busy[static_cast<std::size_t>(it->slot)] = false;
    running.erase(it);
    state[i] = point_state(dir_of(i));
    if (state[i] == "running" || state[i] == "pending") state[i] = "failed";
    if (state[i] == "failed") ++failed;
    std::cout << "studio-train sweep: " << sweep.points[i].name << ": " << state[i];
    if (const std::string span = loss_span(dir_of(i)); !span.empty()) std::cout << ", " << span;
    std::cout << "\n" << std::flush;
  }
  std::size_t finished = 0;
  for (const std::string& s : state) finished += s == "finished" ? 1 : 0;
  std::string summary = std::to_string(finished) + " of " + std::to_string(only ? 1 : n) + " finished";
  if (failed) summary += ", " + std::to_string(failed) + " failed";
  if (g_sweep_stop) summary += "; stopped: continue with studio-train sweep --resume " + sweep_dir;
  std::cout << "studio-train sweep: " << summary << "\n";
  const int code = g_sweep_stop ? 130 : failed ? kExitFailed : kExitOk;
  if (!only)
    driver.end(g_sweep_stop ? RunState::Stopped : failed ? RunState::Failed : RunState::Finished,
               code, summary);
  return code;
}

}  // namespace studio::app
