#include "studio/launch/dist_env.h"

#include <cstdlib>
#include <stdexcept>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "env_vars.h"

namespace studio::launch {
namespace {

using detail::env_int;
using detail::env_string;
using detail::fail;
using detail::in_slurm_step;

constexpr int kMaxProcesses = 1 << 20;

std::string var(const char* name, int value) {
  return std::string(name) + "=" + std::to_string(value);
}

// MASTER_ADDR/MASTER_PORT of a multi-process run: every rank must reach rank 0's store.
void require_master(const std::string& where, bool have_addr, bool have_port) {
  if (!have_addr)
    fail("MASTER_ADDR is not set (" + where +
         "): every rank must reach rank 0's rendezvous store; export MASTER_ADDR=<host of rank "
         "0> on every rank");
  if (!have_port)
    fail("MASTER_PORT is not set (" + where +
         "): export MASTER_PORT=<a free port on rank 0's host>, the same on every rank");
}

DistEnv from_torchrun(const Getenv& getenv) {
  const auto rank_text = env_string(getenv, "RANK");
  const auto world_text = env_string(getenv, "WORLD_SIZE");
  if (!rank_text)
    fail("WORLD_SIZE=" + *world_text +
         " is set but RANK is not: a torchrun-style launcher sets both; export RANK or unset "
         "WORLD_SIZE");
  if (!world_text)
    fail("RANK=" + *rank_text +
         " is set but WORLD_SIZE is not: a torchrun-style launcher sets both; export "
         "WORLD_SIZE (the number of processes) or unset RANK");
  DistEnv env;
  env.source = "torchrun";
  env.world_size = *env_int(getenv, "WORLD_SIZE", 1, kMaxProcesses);
  env.rank = *env_int(getenv, "RANK", 0, kMaxProcesses);
  const std::string where = var("RANK", env.rank) + ", " + var("WORLD_SIZE", env.world_size);
  if (env.rank >= env.world_size)
    fail(var("RANK", env.rank) + " is not below " + var("WORLD_SIZE", env.world_size) +
         ": ranks run 0.." + std::to_string(env.world_size - 1));

  const auto local_rank = env_int(getenv, "LOCAL_RANK", 0, kMaxProcesses);
  if (!local_rank && env.distributed())
    fail("LOCAL_RANK is not set (" + where +
         "): it picks this process's GPU; export LOCAL_RANK (torchrun and studio-train --nproc "
         "set it)");
  env.local_rank = local_rank.value_or(0);

  const auto nnodes = env_int(getenv, "NNODES", 1, env.world_size);
  const auto local_world = env_int(getenv, "LOCAL_WORLD_SIZE", 1, env.world_size);
  if (local_world) {
    env.local_world_size = *local_world;
  } else if (nnodes) {
    if (env.world_size % *nnodes != 0)
      fail(var("WORLD_SIZE", env.world_size) + " is not a multiple of " + var("NNODES", *nnodes) +
           ": export LOCAL_WORLD_SIZE (processes on this node)");
    env.local_world_size = env.world_size / *nnodes;
  } else {
    if (env.local_rank != env.rank)
      fail("LOCAL_WORLD_SIZE is not set and " + var("LOCAL_RANK", env.local_rank) +
           " differs from " + var("RANK", env.rank) +
           ", so the run spans several nodes: export LOCAL_WORLD_SIZE (processes per node)");
    env.local_world_size = env.world_size;
  }
  if (env.local_rank >= env.local_world_size)
    fail(var("LOCAL_RANK", env.local_rank) + " is not below LOCAL_WORLD_SIZE=" +
         std::to_string(env.local_world_size) + " (" + where + ")");

  if (nnodes) {
    env.nnodes = *nnodes;
    if (env.nnodes * env.local_world_size != env.world_size)
      fail(var("NNODES", env.nnodes) + " times LOCAL_WORLD_SIZE=" +
           std::to_string(env.local_world_size) + " is not " + var("WORLD_SIZE", env.world_size) +
           ": every node must run the same number of processes");
  } else {
    if (env.world_size % env.local_world_size != 0)
      fail(var("WORLD_SIZE", env.world_size) + " is not a multiple of " +
           var("LOCAL_WORLD_SIZE", env.local_world_size) + ": export NNODES");
    env.nnodes = env.world_size / env.local_world_size;
  }

  // torchrun calls the node index GROUP_RANK; studio-train --nproc sets both names.
  const char* node_var = env_string(getenv, "NODE_RANK") ? "NODE_RANK" : "GROUP_RANK";
  const auto node_rank = env_int(getenv, node_var, 0, kMaxProcesses);
  env.node_rank = node_rank.value_or(env.rank / env.local_world_size);
  if (env.node_rank >= env.nnodes)
    fail(var(node_var, env.node_rank) + " is not below the node count " +
         std::to_string(env.nnodes) + " (" + where + ")");

  const auto addr = env_string(getenv, "MASTER_ADDR");
  const auto port = env_int(getenv, "MASTER_PORT", 1, 65535);
  if (env.distributed()) require_master(where, addr.has_value(), port.has_value());
  if (addr) env.master_addr = *addr;
  if (port) env.master_port = *port;
  return env;
}

DistEnv from_slurm(const Getenv& getenv) {
  const auto procid = env_string(getenv, "SLURM_PROCID");
  const auto ntasks = env_string(getenv, "SLURM_NTASKS");
  if (!procid || !ntasks)
    fail(std::string(procid ? "SLURM_NTASKS" : "SLURM_PROCID") +
         " is not set inside an srun step that sets " +
         (procid ? "SLURM_PROCID=" + *procid : "SLURM_NTASKS=" + *ntasks) +
         ": start studio-train with srun, or export RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR "
         "and MASTER_PORT yourself");
  DistEnv env;
  env.source = "slurm";
  env.world_size = *env_int(getenv, "SLURM_NTASKS", 1, kMaxProcesses);
  env.rank = *env_int(getenv, "SLURM_PROCID", 0, kMaxProcesses);
  const std::string where =
      var("SLURM_PROCID", env.rank) + ", " + var("SLURM_NTASKS", env.world_size);
  if (env.rank >= env.world_size)
    fail(var("SLURM_PROCID", env.rank) + " is not below " + var("SLURM_NTASKS", env.world_size));

  const auto local_rank = env_int(getenv, "SLURM_LOCALID", 0, kMaxProcesses);
  if (!local_rank && env.distributed())
    fail("SLURM_LOCALID is not set (" + where +
         "): it picks this task's GPU; start the tasks "
         "with srun, which sets it");
  env.local_rank = local_rank.value_or(0);
  env.nnodes = env_int(getenv, "SLURM_NNODES", 1, env.world_size).value_or(1);
  env.node_rank = env_int(getenv, "SLURM_NODEID", 0, kMaxProcesses).value_or(0);
  if (env.node_rank >= env.nnodes)
    fail(var("SLURM_NODEID", env.node_rank) + " is not below " + var("SLURM_NNODES", env.nnodes));

  const char* tasks_var = nullptr;
  for (const char* name :
       {"SLURM_STEP_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}) {
    if (env_string(getenv, name)) {
      tasks_var = name;
      break;
    }
  }
  if (tasks_var) {
    const std::string text = *env_string(getenv, tasks_var);
    const auto counts = detail::parse_tasks_per_node(text);
    if (!counts ||
        (counts->size() > 1 && counts->size() <= static_cast<std::size_t>(env.node_rank)))
      fail(std::string(tasks_var) + "=" + text + " is not a task count per node for node " +
           std::to_string(env.node_rank) + " of " + std::to_string(env.nnodes) +
           " (expected e.g. 4 or 4(x2),2)");
    env.local_world_size = counts->size() == 1 ? counts->front() : (*counts)[env.node_rank];
  } else {
    if (env.world_size % env.nnodes != 0)
      fail(var("SLURM_NTASKS", env.world_size) + " is not a multiple of " +
           var("SLURM_NNODES", env.nnodes) +
           " and no SLURM_NTASKS_PER_NODE or SLURM_TASKS_PER_NODE says how many run here: "
           "srun --ntasks-per-node=N");
    env.local_world_size = env.world_size / env.nnodes;
  }
  if (env.local_rank >= env.local_world_size)
    fail(var("SLURM_LOCALID", env.local_rank) + " is not below " +
         std::to_string(env.local_world_size) + ", the tasks on this node (" +
         std::string(tasks_var ? tasks_var : "SLURM_NTASKS/SLURM_NNODES") + ")");

  auto addr = env_string(getenv, "MASTER_ADDR");
  if (!addr) addr = env_string(getenv, "SLURM_LAUNCH_NODE_IPADDR");
  if (!addr && env.distributed())
    fail("MASTER_ADDR is not set and srun gave no SLURM_LAUNCH_NODE_IPADDR (" + where +
         "): export MASTER_ADDR=<host of task 0>, e.g. MASTER_ADDR=$(scontrol show hostnames "
         "\"$SLURM_JOB_NODELIST\" | head -n 1), before srun");
  if (addr) env.master_addr = *addr;
  if (const auto port = env_int(getenv, "MASTER_PORT", 1, 65535)) {
    env.master_port = *port;
  } else if (const auto job = env_string(getenv, "SLURM_JOB_ID")) {
    if (const auto id = detail::parse_integer(*job)) env.master_port = slurm_default_port(*id);
  }
  return env;
}

}  // namespace

int slurm_default_port(long long job_id) {
  return 29500 + static_cast<int>(std::llabs(job_id) % 10000);
}

DistEnv dist_env_from(const Getenv& getenv) {
  if (env_string(getenv, "RANK") || env_string(getenv, "WORLD_SIZE")) return from_torchrun(getenv);
  if (in_slurm_step(getenv) &&
      (env_string(getenv, "SLURM_PROCID") || env_string(getenv, "SLURM_NTASKS")))
    return from_slurm(getenv);
  return DistEnv{};
}

DistEnv dist_env_from_environment() {
  return dist_env_from([](const char* n) { return std::getenv(n); });
}

bool is_worker_process(const Getenv& getenv) {
  if (env_string(getenv, "RANK") || env_string(getenv, "WORLD_SIZE")) return true;
  if (!in_slurm_step(getenv) || !env_string(getenv, "SLURM_PROCID")) return false;
  const auto ntasks = env_string(getenv, "SLURM_NTASKS");
  if (!ntasks) return true;  // inconsistent: let dist_env_from say so
  const auto n = detail::parse_integer(*ntasks);
  return !n || *n > 1;
}

std::optional<int> take_store_listen_fd(int port) {
  const char* value = std::getenv(kStoreListenFdVariable);
  if (value == nullptr) return std::nullopt;
  const std::string text = value;
  ::unsetenv(kStoreListenFdVariable);
  const std::string what = std::string(kStoreListenFdVariable) + "=" + text;
  const auto fd = detail::parse_integer(text);
  if (!fd || *fd < 0 || *fd > 1 << 20)
    fail(what + " is not a descriptor number (set by `studio-train train --nproc N` for rank "
                "0 only): unset it");
  const int sock = static_cast<int>(*fd);
  int listening = 0;
  socklen_t len = sizeof listening;
  sockaddr_storage addr{};
  socklen_t addr_len = sizeof addr;
  if (::getsockopt(sock, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening ||
      ::getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &addr_len) != 0)
    fail(what + " is not a listening socket of this process (it is handed down by "
                "`studio-train train --nproc N` to rank 0 only): unset it");
  const int bound = addr.ss_family == AF_INET
                        ? ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port)
                    : addr.ss_family == AF_INET6
                        ? ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port)
                        : -1;
  if (bound != port)
    fail(what + " listens on port " + std::to_string(bound) + ", not on MASTER_PORT=" +
         std::to_string(port) + ": unset one of them");
  ::fcntl(sock, F_SETFD, FD_CLOEXEC);
  return sock;
}

}  // namespace studio::launch
