#include "studio/remote/node_launch.h"

#include <set>
#include <stdexcept>

namespace studio::remote {

std::vector<NodeLaunch> node_launch_commands(const std::vector<std::string>& hosts, int nproc,
                                             const std::string& master_addr, int master_port,
                                             const RemoteRunLayout& layout,
                                             const std::string& engine) {
  if (hosts.empty()) throw std::invalid_argument("multi-node launch: the host list is empty");
  std::set<std::string> seen;
  for (const std::string& host : hosts) {
    if (host.empty()) throw std::invalid_argument("multi-node launch: a host name is empty");
    // Two launchers on one host would both claim its GPUs and disagree on node ranks.
    if (!seen.insert(host).second) {
      throw std::invalid_argument("multi-node launch: host '" + host +
                                  "' is listed twice; list each node once and raise --nproc "
                                  "to use more of its GPUs");
    }
  }
  std::vector<NodeLaunch> launches;
  for (size_t rank = 0; rank < hosts.size(); ++rank) {
    LauncherArgs args;
    args.nproc = nproc;
    args.nnodes = static_cast<int>(hosts.size());
    args.node_rank = static_cast<int>(rank);
    args.master_addr = master_addr;
    args.master_port = master_port;
    launches.push_back({hosts[rank], args.node_rank, detached_start_command(layout, engine, args)});
  }
  return launches;
}

}  // namespace studio::remote
