#include "watchdog.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#if STUDIO_HAVE_C10D_GLOO
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

namespace studio::trainer::dist {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kBeat = std::chrono::milliseconds(1000);
constexpr auto kStoreTimeout = std::chrono::milliseconds(5000);
// diagnose() reads every beat twice, this far apart: a live process beats at least twice.
constexpr auto kDiagnoseGap = std::chrono::milliseconds(3000);

std::string heartbeat_key(int rank) { return "studio/heartbeat/" + std::to_string(rank); }

struct Beat {
  int64_t beats = -1;
  int64_t step = -1;
  std::string activity;
};

Beat parse_beat(const std::vector<uint8_t>& raw) {
  const std::string s(raw.begin(), raw.end());
  Beat b;
  const auto bar1 = s.find('|'), bar2 = s.find('|', bar1 == std::string::npos ? 0 : bar1 + 1);
  if (bar1 == std::string::npos || bar2 == std::string::npos) return b;
  try {
    b.beats = std::stoll(s.substr(0, bar1));
    b.step = std::stoll(s.substr(bar1 + 1, bar2 - bar1 - 1));
  } catch (const std::exception&) {
    b.beats = -1;
  }
  b.activity = s.substr(bar2 + 1);
  return b;
}

std::string seconds(Clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f s", std::chrono::duration<double>(d).count());
  return text;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size() && i < 16; ++i)
    s += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 16) s += " and " + std::to_string(ranks.size() - 16) + " more";
  return s;
}

std::string where_text(const Beat& b) {
  std::string s = b.step >= 0 ? "at step " + std::to_string(b.step + 1) : "before the first step";
  if (!b.activity.empty()) s += ", " + b.activity;
  return s;
}

}  // namespace

struct Watchdog::Shared {
  int rank = 0;
  int world = 1;
  std::string addr;
  int port = 0;
  std::chrono::milliseconds ddp_timeout{0};

  std::mutex mu;  // guards what follows
  std::condition_variable cv;
  bool stop = false;
  bool exited = false;
  std::string activity = "starting";
  int64_t step = -1;
  int64_t beats = 0;

#if STUDIO_HAVE_C10D_GLOO
  std::mutex store_mu;  // one operation at a time on the client
  c10::intrusive_ptr<c10d::Store> store;
#endif

  std::string value() {
    std::lock_guard<std::mutex> lock(mu);
    return std::to_string(++beats) + "|" + std::to_string(step) + "|" + activity;
  }

  // Every rank's beat, or nothing when the store does not answer (within kStoreTimeout).
  std::optional<std::vector<Beat>> read_all() {
#if STUDIO_HAVE_C10D_GLOO
    std::vector<std::string> keys;
    for (int r = 0; r < world; ++r) keys.push_back(heartbeat_key(r));
    try {
      std::lock_guard<std::mutex> lock(store_mu);
      if (!store) return std::nullopt;
      std::vector<Beat> out(static_cast<size_t>(world));
      for (int r = 0; r < world; ++r)  // a rank that never beat keeps beats -1
        if (store->check({keys[static_cast<size_t>(r)]}))
          out[static_cast<size_t>(r)] = parse_beat(store->get(keys[static_cast<size_t>(r)]));
      return out;
    } catch (const std::exception&) {
      return std::nullopt;
    }
#else
    return std::nullopt;
#endif
  }

  void beat() {
#if STUDIO_HAVE_C10D_GLOO
    const std::string v = value();
    std::lock_guard<std::mutex> lock(store_mu);
    if (store) store->set(heartbeat_key(rank), std::vector<uint8_t>(v.begin(), v.end()));
#endif
  }

  // Rank 0: which peers stopped beating, said once when it happens and once when they are back.
  struct PeerWatch {
    int64_t beats = -1;
    Clock::time_point since = Clock::now();
    bool reported = false;
  };
  std::map<int, PeerWatch> peers;
  Clock::time_point last_check = Clock::now();

  void watch_peers() {
    const auto warn_after = std::clamp<Clock::duration>(ddp_timeout / 2, std::chrono::seconds(5),
                                                        std::chrono::seconds(60));
    const auto now = Clock::now();
    if (now - last_check < std::chrono::seconds(2)) return;
    last_check = now;
    const auto all = read_all();
    if (!all) return;
    for (int r = 1; r < world; ++r) {
      const Beat& b = (*all)[static_cast<size_t>(r)];
      PeerWatch& w = peers[r];
      if (b.beats != w.beats) {
        if (w.reported)
          std::fprintf(stderr, "studio-train: watchdog: rank %d beats again (%s)\n", r,
                       where_text(b).c_str());
        w = PeerWatch{b.beats, now, false};
        continue;
      }
      if (!w.reported && b.beats >= 0 && now - w.since >= warn_after) {
        w.reported = true;
        std::fprintf(stderr,
                     "studio-train: watchdog: rank %d has sent no heartbeat for %s: its process "
                     "is stopped (SIGSTOP, a debugger), frozen or swapping, or its node is gone; it "
                     "was %s. "
                     "The run fails when ddp_timeout (%s) runs out unless it comes back\n",
                     r, seconds(now - w.since).c_str(), where_text(b).c_str(),
                     seconds(ddp_timeout).c_str());
      }
    }
  }

