#pragma once
// The rendezvous of the launchers of a multi-node run with restarts (`studio-train train --nproc
// G --nnodes N --max-restarts K`, or RDZV_ID as LLaMA-Factory's launcher passes it): what
// torchrun's elastic agent does with its c10d backend. Node 0's launcher hosts a c10d TCPStore
// at MASTER_ADDR:MASTER_PORT; every node's launcher connects to it. The run goes in rounds: round
// 0 is the first start, round r the r-th restart. In each round every node arrives (join), and
// node 0 publishes the port the round's workers rendezvous on (a fresh one each round: the
// failed world's may still be held) and the checkpoint they resume from, so that every node
// starts the same world. When a round fails, each node that saw a failure of its own (a worker
// that died, not one that only lost a peer) reports it; every node then reports the same cause.
// A node that does not arrive within the join timeout ends the run on every node that did, with
// the missing nodes named; a node started again while the others wait (a node that came back)
// joins the round they are in.
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace studio::trainer::dist {

struct RendezvousOptions {
  std::string host;   // node 0's address (MASTER_ADDR)
  int port = 0;       // the store's port (MASTER_PORT)
  int nnodes = 2;
  int node_rank = 0;
  std::string run_id;  // RDZV_ID: the keys' prefix, so that runs sharing a store do not mix
  std::chrono::seconds join_timeout{600};  // torchrun's default join_timeout
};

// A node missing from a round, the store unreachable: what went wrong, naming the nodes.
class RendezvousError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Round {
  int round = 0;
  int master_port = 0;      // the workers' MASTER_PORT in this round
  std::string resume_from;  // the checkpoint they resume from ("" : none)
};

class NodeRendezvous {
 public:
  // Node 0 starts the store; the others connect, retrying until the join timeout. Throws
  // RendezvousError.
  explicit NodeRendezvous(RendezvousOptions options);
  ~NodeRendezvous();
  NodeRendezvous(const NodeRendezvous&) = delete;
  NodeRendezvous& operator=(const NodeRendezvous&) = delete;

  // The newest round any node has arrived at (0 before any): where a node that came back joins.
  int current_round();
  // Arrives at `round` and waits for every node. Node 0 brings the round's port and checkpoint
  // (the others' arguments are ignored). Throws RendezvousError naming the nodes that did not
  // arrive within the join timeout.
  Round join(int round, int master_port, const std::string& resume_from);
  // This node's own failure in `round`; the first reported is the round's cause.
  void report_failure(int round, const std::string& reason);
  // The round's cause, waiting up to `wait` for a node to report one.
  std::optional<std::string> failure(int round, std::chrono::milliseconds wait);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace studio::trainer::dist
