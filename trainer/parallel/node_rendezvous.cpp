#include "studio/trainer/parallel/node_rendezvous.h"

#include <thread>
#include <unistd.h>

#if STUDIO_HAVE_C10D_GLOO
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

namespace studio::trainer::dist {
namespace {

std::vector<uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }
std::string string_of(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

}  // namespace

struct NodeRendezvous::Impl {
  RendezvousOptions opt;
  std::string where;  // "host:port"
#if STUDIO_HAVE_C10D_GLOO
  c10::intrusive_ptr<c10d::TCPStore> store;
#endif

  std::string key(int round, const std::string& what) const {
    return "studio-rdzv/" + opt.run_id + "/" + std::to_string(round) + "/" + what;
  }
  std::string current_key() const { return "studio-rdzv/" + opt.run_id + "/current"; }
};

NodeRendezvous::NodeRendezvous(RendezvousOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.opt = std::move(options);
  s.where = s.opt.host + ":" + std::to_string(s.opt.port);
#if STUDIO_HAVE_C10D_GLOO
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(s.opt.port);
  so.isServer = s.opt.node_rank == 0;
  so.waitWorkers = false;
  so.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(s.opt.join_timeout);
  // Node 0 may start after the others: they retry until the join timeout (TCPStore's own
  // connect retries within so.timeout).
  try {
    s.store = c10::make_intrusive<c10d::TCPStore>(s.opt.host, so);
  } catch (const std::exception& e) {
    throw RendezvousError(
        "node " + std::to_string(s.opt.node_rank) + ": the rendezvous store at " + s.where +
        (s.opt.node_rank == 0 ? " could not be started (is the port free on this host?): "
                              : " did not answer within " +
                                    std::to_string(s.opt.join_timeout.count()) +
                                    " s (is node 0's launcher running, and the port reachable?): ") +
        e.what());
  }
#else
  throw RendezvousError("restarts across nodes need c10d's TCPStore, which this build lacks");
#endif
}

NodeRendezvous::~NodeRendezvous() = default;

int NodeRendezvous::current_round() {
#if STUDIO_HAVE_C10D_GLOO
  Impl& s = *impl_;
  // add(0) reads a counter without changing it (0 when it is not there yet).
  return static_cast<int>(s.store->add(s.current_key(), 0));
#else
  return 0;
#endif
}

Round NodeRendezvous::join(int round, int master_port, const std::string& resume_from) {
  Round out;
  out.round = round;
#if STUDIO_HAVE_C10D_GLOO
  Impl& s = *impl_;
  const int n = s.opt.nnodes, me = s.opt.node_rank;
  try {
    // The newest round (a counter that only grows): where a node that comes back goes.
    const int64_t now = s.store->add(s.current_key(), 0);
    if (round > now) s.store->add(s.current_key(), round - now);
    if (me == 0) {
      s.store->set(s.key(round, "port"), bytes_of(std::to_string(master_port)));
      s.store->set(s.key(round, "resume"), bytes_of(resume_from));
    }
    // Counted once per node, even when a node arrives at the same round twice (started again).
    const std::string token = std::to_string(::getpid()) + "@" +
                              std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
    const auto was = s.store->compareSet(s.key(round, "node" + std::to_string(me)), {},
                                         bytes_of(token));
    if (string_of(was) == token && s.store->add(s.key(round, "arrived"), 1) == n)
      s.store->set(s.key(round, "ready"), bytes_of("1"));
  } catch (const std::exception& e) {
    throw RendezvousError("node " + std::to_string(me) + ": the rendezvous store at " + s.where +
                          " failed in round " + std::to_string(round) + ": " + e.what() +
                          " (node 0's launcher, which holds it, is gone?)");
  }
  try {
    s.store->wait({s.key(round, "ready"), s.key(round, "port")},
                  std::chrono::duration_cast<std::chrono::milliseconds>(s.opt.join_timeout));
  } catch (const std::exception& e) {
    std::string missing;
    try {
      for (int k = 0; k < n; ++k)
        if (!s.store->check({s.key(round, "node" + std::to_string(k))}))
          missing += (missing.empty() ? "" : ", ") + std::to_string(k);
    } catch (const std::exception&) {
      missing = "?";
    }
    throw RendezvousError(
        (round == 0 ? std::string("the start") : "restart " + std::to_string(round)) +
        ": node(s) " + (missing.empty() ? std::string("?") : missing) + " of " +
        std::to_string(n) + " did not join within " + std::to_string(s.opt.join_timeout.count()) +
        " s (the rendezvous at " + s.where + "): the run ends; start the missing node's "
        "launcher again within the timeout to continue, or resubmit the run (it resumes from "
        "its newest checkpoint)");
  }
  try {
    out.master_port = std::stoi(string_of(s.store->get(s.key(round, "port"))));
    out.resume_from = string_of(s.store->get(s.key(round, "resume")));
  } catch (const std::exception& e) {
    throw RendezvousError("the rendezvous at " + s.where + ": round " + std::to_string(round) +
                          " has no port or checkpoint from node 0: " + e.what());
  }
#else
  out.master_port = master_port;
  out.resume_from = resume_from;
#endif
  return out;
}

void NodeRendezvous::report_failure(int round, const std::string& reason) {
#if STUDIO_HAVE_C10D_GLOO
  try {
    impl_->store->compareSet(impl_->key(round, "failure"), {}, bytes_of(reason));
  } catch (const std::exception&) {
    // The store is gone (node 0 died): the join that follows says so.
  }
#endif
}

std::optional<std::string> NodeRendezvous::failure(int round, std::chrono::milliseconds wait) {
#if STUDIO_HAVE_C10D_GLOO
  Impl& s = *impl_;
  const auto until = std::chrono::steady_clock::now() + wait;
  try {
    for (;;) {
      if (s.store->check({s.key(round, "failure")}))
        return string_of(s.store->get(s.key(round, "failure")));
      if (std::chrono::steady_clock::now() >= until) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
#else
  return std::nullopt;
#endif
}

}  // namespace studio::trainer::dist
