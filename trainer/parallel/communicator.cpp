#include "studio/trainer/parallel/communicator.h"

#include "studio/trainer/parallel/step_clock.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>

#include "studio/trainer/tensors/torch_compat.h"
#include "watchdog.h"

#if STUDIO_HAVE_C10D_GLOO
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif
#if STUDIO_HAVE_C10D_GLOO && STUDIO_WITH_TORCH_CUDA
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace studio::trainer::dist {
namespace {

std::string seconds_text(std::chrono::milliseconds t) {
  std::ostringstream s;
  s << static_cast<double>(t.count()) / 1000.0 << " s";
  return s.str();
}

}  // namespace

#if STUDIO_HAVE_C10D_GLOO
using Backend = c10d::Backend;
using Work = c10d::Work;
#endif

struct Group::Impl {
#if STUDIO_HAVE_C10D_GLOO
  c10::intrusive_ptr<Backend> pg;
#endif
  torch::Device device{torch::kCPU};  // where the group's tensors live
  // Gloo carrying CUDA tensors (CommOptions::gloo_on_cuda): every operation goes through host
  // copies, made before it is issued and copied back when it completes.
  bool stage_through_host = false;
};

struct Pending::State {
#if STUDIO_HAVE_C10D_GLOO
  c10::intrusive_ptr<Work> work;
#endif
  std::string context;  // "rank 3: send(k/v) in group sp0"
  std::chrono::milliseconds timeout{0};
  bool done = false;
  torch::Tensor host;                  // a staged operation's host copy, alive until it completes
  torch::Tensor host_in;               // ... and its staged input, when that is another copy
  std::function<void()> on_done;       // ... and what to copy back then
  std::shared_ptr<Watchdog> watchdog;  // multi-process worlds: told of the wait, asked on timeout
  StepTime kind = StepTime::Wait;      // what its wait counts as (step_clock.h)
};

void Pending::wait() {
  if (!state_ || state_->done) return;
  state_->done = true;
#if STUDIO_HAVE_C10D_GLOO
  if (!state_->work) return;
  const StepClock::Span span(state_->kind);
  Watchdog* dog = state_->watchdog.get();
  // After a timeout, the watchdog's word on who stalls ("" without one).
  auto diagnosis = [dog] { return dog ? "; " + dog->diagnose() : std::string(); };
  bool completed = false;
  if (dog) dog->waiting(state_->context);
  try {
    completed = state_->work->wait(state_->timeout);
  } catch (const std::exception& e) {
    std::string what = e.what();
    const bool timed_out =
        what.find("imed out") != std::string::npos || what.find("imeout") != std::string::npos;
    throw CollectiveError(state_->context + (timed_out ? " timed out after " : " failed after ") +
                          seconds_text(state_->timeout) +
                          " at most: " + what.substr(0, what.find('\n')) +
                          (timed_out ? " (a peer rank is hung or dead; raise ddp_timeout if "
                                       "this step is legitimately slow)" +
                                           diagnosis()
                                     : " (a peer rank probably died; see its log)"));
  }
  if (!completed)
    throw CollectiveError(state_->context + " timed out after " + seconds_text(state_->timeout) +
                          " (ddp_timeout): a peer rank is hung or dead" + diagnosis());
  if (dog) dog->done();
#endif
  if (state_->on_done) state_->on_done();
}

Group::Group(std::string name, int rank, int size, std::vector<int> global_ranks,
             std::unique_ptr<Impl> impl, std::chrono::milliseconds timeout, bool verify)
    : name_(std::move(name)),
      rank_(rank),
      size_(size),
      global_ranks_(std::move(global_ranks)),
      impl_(std::move(impl)),
      timeout_(timeout),
      verify_(verify) {}

Group::~Group() = default;

namespace {

// The error context of one operation: the global rank, the operation and the group.
std::string context(const Group& g, const char* op, const std::string& what) {
  return "rank " + std::to_string(g.global_rank(g.rank())) + ": " + op + "(" + what +
         ") in group " + g.name();
}

void require_contiguous(const Group& g, const char* op, const std::string& what,
                        const torch::Tensor& t) {
  if (!t.is_contiguous())
    throw std::invalid_argument(context(g, op, what) + ": tensor must be contiguous");
}

}  // namespace

// An operation's description for verification: [sequence, elements, dtype, name bytes...] as
// int64 (the name "all_reduce(loss)" truncated to kNameWords * 8 bytes).
namespace {
constexpr int64_t kNameWords = 8;

std::string described_name(const torch::Tensor& d) {
  auto c = d.to(torch::kCPU).contiguous();
  std::string s(reinterpret_cast<const char*>(c.data_ptr<int64_t>() + 3),
                static_cast<size_t>(kNameWords * 8));
  return s.substr(0, s.find('\0'));
}

std::string described_op(const torch::Tensor& d) {
  auto c = d.to(torch::kCPU).contiguous();
  const auto* v = c.data_ptr<int64_t>();
  return described_name(c) + " of " + std::to_string(v[1]) + " " +
         std::string(c10::toString(static_cast<c10::ScalarType>(v[2]))) +
         " elements (its operation #" + std::to_string(v[0]) + ")";
}
}  // namespace

torch::Tensor Group::describe(const char* op, const std::string& what, const torch::Tensor& t,
                              int64_t seq) const {
  auto d = torch::zeros({3 + kNameWords}, torch::kLong);
  auto* v = d.data_ptr<int64_t>();
  v[0] = seq;
  v[1] = t.numel();
  v[2] = static_cast<int64_t>(t.scalar_type());
  const std::string name = std::string(op) + "(" + what + ")";
  std::memcpy(v + 3, name.data(),
              std::min<size_t>(name.size(), static_cast<size_t>(kNameWords * 8)));
  const bool on_device = impl_ && impl_->device.is_cuda() && !impl_->stage_through_host;
  return on_device ? d.to(impl_->device) : d;
}

void Group::check_same(const char* op, const std::string& what, const torch::Tensor& mine,
                       const torch::Tensor& theirs, int peer) const {
  if (torch::equal(mine.to(torch::kCPU), theirs.to(torch::kCPU))) return;
  throw CollectiveError(
      context(*this, op, what) + ": rank-divergent collectives: this rank runs " +
      described_op(mine) + ", rank " + std::to_string(global_rank(peer)) + " runs " +
      described_op(theirs) +
      ". Every rank must run the same collectives in the same order "
      "whatever its data; this is a bug in studio-train, please report it with this message");
}

void Group::verify(const char* op, const std::string& what, const torch::Tensor& t) {
  if (!verify_ || size_ == 1) return;
  auto mine = describe(op, what, t, collectives_++);
  std::vector<torch::Tensor> all;
  for (int r = 0; r < size_; ++r) all.push_back(torch::empty_like(mine));
  gather_raw(all, mine, "verify " + what);
  for (int r = 0; r < size_; ++r)
    if (r != rank_) check_same(op, what, mine, all[static_cast<size_t>(r)], r);
}

// Host staging (Gloo carrying CUDA tensors): the host copy an operation runs on, or `t` itself.
torch::Tensor Group::staged(const torch::Tensor& t, bool copy) const {
  if (!impl_ || !impl_->stage_through_host || !t.is_cuda()) return t;
  return copy ? t.to(torch::kCPU).contiguous()
              : torch::empty(t.sizes(), t.options().device(torch::kCPU));
}

// After a staged operation: copies the host result into `t` (a no-op when nothing was staged).
Pending Group::unstage(Pending p, torch::Tensor t, torch::Tensor host) const {
  if (!host.defined() || host.is_same(t)) return p;  // nothing was staged
  if (!p.state_) {                                   // nothing in flight (a group of one)
    t.copy_(host);
    return p;
  }
  p.state_->host = host;
  p.state_->on_done = [t, host]() mutable { t.copy_(host); };
  return p;
}

#if STUDIO_HAVE_C10D_GLOO
#define STUDIO_DIST_ISSUE(op, what, expr)                                      \
  [&]() {                                                                      \
    auto state = std::make_shared<Pending::State>();                           \
    state->context = context(*this, op, what);                                 \
    state->timeout = timeout_;                                                 \
    state->watchdog = watchdog_;                                               \
    state->kind = time_kind_now(time_kind_);                                   \
    try {                                                                      \
      state->work = (expr);                                                    \
    } catch (const std::exception& e) {                                        \
      throw CollectiveError(state->context + " could not start: " + e.what()); \
    }                                                                          \
    return Pending(state);                                                     \
  }()
#endif

Pending Group::all_reduce_sum_async(torch::Tensor& t, const std::string& what) {
  require_contiguous(*this, "all_reduce", what, t);
  if (size_ == 1) return {};
  verify("all_reduce", what, t);
#if STUDIO_HAVE_C10D_GLOO
  torch::Tensor host = staged(t, true);
  std::vector<at::Tensor> ts{host};
  return unstage(STUDIO_DIST_ISSUE("all_reduce", what, impl_->pg->allreduce(ts)), t, host);
#else
  return {};
#endif
}

void Group::all_reduce_sum(torch::Tensor& t, const std::string& what) {
  // Small host-side sums (losses, counts, the stop flag) on an NCCL group go through the device.
  if (size_ > 1 && impl_ && impl_->device.is_cuda() && !impl_->stage_through_host && !t.is_cuda()) {
    auto on_device = t.to(impl_->device);
    all_reduce_sum_async(on_device, what).wait();
    t.copy_(on_device);
    return;
  }
  all_reduce_sum_async(t, what).wait();
}

void Group::all_to_all(torch::Tensor& out, torch::Tensor& in, const std::string& what) {
  require_contiguous(*this, "all_to_all", what, in);
  require_contiguous(*this, "all_to_all", what, out);
  if (in.size(0) % size_ != 0 || out.sizes() != in.sizes())
    throw std::invalid_argument(context(*this, "all_to_all", what) +
                                ": input and output must have the same shape with dim 0 "
                                "divisible by the group size");
  if (size_ == 1) {
    out.copy_(in);
    return;
  }
  verify("all_to_all", what, in);
#if STUDIO_HAVE_C10D_GLOO
  std::vector<int64_t> equal;
  torch::Tensor host_in = staged(in, true), host_out = staged(out, false);
  unstage(STUDIO_DIST_ISSUE("all_to_all", what,
                            impl_->pg->alltoall_base(host_out, host_in, equal, equal)),
          out, host_out)
      .wait();
#endif
}

void Group::all_gather(std::vector<torch::Tensor>& out, torch::Tensor& in,
                       const std::string& what) {
  if (size_ > 1) verify("all_gather", what, in);
  gather_raw(out, in, what);
}

void Group::gather_raw(std::vector<torch::Tensor>& out, torch::Tensor& in,
                       const std::string& what) {
  require_contiguous(*this, "all_gather", what, in);
  if (out.size() != static_cast<size_t>(size_))
    throw std::invalid_argument(context(*this, "all_gather", what) +
                                ": needs one output tensor per rank");
  if (size_ == 1) {
    out[0].copy_(in);
    return;
  }
#if STUDIO_HAVE_C10D_GLOO
  std::vector<at::Tensor> host_outs;
  for (const auto& o : out) host_outs.push_back(staged(o, false));
  std::vector<std::vector<at::Tensor>> outs{host_outs};
  std::vector<at::Tensor> ins{staged(in, true)};
  STUDIO_DIST_ISSUE("all_gather", what, impl_->pg->allgather(outs, ins)).wait();
  for (size_t i = 0; i < out.size(); ++i)
    if (!host_outs[i].is_same(out[i])) out[i].copy_(host_outs[i]);
#endif
}

namespace {
void require_slices(const Group& g, const char* op, const std::string& what,
                    const torch::Tensor& whole, const torch::Tensor& slice) {
  require_contiguous(g, op, what, whole);
  require_contiguous(g, op, what, slice);
  if (whole.numel() != slice.numel() * g.size() || whole.scalar_type() != slice.scalar_type())
    throw std::invalid_argument(context(g, op, what) +
                                ": the whole tensor must hold group size "
                                "slices of the same dtype (" +
                                std::to_string(whole.numel()) + " vs " +
                                std::to_string(slice.numel()) + " x " + std::to_string(g.size()) +
                                ")");
}
}  // namespace

Pending Group::reduce_scatter_sum_async(torch::Tensor& out, torch::Tensor& in,
                                        const std::string& what) {
  require_slices(*this, "reduce_scatter", what, in, out);
  if (size_ == 1) {
    out.copy_(in.view_as(out));
    return {};
  }
  verify("reduce_scatter", what, in);
#if STUDIO_HAVE_C10D_GLOO
  torch::Tensor host_in = staged(in, true), host_out = staged(out, false);
  auto flat_out = host_out.view({-1}), flat_in = host_in.view({-1});
  Pending p =
      STUDIO_DIST_ISSUE("reduce_scatter", what, impl_->pg->_reduce_scatter_base(flat_out, flat_in));
  if (!host_in.is_same(in) && p.state_) p.state_->host_in = host_in;
  return unstage(std::move(p), out, host_out);
#else
  return {};
#endif
}

Pending Group::reduce_scatter_sum_consuming_async(torch::Tensor& out, torch::Tensor& in,
                                                  const std::string& what) {
  require_contiguous(*this, "reduce_scatter", what, in);
  if (in.numel() % size_ != 0)
    throw std::invalid_argument(context(*this, "reduce_scatter", what) + ": " +
                                std::to_string(in.numel()) + " elements do not split into " +
                                std::to_string(size_) + " equal slices");
  const bool nccl = impl_ && impl_->device.is_cuda() && !impl_->stage_through_host;
  if (size_ == 1) {
    out = in.view({-1});
    return {};
  }
  if (nccl) {
    out = torch::empty({in.numel() / size_}, in.options());
    return reduce_scatter_sum_async(out, in, what);
  }
  verify("reduce_scatter", what, in);
#if STUDIO_HAVE_C10D_GLOO
  torch::Tensor host = staged(in, true);
  std::vector<at::Tensor> ts{host};
  Pending p = STUDIO_DIST_ISSUE("reduce_scatter", what, impl_->pg->allreduce(ts));
  const torch::Tensor mine = host.view({size_, -1}).select(0, rank_);
  if (host.is_same(in)) {
    out = mine;
    return p;
  }
  // Staged from a CUDA tensor: the slice goes back to the device when the sum is complete.
  out = torch::empty({in.numel() / size_}, in.options());
  if (p.state_) p.state_->host_in = host;
  return unstage(std::move(p), out, mine);
#else
  return {};
#endif
}

Pending Group::all_gather_flat_async(torch::Tensor& out, torch::Tensor& in,
                                     const std::string& what) {
  require_slices(*this, "all_gather", what, out, in);
  if (size_ == 1) {
    out.view_as(in).copy_(in);
    return {};
  }
  verify("all_gather", what, in);
#if STUDIO_HAVE_C10D_GLOO
  torch::Tensor host_in = staged(in, true), host_out = staged(out, false);
  auto flat_out = host_out.view({-1}), flat_in = host_in.view({-1});
  Pending p = STUDIO_DIST_ISSUE("all_gather", what, impl_->pg->_allgather_base(flat_out, flat_in));
  if (!host_in.is_same(in) && p.state_) p.state_->host_in = host_in;
  return unstage(std::move(p), out, host_out);
#else
  return {};
#endif
}

void Group::broadcast(torch::Tensor& t, int root, const std::string& what) {
  require_contiguous(*this, "broadcast", what, t);
  if (size_ == 1) return;
  verify("broadcast", what, t);
#if STUDIO_HAVE_C10D_GLOO
  torch::Tensor host = staged(t, true);
  std::vector<at::Tensor> ts{host};
  c10d::BroadcastOptions opt;
  opt.rootRank = root;
  unstage(STUDIO_DIST_ISSUE("broadcast", what, impl_->pg->broadcast(ts, opt)), t, host).wait();
#endif
}

void Group::barrier(const std::string& what) {
  if (size_ == 1) return;
#if STUDIO_HAVE_C10D_GLOO
  // A one-element all-reduce: unlike barrier() it behaves the same on Gloo and NCCL (no device
  // guessing) and reports a dead peer the same way as every other collective.
  torch::Tensor t = torch::zeros(
      {1}, torch::TensorOptions()
               .dtype(torch::kFloat)
               .device(impl_->stage_through_host ? torch::Device(torch::kCPU) : impl_->device));
  all_reduce_sum(t, what);
#endif
}

// Verified point to point: the sender sends the description of the data ahead of it, the
// receiver compares it with its own before receiving the data.
Pending Group::send(torch::Tensor& t, int dst, int tag, const std::string& what) {
  if (verify_ && dst >= 0 && dst < size_ && dst != rank_) {
    auto d = describe("send/recv", what, t, p2p_[{dst, tag}]++);
    send_raw(d, dst, tag, "verify " + what).wait();
  }
  return send_raw(t, dst, tag, what);
}

Pending Group::recv(torch::Tensor& t, int src, int tag, const std::string& what) {
  if (verify_ && src >= 0 && src < size_ && src != rank_) {
    auto mine = describe("send/recv", what, t, p2p_[{src, tag}]++);
    auto theirs = torch::empty_like(mine);
    recv_raw(theirs, src, tag, "verify " + what).wait();
    check_same("recv", what, mine, theirs, src);
  }
  return recv_raw(t, src, tag, what);
}

Pending Group::send_raw(torch::Tensor& t, int dst, int tag, const std::string& what) {
  require_contiguous(*this, "send", what, t);
  if (dst == rank_ || dst < 0 || dst >= size_)
    throw std::invalid_argument(context(*this, "send", what) + ": bad peer " + std::to_string(dst));
#if STUDIO_HAVE_C10D_GLOO
  torch::Tensor host = staged(t, true);
  std::vector<at::Tensor> ts{host};
  Pending p = STUDIO_DIST_ISSUE("send", what, impl_->pg->send(ts, dst, tag));
  if (!host.is_same(t) && p.state_) p.state_->host = host;  // alive until sent
  return p;
#else
  return {};
#endif
}

Pending Group::recv_raw(torch::Tensor& t, int src, int tag, const std::string& what) {
  require_contiguous(*this, "recv", what, t);
  if (src == rank_ || src < 0 || src >= size_)
    throw std::invalid_argument(context(*this, "recv", what) + ": bad peer " + std::to_string(src));
#if STUDIO_HAVE_C10D_GLOO
  torch::Tensor host = staged(t, false);
  std::vector<at::Tensor> ts{host};
  return unstage(STUDIO_DIST_ISSUE("recv", what, impl_->pg->recv(ts, src, tag)), t, host);
#else
  return {};
#endif
}

bool ring_send_first(int rank) {
  return rank % 2 == 0;
}

Group::RingShift Group::ring_shift(torch::Tensor& sent, torch::Tensor& received, int tag,
                                   const std::string& what) {
  if (size_ == 1) {
    received.copy_(sent);
    return {};
  }
  const int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
  RingShift h;
  if (ring_send_first(rank_)) {
    h.send = send(sent, next, tag, what);
    h.recv = recv(received, prev, tag, what);
  } else {
    h.recv = recv(received, prev, tag, what);
    h.send = send(sent, next, tag, what);
  }
  return h;
}

// ---------------------------------------------------------------------------------------------
// Communicator

struct Communicator::Store {
#if STUDIO_HAVE_C10D_GLOO
  c10::intrusive_ptr<c10d::Store> store;
#endif
};

namespace {

// The group of `ranks` (global ranks, ascending) as seen by `me`, which must be one of them.
std::unique_ptr<Group> make_group(const std::string& name, const std::vector<int>& ranks, int me,
                                  const CommOptions& opt, Communicator::Store* store);

}  // namespace

bool distributed_available(bool cuda) {
#if STUDIO_HAVE_C10D_GLOO
  return !cuda || STUDIO_WITH_TORCH_CUDA;
#else
  (void)cuda;
  return false;
#endif
}

namespace {

std::unique_ptr<Group> local_group(const std::string& name, int me, const CommOptions& opt) {
  return std::make_unique<Group>(
      name, 0, 1, std::vector<int>{me}, nullptr,
      std::chrono::duration_cast<std::chrono::milliseconds>(opt.timeout));
}

std::unique_ptr<Group> make_group(const std::string& name, const std::vector<int>& ranks, int me,
                                  const CommOptions& opt, Communicator::Store* store) {
  if (ranks.size() == 1) return local_group(name, me, opt);
  int my_index = -1;
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i] == me) my_index = static_cast<int>(i);
  if (my_index < 0) throw std::logic_error("make_group: rank not in group " + name);
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(opt.timeout);
  auto impl = std::make_unique<Group::Impl>();
#if STUDIO_HAVE_C10D_GLOO
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>(name, store->store);
  const int n = static_cast<int>(ranks.size());
  try {
    if (opt.cuda && !opt.gloo_on_cuda) {
#if STUDIO_WITH_TORCH_CUDA
      auto o = c10d::ProcessGroupNCCL::Options::create();
      o->timeout = timeout;
      impl->pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(prefixed, my_index, n, o);
      impl->device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(opt.cuda_device));
#else
      throw std::runtime_error("this studio-train was built without CUDA (no NCCL)");
#endif
    } else {
      auto o = c10d::ProcessGroupGloo::Options::create();
      o->timeout = timeout;
      if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
        o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
      else
        o->devices.push_back(opt.master_addr == "127.0.0.1" || opt.master_addr == "localhost"
                                 ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                 : c10d::ProcessGroupGloo::createDefaultDevice());
      impl->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, my_index, n, o);
      if (opt.cuda) {  // Gloo carrying CUDA tensors through host copies
        impl->device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(opt.cuda_device));
        impl->stage_through_host = true;
      }
    }
  } catch (const std::exception& e) {
    throw CollectiveError("rank " + std::to_string(me) + ": could not set up process group " +
                          name + " (" + std::to_string(n) + " ranks, " +
                          (opt.cuda && !opt.gloo_on_cuda ? "NCCL" : "Gloo") + "): " + e.what());
  }
