#include "studio/launch/launch_options.h"

#include <regex>
#include <stdexcept>

#include "env_vars.h"

namespace studio::launch {
namespace {

using detail::env_int;
using detail::env_string;
using detail::fail;
using detail::in_slurm_step;

int flag_int(const std::string& flag, const std::string& value, int lo, int hi) {
  const auto v = detail::parse_integer(value);
  if (!v || *v < lo || *v > hi)
    fail(flag + ": expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi) +
         ", got '" + value + "'");
  return static_cast<int>(*v);
}

template <class T>
void set_once(std::optional<T>& slot, const std::string& flag, T value) {
  if (slot) fail(flag + " is given twice");
  slot = std::move(value);
}

void store(LauncherFlags& out, const std::string& flag, const std::string& value) {
  constexpr int kMax = 1 << 20;
  if (flag == "--nproc") set_once(out.nproc, flag, flag_int(flag, value, 1, kMax));
  if (flag == "--nnodes") set_once(out.nnodes, flag, flag_int(flag, value, 1, kMax));
  if (flag == "--node-rank") set_once(out.node_rank, flag, flag_int(flag, value, 0, kMax));
  if (flag == "--master-port") set_once(out.master_port, flag, flag_int(flag, value, 0, 65535));
  if (flag == "--max-restarts") set_once(out.max_restarts, flag, flag_int(flag, value, 0, 1000));
  if (flag == "--rdzv-timeout") set_once(out.rdzv_timeout, flag, flag_int(flag, value, 1, 86400));
  if (flag == "--master-addr") {
    if (value.empty()) fail("--master-addr: expected a host name or address, got ''");
    set_once(out.master_addr, flag, value);
  }
}

}  // namespace

LauncherFlags take_launcher_flags(std::vector<std::string>& args) {
  LauncherFlags out;
  std::vector<std::string> rest;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool taken = false;
    for (const std::string flag : kLauncherFlags) {
      if (a == flag) {
        if (i + 1 >= args.size()) fail(flag + " needs a value");
        store(out, flag, args[++i]);
        taken = true;
      } else if (a.rfind(flag + "=", 0) == 0) {
        store(out, flag, a.substr(flag.size() + 1));
        taken = true;
      }
      if (taken) break;
    }
    if (!taken) rest.push_back(a);
  }
  args = std::move(rest);
  return out;
}

LaunchOptions launch_options_from(const LauncherFlags& flags, const Getenv& getenv) {
  if (!flags.nproc) fail("--nproc is missing: give the number of workers to start on this node");
  if (env_string(getenv, "RANK") || env_string(getenv, "WORLD_SIZE"))
    fail("--nproc was given, but RANK=" + env_string(getenv, "RANK").value_or("") +
         " WORLD_SIZE=" + env_string(getenv, "WORLD_SIZE").value_or("") +
         " say this process already is a worker (started by torchrun or an outer "
         "studio-train --nproc): drop --nproc, or unset RANK and WORLD_SIZE");
  LaunchOptions opt;
  opt.nproc = *flags.nproc;

  // srun started this process: one launcher per node, each told its node by Slurm.
  const bool slurm = in_slurm_step(getenv) && env_string(getenv, "SLURM_PROCID");
  const int slurm_tasks = slurm ? env_int(getenv, "SLURM_NTASKS", 1, 1 << 20).value_or(1) : 1;
  if (slurm_tasks > 1 && !(flags.nnodes && flags.node_rank)) {
    const int slurm_nodes = env_int(getenv, "SLURM_NNODES", 1, 1 << 20).value_or(1);
    if (slurm_tasks != slurm_nodes)
      fail("--nproc was given inside an srun step of SLURM_NTASKS=" + std::to_string(slurm_tasks) +
           " tasks on SLURM_NNODES=" + std::to_string(slurm_nodes) +
           " nodes: with --nproc start one studio-train per node (srun --ntasks-per-node=1) and "
           "let it start the workers, or drop --nproc and let srun start every rank");
    opt.nnodes = slurm_nodes;
    // With one task per node the task id is the node id; SLURM_NODEID says so directly.
    const char* node_var = env_string(getenv, "SLURM_NODEID") ? "SLURM_NODEID" : "SLURM_PROCID";
    opt.node_rank = env_int(getenv, node_var, 0, slurm_nodes - 1).value_or(0);
  }
  if (flags.nnodes) opt.nnodes = *flags.nnodes;
  if (flags.node_rank) opt.node_rank = *flags.node_rank;
  if (opt.node_rank >= opt.nnodes)
    fail("--node-rank " + std::to_string(opt.node_rank) + " is not below --nnodes " +
         std::to_string(opt.nnodes) + ": nodes are numbered 0.." + std::to_string(opt.nnodes - 1));
  const bool multi_node = opt.nnodes > 1;

  if (flags.master_addr) {
    opt.master_addr = *flags.master_addr;
  } else if (const auto addr = env_string(getenv, "MASTER_ADDR")) {
    opt.master_addr = *addr;
  } else if (const auto ip = env_string(getenv, "SLURM_LAUNCH_NODE_IPADDR"); ip && multi_node) {
    opt.master_addr = *ip;
  } else if (multi_node) {
    fail("--nnodes " + std::to_string(opt.nnodes) +
         " needs the address of node 0, which every node must reach: pass --master-addr HOST "
         "or export MASTER_ADDR");
  }

  if (flags.master_port) {
    opt.master_port = *flags.master_port;
  } else if (const auto port = env_int(getenv, "MASTER_PORT", 1, 65535)) {
    opt.master_port = *port;
  } else if (const auto job = env_string(getenv, "SLURM_JOB_ID"); job && slurm && multi_node) {
    if (const auto id = detail::parse_integer(*job)) opt.master_port = slurm_default_port(*id);
  }
  if (multi_node && opt.master_port == 0)
    fail("--nnodes " + std::to_string(opt.nnodes) +
         " needs a port that every node agrees on: pass --master-port P or export MASTER_PORT "
         "(a free port on node 0)");

  if (flags.max_restarts)
    opt.max_restarts = *flags.max_restarts;
  else if (const auto n = env_int(getenv, "MAX_RESTARTS", 0, 1000))
    opt.max_restarts = *n;
  if (const auto id = env_string(getenv, "RDZV_ID")) {
    static const std::regex kId("[A-Za-z0-9_.-]{1,128}");
    if (!std::regex_match(*id, kId))
      fail("RDZV_ID=" + *id + ": use 1 to 128 letters, digits, '_', '.' or '-'");
    opt.rdzv_id = *id;
  }
  if (flags.rdzv_timeout) opt.rdzv_timeout_s = *flags.rdzv_timeout;
  return opt;
}

}  // namespace studio::launch