  void loop() {
    std::unique_lock<std::mutex> lock(mu);
    while (!stop) {
      lock.unlock();
      try {
        beat();
        if (rank == 0) watch_peers();
      } catch (const std::exception&) {
        // The store did not take it (a network hiccup, or rank 0 ending the world): try again on
        // the next beat; stopping for good would make this live rank look stalled to the others.
      }
      lock.lock();
      cv.wait_for(lock, kBeat, [this] { return stop; });
    }
    exited = true;
    cv.notify_all();
  }
};

Watchdog::Watchdog(int rank, int world, const std::string& addr, int port,
                   std::chrono::milliseconds ddp_timeout)
    : shared_(std::make_shared<Shared>()) {
  shared_->rank = rank;
  shared_->world = world;
  shared_->addr = addr;
  shared_->port = port;
  shared_->ddp_timeout = ddp_timeout;
#if STUDIO_HAVE_C10D_GLOO
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(port);
  so.isServer = false;
  so.waitWorkers = false;
  so.timeout = kStoreTimeout;
  shared_->store = c10::make_intrusive<c10d::TCPStore>(addr, so);
  shared_->beat();  // before any collective, so that every peer finds this key
#endif
  std::thread([s = shared_] { s->loop(); }).detach();
}

Watchdog::~Watchdog() {
  std::unique_lock<std::mutex> lock(shared_->mu);
  shared_->stop = true;
  shared_->cv.notify_all();
  // The thread owns its share of the state: if a store operation holds it past this wait (a
  // store that no longer answers), it ends on its own, after the store's timeout.
  shared_->cv.wait_for(lock, kStoreTimeout + std::chrono::seconds(1),
                       [this] { return shared_->exited; });
}

void Watchdog::waiting(const std::string& context) {
  std::lock_guard<std::mutex> lock(shared_->mu);
  shared_->activity = "waiting in " + context;
}

void Watchdog::done() {
  std::lock_guard<std::mutex> lock(shared_->mu);
  if (shared_->activity.rfind("waiting in ", 0) == 0)
    shared_->activity = "computing after " + shared_->activity.substr(11);
}

void Watchdog::set_step(int64_t step) {
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->step = step;
  }
  // A beat now, not up to a second later: a rank that stalls at the start of a step is then
  // named with that step (one small store write per step).
  try {
    shared_->beat();
  } catch (const std::exception&) {
    // the heartbeat thread meets the same store and stops; nothing to do here
  }
}

std::string Watchdog::diagnose() {
  // Off this thread, with a deadline: a store whose host is stalled may not answer at all, and
  // a thread blocked in it is left behind (detached; it holds its own share of the state).
  using Reads = std::optional<std::pair<std::vector<Beat>, std::vector<Beat>>>;
  auto s = shared_;
  auto promise = std::make_shared<std::promise<Reads>>();
  auto reads = promise->get_future();
  std::thread([s, promise] {
    Reads r;
    if (const auto first = s->read_all()) {
      std::this_thread::sleep_for(kDiagnoseGap);
      if (const auto second = s->read_all()) r = std::make_pair(*first, *second);
    }
    promise->set_value(std::move(r));
  }).detach();
  Reads beats;
  if (reads.wait_for(kDiagnoseGap + 2 * kStoreTimeout + std::chrono::seconds(1)) ==
      std::future_status::ready)
    beats = reads.get();
  const std::string store_at = s->addr + ":" + std::to_string(s->port);
  if (!beats)
    return "watchdog: the rendezvous store on rank 0 (" + store_at +
           ") does not answer either: rank 0 is stalled (stopped, frozen or swapping) or gone";

  const auto& [before, after] = *beats;
  std::vector<int> stalled, outside;
  for (int r = 0; r < s->world; ++r) {
    if (r == s->rank) continue;
    const Beat& a = before[static_cast<size_t>(r)];
    const Beat& b = after[static_cast<size_t>(r)];
    if (b.beats < 0 || a.beats == b.beats) stalled.push_back(r);
    else if (b.activity.rfind("waiting in ", 0) != 0) outside.push_back(r);
  }
  std::ostringstream out;
  auto details = [&](const std::vector<int>& ranks) {
    for (size_t i = 0; i < ranks.size() && i < 4; ++i) {
      const Beat& b = after[static_cast<size_t>(ranks[i])];
      out << (i ? "; " : "") << "rank " << ranks[i] << " "
          << (b.beats < 0 ? std::string("never beat") : "was " + where_text(b));
    }
  };
  if (!stalled.empty()) {
    out << "watchdog: rank" << (stalled.size() > 1 ? "s " : " ") << rank_list(stalled)
        << (stalled.size() > 1 ? " have" : " has") << " sent no heartbeat in "
        << seconds(kDiagnoseGap)
        << " (stalled: stopped, frozen or swapping, or its node is gone): ";
    details(stalled);
  } else if (!outside.empty()) {
    out << "watchdog: every rank is alive; rank" << (outside.size() > 1 ? "s " : " ")
        << rank_list(outside) << (outside.size() > 1 ? " are" : " is")
        << " outside any collective, stuck in computation or I/O: ";
    details(outside);
  } else {
    std::vector<int> others;
    for (int r = 0; r < s->world; ++r)
      if (r != s->rank) others.push_back(r);
    out << "watchdog: every rank is alive and waiting (different collectives mean a "
           "collective-order bug: rerun with STUDIO_VERIFY_COLLECTIVES=1): ";
    details(others);
  }
  return out.str();
}

}  // namespace studio::trainer::dist
