// launch_probe: a real worker for the launcher tests. Every rank writes OUT/rank-<RANK>.json
// (its environment, pids and the DistEnv it reads) once it is set up; then it acts as told:
//   --out DIR               where the rank files go (required)
//   --fail-rank R --code K  rank R exits with code K once every local rank has written its file
//   --signal-rank R --signal S   rank R kills itself with signal S at the same moment
//   --sleep-ms T            the other ranks sleep T ms, then exit 0
//   --ignore-sigterm        SIGTERM is ignored (to test the SIGKILL escalation)
//   --graceful              SIGTERM ends the sleep: rank 0 writes an `end` (stopped), all exit 0
//   --print                 writes two stdout lines and one stderr line; ranks > 0 also leave a
//                           partial stdout line without newline
//   --events-dir D          rank 0's events.jsonl for --write-end and --graceful
//   --write-end STATE       rank 0 appends an `end` event with STATE before acting
// Every rank file also says what descriptor 3 is (the store socket the launcher hands rank 0:
// listening, on which port) and whether a connection to 127.0.0.1:MASTER_PORT is taken (before
// any rank serves on it, only the launcher's socket can take it).
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "studio/runs/events.h"
#include "studio/launch/dist_env.h"

namespace {

volatile std::sig_atomic_t g_term = 0;
extern "C" void on_term(int) {
  g_term = 1;
}

struct Args {
  std::string out, events_dir, write_end;
  int fail_rank = -1, code = 1, signal_rank = -1, signal = 0, sleep_ms = 0;
  bool ignore_sigterm = false, graceful = false, print = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "launch_probe: %s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--out")
      a.out = next();
    else if (k == "--events-dir")
      a.events_dir = next();
    else if (k == "--write-end")
      a.write_end = next();
    else if (k == "--fail-rank")
      a.fail_rank = std::stoi(next());
    else if (k == "--code")
      a.code = std::stoi(next());
    else if (k == "--signal-rank")
      a.signal_rank = std::stoi(next());
    else if (k == "--signal")
      a.signal = std::stoi(next());
    else if (k == "--sleep-ms")
      a.sleep_ms = std::stoi(next());
    else if (k == "--ignore-sigterm")
      a.ignore_sigterm = true;
    else if (k == "--graceful")
      a.graceful = true;
    else if (k == "--print")
      a.print = true;
    else {
      std::fprintf(stderr, "launch_probe: unknown argument %s\n", k.c_str());
      std::exit(2);
    }
  }
  if (a.out.empty()) {
    std::fprintf(stderr, "launch_probe: --out is required\n");
    std::exit(2);
  }
  return a;
}

std::string env_or_null(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "<unset>";
}

// "none", or {"listening": bool, "port": N} for a TCP socket.
nlohmann::json descriptor_3() {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(3, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "none";
  int listening = 0;
  socklen_t n = sizeof listening;
  ::getsockopt(3, SOL_SOCKET, SO_ACCEPTCONN, &listening, &n);
  return {{"listening", listening != 0}, {"port", ntohs(addr.sin_port)}};
}

bool connects_to_master_port() {
  const int port = std::atoi(env_or_null("MASTER_PORT").c_str());
  if (port <= 0) return false;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

void write_rank_file(const Args& a, int rank) {
  nlohmann::json j;
  for (const char* name :
       {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
        "NNODES", "NODE_RANK", "GROUP_RANK", "PYTORCH_CUDA_ALLOC_CONF",
        "TORCH_NCCL_AVOID_RECORD_STREAMS", "OMP_NUM_THREADS", "STUDIO_LAUNCHED",
        "STUDIO_STORE_LISTEN_FD"})
    j["env"][name] = env_or_null(name);
  j["fd3"] = descriptor_3();
  j["master_port_connects"] = connects_to_master_port();
  j["pid"] = ::getpid();
  j["ppid"] = ::getppid();
  try {
    const auto d = studio::launch::dist_env_from_environment();
    j["dist"] = {{"rank", d.rank},
                 {"local_rank", d.local_rank},
                 {"world_size", d.world_size},
                 {"local_world_size", d.local_world_size},
                 {"nnodes", d.nnodes},
                 {"node_rank", d.node_rank},
                 {"master_addr", d.master_addr},
                 {"master_port", d.master_port},
                 {"source", d.source}};
  } catch (const std::exception& e) {
    j["dist_error"] = e.what();
  }
  // Written whole, then renamed: the test and the other ranks see complete files only.
  const std::string path = a.out + "/rank-" + std::to_string(rank) + ".json";
  std::ofstream(path + ".tmp") << j.dump() << "\n";
  std::filesystem::rename(path + ".tmp", path);
}

// Every rank of this node has written its file, so all have installed their signal setup.
void wait_for_local_ranks(const Args& a, int local_world) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until) {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator(a.out))
      if (e.path().extension() == ".json") ++n;
    if (n >= local_world) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void write_end(const Args& a, const std::string& state, const std::string& reason) {
  studio::EventWriter w;
  if (w.open(studio::events_path(a.events_dir)).empty()) w.write(studio::EndEvent{state, reason});
  w.close();
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  const int rank = std::atoi(env_or_null("RANK").c_str());
  const int local_world = std::atoi(env_or_null("LOCAL_WORLD_SIZE").c_str());
  if (a.ignore_sigterm) std::signal(SIGTERM, SIG_IGN);
  if (a.graceful) std::signal(SIGTERM, on_term);
  if (a.print) {
    std::printf("out %d a\n", rank);
    std::printf("out %d b\n", rank);
    if (rank > 0) std::printf("partial %d", rank);
    std::fflush(stdout);
    std::fprintf(stderr, "err %d\n", rank);
  }
  write_rank_file(a, rank);
  // Rank 0 keeps the store socket open until every local rank has tried to connect to it.
  if (::fcntl(3, F_GETFD) != -1) wait_for_local_ranks(a, local_world);

  if (rank == 0 && !a.write_end.empty())
    write_end(a, a.write_end, "rank 0 wrote its own end: " + a.write_end);
  if (rank == a.fail_rank || rank == a.signal_rank) {
    wait_for_local_ranks(a, local_world);
    if (rank == a.signal_rank) {
      const rlimit no_core{0, 0};  // a crash test needs no core file
      ::setrlimit(RLIMIT_CORE, &no_core);
      std::signal(a.signal, SIG_DFL);
      std::raise(a.signal);
    }
    return a.code;
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(a.sleep_ms);
  while (std::chrono::steady_clock::now() < until && !g_term)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (g_term && rank == 0 && !a.events_dir.empty())
    write_end(a, "stopped", "rank 0 stopped on SIGTERM");
  return 0;
}
