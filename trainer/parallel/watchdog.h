#pragma once
// The communicator's watchdog: names the rank that stalls without dying.
//
// A rank that is stopped (SIGSTOP, a debugger), frozen or swapping never reaches its next
// collective; its peers wait there until ddp_timeout and, without more, could only say "a peer
// is hung or dead". So every rank of a multi-process world runs a heartbeat thread that writes
// "beats|step|activity" to the rendezvous store (key studio/heartbeat/RANK) every second,
// whatever its main thread does: a stalled process stops beating, a busy or waiting one does not.
//   - Rank 0's thread reads the others' beats every few seconds and says on stderr which rank has
//     not beaten for a while (long before ddp_timeout), and when it comes back.
//   - A rank whose collective times out asks diagnose() before it throws: the ranks whose beats
//     did not advance over a few seconds are stalled; if none is, the ranks outside any collective
//     are named (stuck in computation or I/O), else where each rank waits.
// Beats are counted, not timed, so no clock is compared across nodes. The store's host is rank 0:
// when it does not answer, rank 0 is the one named.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace studio::trainer::dist {

class Watchdog {
 public:
  struct Shared;
  // Connects its own client to the rendezvous store at addr:port and starts beating.
  Watchdog(int rank, int world, const std::string& addr, int port,
           std::chrono::milliseconds ddp_timeout);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // What the main thread does, for the heartbeat: waiting for `context` to complete, or done
  // with it; and the training step it is in (which also beats at once).
  void waiting(const std::string& context);
  void done();
  void set_step(int64_t step);

  // After a timeout: a sentence naming the stalled rank(s), or what the others do; it takes a
  // few seconds (two reads of every beat) and never blocks longer than that.
  std::string diagnose();

 private:
  std::shared_ptr<Shared> shared_;
};

}  // namespace studio::trainer::dist
