#pragma once
// Process groups for data and sequence parallelism, over c10d: a TCPStore rendezvous, Gloo on
// CPU, NCCL on CUDA. The world is a dp x sp grid (docs/SEQUENCE_PARALLEL.md, "Process
// groups"): ranks [i*sp, ..., i*sp+sp-1] form SP group i; the DP groups are the strided ranks with
// the same position inside their SP group. With usp, an SP group is further a ring_degree x
// ulysses_degree grid: SP-local rank s = ring_index * ulysses_degree + ulysses_index, so the
// Ulysses ranks of a ring piece are contiguous (inside a node).
//
// Every operation names what it does (`what`) so that a failure or a hang past ddp_timeout
// becomes an error like "rank 3: all_reduce(gradients) in group sp0 failed after 1800 s: ...",
// never a silent hang. With one process every group has size 1 and every operation is local.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "studio/trainer/parallel/step_clock.h"

namespace studio::trainer::dist {

class Watchdog;  // names a rank that stalls without dying (trainer/parallel/watchdog.h)

// A collective or point-to-point operation failed or timed out.
class CollectiveError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An operation in flight. wait() blocks until it completes (or throws CollectiveError).
class Pending {
 public:
  struct State;
  Pending() = default;
  explicit Pending(std::shared_ptr<State> s) : state_(std::move(s)) {}
  void wait();
  bool valid() const { return state_ != nullptr; }

 private:
  friend class Group;
  std::shared_ptr<State> state_;
};

class Group {
 public:
  struct Impl;
  Group(std::string name, int rank, int size, std::vector<int> global_ranks,
        std::unique_ptr<Impl> impl, std::chrono::milliseconds timeout, bool verify = false);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  const std::string& name() const { return name_; }
  int rank() const { return rank_; }  // this process's index inside the group
  int size() const { return size_; }
  int global_rank(int group_rank) const {
    return global_ranks_.at(static_cast<size_t>(group_rank));
  }
  const std::vector<int>& global_ranks() const { return global_ranks_; }
  bool verifying() const { return verify_; }

  // All tensors must be contiguous and live on the group's device (CPU for Gloo, CUDA for NCCL);
  // all_reduce_sum alone also takes a CPU tensor on an NCCL group (copied through the device).
  void all_reduce_sum(torch::Tensor& t, const std::string& what);
  Pending all_reduce_sum_async(torch::Tensor& t, const std::string& what);
  // Equal split along dim 0: `in`'s i-th slice goes to rank i; `out`'s i-th slice comes from it.
  void all_to_all(torch::Tensor& out, torch::Tensor& in, const std::string& what);
  // out[i] receives rank i's `in`; out must hold size() tensors shaped like `in`.
  void all_gather(std::vector<torch::Tensor>& out, torch::Tensor& in, const std::string& what);
  // Sharded data parallelism (ZeRO): `in` holds size() equal slices; rank i's `out` (one slice)
  // receives the sum over ranks of their i-th slices. `in` must stay alive until completion.
  Pending reduce_scatter_sum_async(torch::Tensor& out, torch::Tensor& in, const std::string& what);
  // The same for an input the caller gives up: `in` may be overwritten, and `out` is set to the
  // tensor this rank's slice of the sum arrives in. Gloo's reduce-scatter all-reduces a copy of
  // its whole input and copies the slice out; here Gloo all-reduces `in` itself and `out` is a
  // view of it, so no copy of `in` is made (ZeRO's embeddings: 4 B per parameter less at the end
  // of the backward). NCCL reduce-scatters into a new `out`.
  Pending reduce_scatter_sum_consuming_async(torch::Tensor& out, torch::Tensor& in,
                                             const std::string& what);
  // `out` (size() slices) receives every rank's `in` (one slice), in rank order.
  Pending all_gather_flat_async(torch::Tensor& out, torch::Tensor& in, const std::string& what);
  void broadcast(torch::Tensor& t, int root, const std::string& what);
  void barrier(const std::string& what);
  // Point to point inside the group (group ranks). Match every send with a recv of the same
  // tag and shape on the peer.
  Pending send(torch::Tensor& t, int dst, int tag, const std::string& what);
  Pending recv(torch::Tensor& t, int src, int tag, const std::string& what);

  // One hop of a ring: `sent` goes to rank + 1 while `received` arrives from rank - 1 (mod
  // size). The pair is issued in ring_send_first() order, so a backend whose point-to-point ops
  // block in issue order (NCCL: a pair's send and recv on one stream) cannot deadlock, whatever
  // the ring size. Both Pendings must be waited for; `sent` must stay alive until then.
  struct RingShift {
    Pending send, recv;
  };
  RingShift ring_shift(torch::Tensor& sent, torch::Tensor& received, int tag,
                       const std::string& what);

