// A stand-in for studio-train in the launcher tests: a real process that takes the same command
// line (`train CONFIG.yaml [--nproc N]`), reads the config it is given, reports through
// status.json and events.jsonl in the config's output_dir exactly as the engine does, writes to
// stdout and stderr, and stops on SIGTERM at a step boundary with exit code 130. With --nproc N
// it forks N-1 "worker ranks" that stay in its process group (as the engine's launcher does) and
// that it stops when it stops. Extra config keys steer it:
//   test_steps: N                steps before it finishes (default 100000: runs until stopped)
//   test_step_ms: N              milliseconds per step (default 20)
//   test_ignore_sigterm: true    ignores SIGTERM, so only SIGKILL ends it
//   test_fail_before_start: N    prints an error and exits with N before writing status.json
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "studio/config/config_io.h"
#include "studio/runs/events.h"

namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_term(int) {
  g_stop = true;
}

std::string extra(const studio::RunConfig& cfg, const std::string& key, std::string fallback) {
  for (const auto& e : cfg.extra_keys)
    if (e.key == key) return e.value.text;
  return fallback;
}

std::string host() {
  char buf[256] = {};
  return ::gethostname(buf, sizeof buf - 1) == 0 ? buf : "unknown";
}

std::vector<pid_t> g_workers;

// Worker ranks do nothing but exist until they are signalled; they log with the launcher's tag.
void startWorkers(int nproc, bool ignoreTerm) {
  for (int rank = 1; rank < nproc; ++rank) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      std::signal(SIGTERM, ignoreTerm ? SIG_IGN : SIG_DFL);
      std::cout << "[rank " << rank << "] worker pid " << ::getpid() << std::endl;
      for (;;) ::pause();
    }
    if (pid > 0) g_workers.push_back(pid);
  }
}

void stopWorkers() {
  for (pid_t w : g_workers) ::kill(w, SIGTERM);
  for (pid_t w : g_workers) ::waitpid(w, nullptr, 0);
}

int finish(const std::string& out, studio::EventWriter& events, studio::RunState state, int code,
           const std::string& reason, std::int64_t step) {
  stopWorkers();
  events.write(studio::EndEvent{studio::run_state_name(state), reason});
  events.close();
  studio::RunStatus st;
  st.state = state;
  st.pid = ::getpid();
  st.host = host();
  st.exit_code = code;
  st.reason = reason;
  st.step = step;
  if (auto err = st.write(studio::status_path(out)); !err.empty()) std::cerr << err << "\n";
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a log file, not a terminal: flush each line
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() < 2 || args[0] != "train") {
    std::cerr << "usage: runs_test_engine train CONFIG.yaml [--nproc N]\n";
    return 2;
  }
  int nproc = 1;
  for (size_t i = 2; i + 1 < args.size(); ++i)
    if (args[i] == "--nproc") nproc = std::stoi(args[i + 1]);

  const studio::LoadResult loaded = studio::load_config_file(args[1]);
  if (!loaded.ok()) {
    std::cerr << "runs_test_engine: cannot load " << args[1] << "\n";
    return 2;
  }
  const studio::RunConfig& cfg = loaded.config;
  if (const int code = std::stoi(extra(cfg, "test_fail_before_start", "0")); code != 0) {
    std::cerr << "error: model folder " << cfg.model_name_or_path << " not found\n";
    return code;
  }
  const bool ignoreTerm = extra(cfg, "test_ignore_sigterm", "false") == "true";
  std::signal(SIGTERM, ignoreTerm ? SIG_IGN : on_term);
  std::signal(SIGINT, on_term);
  const std::int64_t steps = std::stoll(extra(cfg, "test_steps", "100000"));
  const int stepMs = std::stoi(extra(cfg, "test_step_ms", "20"));

  const std::string& out = cfg.output_dir;
  char cwd[4096] = {};
  std::cout << "runs_test_engine: pid " << ::getpid() << " nproc " << nproc << " cwd "
            << (::getcwd(cwd, sizeof cwd - 1) ? cwd : "?") << "\n";
  std::cout << "runs_test_engine: output_dir " << out << "\n";
  std::cerr << "runs_test_engine: this line went to stderr\n";
  startWorkers(nproc, ignoreTerm);

  studio::RunStatus running;
  running.pid = ::getpid();
  running.host = host();
  if (auto err = running.write(studio::status_path(out)); !err.empty()) {
    std::cerr << err << "\n";
    return 1;
  }
  studio::EventWriter events;
  if (auto err = events.open(studio::events_path(out)); !err.empty()) {
    std::cerr << err << "\n";
    return 1;
  }
  studio::StartEvent start;
  start.time = studio::unix_time_now();
  start.config = studio::config_to_json(cfg);
  start.world_size = nproc;
  start.sequence_parallel_size = static_cast<int>(cfg.sequence_parallel_size);
  start.sequence_parallel_mode = std::string(studio::to_string(cfg.sequence_parallel_mode));
  start.stage = std::string(studio::to_string(cfg.stage));
  events.write(start);

  for (std::int64_t step = 1; step <= steps; ++step) {
    if (g_stop) {
      std::cout << "runs_test_engine: stopping at step " << step - 1 << "\n";
      return finish(out, events, studio::RunState::Stopped, 130, "stopped by the user", step - 1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(stepMs));
    studio::StepEvent s;
    s.step = step;
    s.loss = 2.0 / static_cast<double>(step);
    s.time = studio::unix_time_now();
    events.write(s);
    std::cout << "step " << step << " loss " << s.loss << "\n";
  }
  return finish(out, events, studio::RunState::Finished, 0,
                "completed " + std::to_string(steps) + " steps", steps);
}