#else
  (void)store;
  throw std::runtime_error(
      "this studio-train was built without c10d (Gloo): install "
      "libgloo-dev and rebuild to train with more than one process");
#endif
  return std::make_unique<Group>(name, my_index, static_cast<int>(ranks.size()), ranks,
                                 std::move(impl), timeout, opt.verify_collectives);
}

}  // namespace

Communicator::Communicator(const CommOptions& opt) : store_(std::make_unique<Store>()) {
  const int world = opt.world_size;
  const int64_t sp = opt.sp;
  if (world < 1 || opt.rank < 0 || opt.rank >= world)
    throw std::invalid_argument("communicator: rank " + std::to_string(opt.rank) +
                                " outside a world of " + std::to_string(world));
  if (sp < 1 || world % sp != 0)
    throw std::invalid_argument("sequence_parallel_size " + std::to_string(sp) +
                                " does not divide the world size " + std::to_string(world));
  if (opt.ulysses_degree * opt.ring_degree != sp)
    throw std::invalid_argument("ulysses degree " + std::to_string(opt.ulysses_degree) +
                                " x ring degree " + std::to_string(opt.ring_degree) +
                                " must equal sequence_parallel_size " + std::to_string(sp));
  const int me = opt.rank;
  if (world > 1) {
#if STUDIO_HAVE_C10D_GLOO
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(opt.master_port);
    so.isServer = me == 0;
    if (me == 0 && opt.store_listen_fd >= 0) so.masterListenFd = opt.store_listen_fd;
    so.numWorkers = static_cast<size_t>(world);
    so.waitWorkers = true;
    so.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(opt.timeout);
    try {
      store_->store = c10::make_intrusive<c10d::TCPStore>(opt.master_addr, so);
    } catch (const std::exception& e) {
      throw CollectiveError("rank " + std::to_string(me) + ": rendezvous at " + opt.master_addr +
                            ":" + std::to_string(opt.master_port) + " failed: " + e.what() +
                            " (is rank 0 running and the port reachable?)");
    }
#endif
  }
  const int isp = static_cast<int>(sp);
  const int sp_index = me / isp, sp_pos = me % isp;
  const int u = static_cast<int>(opt.ulysses_degree);
  std::vector<int> all(static_cast<size_t>(world)), sp_ranks, dp_ranks, u_ranks, ring_ranks;
  for (int r = 0; r < world; ++r) all[static_cast<size_t>(r)] = r;
  for (int s = 0; s < isp; ++s) sp_ranks.push_back(sp_index * isp + s);
  for (int d = 0; d < world / isp; ++d) dp_ranks.push_back(d * isp + sp_pos);
  // SP-local rank s = ring_index * u + ulysses_index.
  for (int i = 0; i < u; ++i) u_ranks.push_back(sp_index * isp + (sp_pos / u) * u + i);
  for (int g = 0; g < isp / u; ++g) ring_ranks.push_back(sp_index * isp + g * u + sp_pos % u);

#if STUDIO_HAVE_C10D_GLOO
  if (world > 1) {
    try {
      watchdog_ = std::make_shared<Watchdog>(
          me, world, opt.master_addr, opt.master_port,
          std::chrono::duration_cast<std::chrono::milliseconds>(opt.timeout));
    } catch (const std::exception& e) {
      std::fprintf(stderr,
                   "studio-train: warning: rank %d: no watchdog (a stalled rank will not be "
                   "named): %s\n",
                   me, e.what());
    }
  }
#endif
  // Every rank creates the groups in the same order; a group's name is unique in the world.
  world_ = make_group("world", all, me, opt, store_.get());
  sp_ = make_group("sp" + std::to_string(sp_index), sp_ranks, me, opt, store_.get());
  dp_ = make_group("dp" + std::to_string(sp_pos), dp_ranks, me, opt, store_.get());
  ulysses_ = make_group("ulysses" + std::to_string(sp_index) + "." + std::to_string(sp_pos / u),
                        u_ranks, me, opt, store_.get());
  ring_ = make_group("ring" + std::to_string(sp_index) + "." + std::to_string(sp_pos % u),
                     ring_ranks, me, opt, store_.get());
  for (Group* g : {world_.get(), sp_.get(), dp_.get(), ulysses_.get(), ring_.get()})
    g->watchdog_ = watchdog_;
  // The step's time (step_clock.h): the SP groups' operations are sequence-parallel traffic;
  // the world's and DP's (small sums, unless a TimeKindScope says otherwise) are waits.
  for (Group* g : {sp_.get(), ulysses_.get(), ring_.get()}) g->time_kind_ = StepTime::SpComm;
}

void Communicator::set_step(int64_t step) {
  if (watchdog_) watchdog_->set_step(step);
}

Communicator::~Communicator() = default;

}  // namespace studio::trainer::dist
