#pragma once
// A multi-node run without a scheduler: one detached launcher per host, each told the same
// node count, rank 0's address and port, and its own node rank (the engine's --nnodes,
// --node-rank, --master-addr, --master-port). The caller runs each line on its host over SSH.
#include <string>
#include <vector>

#include "studio/remote/detached_run.h"

namespace studio::remote {

struct NodeLaunch {
  std::string host;     // as given: an SSH host or alias
  int node_rank = 0;    // its index in `hosts`
  std::string command;  // detached_start_command for this node
};

// One NodeLaunch per host, in order; node 0 (hosts[0]) hosts rank 0, so master_addr must be an
// address of hosts[0] that the other hosts can reach (it often differs from the SSH alias).
// Every node uses the same layout and engine path. Throws std::invalid_argument for no hosts,
// a host listed twice, an empty host, or launcher values LauncherArgs::validate rejects.
std::vector<NodeLaunch> node_launch_commands(const std::vector<std::string>& hosts, int nproc,
                                             const std::string& master_addr, int master_port,
                                             const RemoteRunLayout& layout,
                                             const std::string& engine);

}  // namespace studio::remote