 private:
  torch::Tensor staged(const torch::Tensor& t, bool copy) const;
  // Collective verification (CommOptions::verify_collectives): before each operation the ranks
  // exchange what they are about to run (operation, name, element count, dtype, sequence number)
  // and throw a CollectiveError naming both sides if they differ, instead of exchanging
  // mismatched buffers. Point-to-point: the sender sends that description ahead of the data.
  void verify(const char* op, const std::string& what, const torch::Tensor& t);
  torch::Tensor describe(const char* op, const std::string& what, const torch::Tensor& t,
                         int64_t seq) const;
  void check_same(const char* op, const std::string& what, const torch::Tensor& mine,
                  const torch::Tensor& theirs, int peer) const;
  void gather_raw(std::vector<torch::Tensor>& out, torch::Tensor& in, const std::string& what);
  Pending send_raw(torch::Tensor& t, int dst, int tag, const std::string& what);
  Pending recv_raw(torch::Tensor& t, int src, int tag, const std::string& what);
  Pending unstage(Pending p, torch::Tensor t, torch::Tensor host) const;

  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  std::vector<int> global_ranks_;
  std::unique_ptr<Impl> impl_;
  std::chrono::milliseconds timeout_;
  bool verify_ = false;
  int64_t collectives_ = 0;                     // verified group-wide operations so far
  std::map<std::pair<int, int>, int64_t> p2p_;  // verified sends/receives per (peer, tag)
  std::shared_ptr<Watchdog> watchdog_;          // told of every wait; asked after a timeout
  StepTime time_kind_ = StepTime::Wait;         // what its waits count as (step_clock.h)
  friend class Communicator;
};

struct CommOptions {
  int rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // Rank 0 only: a socket already listening on master_port (studio-train's launcher holds the
  // port from before the ranks start, launcher.h) that its store serves on, taking it over;
  // -1: the store binds master_port itself.
  int store_listen_fd = -1;
  int64_t sp = 1;  // sequence_parallel_size
  // ulysses_degree * ring_degree == sp: zigzag-ring is (1, sp), ulysses (sp, 1), usp as configured.
  int64_t ulysses_degree = 1;
  int64_t ring_degree = 1;
  std::chrono::seconds timeout{1800};  // ddp_timeout
  bool cuda = false;                   // NCCL when true (CUDA LibTorch only), Gloo otherwise
  int cuda_device = 0;
  // With cuda: Gloo instead of NCCL, every operation copied through the host. Slow, but it lets
  // several ranks share one GPU, which NCCL refuses ("Duplicate GPU detected"): the SP checks of
  // scripts/gpu-check.sh on a 1-GPU machine (STUDIO_DIST_BACKEND=gloo).
  bool gloo_on_cuda = false;
  // Verify every collective and point-to-point operation (Group::verify): one extra small
  // exchange per operation. studio-train turns it on with STUDIO_VERIFY_COLLECTIVES=1; the
  // multi-process tests run with it.
  bool verify_collectives = false;
};

// The groups of one process. Construction is a collective over the world: every rank must
// create its Communicator with the same sp/ulysses/ring and world_size.
class Communicator {
 public:
  explicit Communicator(const CommOptions& opt);
  ~Communicator();

  int rank() const { return world_->rank(); }
  int world_size() const { return world_->size(); }
  int64_t sp() const { return sp_->size(); }
  int64_t dp() const { return dp_->size(); }
  int sp_rank() const { return sp_->rank(); }
  int dp_rank() const { return dp_->rank(); }

  Group& world() { return *world_; }
  Group& sp_group() { return *sp_; }
  Group& dp_group() { return *dp_; }
  // usp: the Ulysses ranks sharing one ring piece, and the ring over those pieces. For
  // zigzag-ring, ring_group() is the SP group and ulysses_group() has size 1; for ulysses the
  // reverse.
  Group& ulysses_group() { return *ulysses_; }
  Group& ring_group() { return *ring_; }
  // The training step this rank is in (0-based), for the watchdog's messages.
  void set_step(int64_t step);

  struct Store;  // the rendezvous store (c10d), opaque

 private:
  std::unique_ptr<Store> store_;
  std::shared_ptr<Watchdog> watchdog_;  // multi-process worlds only
  std::unique_ptr<Group> world_, sp_, dp_, ulysses_, ring_;
};

// The issue order of a ring hop on rank `rank`: even ranks send before they receive,
// odd ranks receive before they send; the last rank of an odd ring (even, like rank 0) sends
// first. Under blocking rendezvous semantics (an op completes only when its peer reaches the
// matching op) this order completes for every ring size >= 2, while "everyone receives first"
// deadlocks: tests/trainer/tst_communicator.cpp simulates both.
bool ring_send_first(int rank);

// Whether this build can create multi-process groups (Gloo, and NCCL on CUDA builds).
bool distributed_available(bool cuda);

}  // namespace studio::trainer::dist
