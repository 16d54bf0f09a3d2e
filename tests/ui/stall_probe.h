#pragma once
// The GUI thread's responsiveness, for the tests that must show nothing blocks it (the studio
// under load, the Chat tab's engine sessions).
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <QElapsedTimer>
#include <QObject>
#include <QString>
#include <QTimer>

// The longest the GUI thread's event loop went without turning, measured by a 5 ms timer: each
// tick late by more than its interval is a stall of that much.
//
// A tick can also be late because the thread was ready to run and the machine gave its core to
// someone else (two cores, a reader thread at full speed, a neighbour on the host): that is the
// scheduler's delay, not the studio blocking its own GUI thread, and on a busy CI machine it came
// to more than 70 ms at once. Linux counts it per thread, as the time spent runnable on a run
// queue (the second field of /proc/thread-self/schedstat); stop() returns the stall less that
// time. Time spent working or sleeping in a blocking call, which is what the studio must not
// do, stays in. Where the kernel keeps no such count the whole gap is the stall.
class StallProbe : public QObject {
 public:
  StallProbe() {
    timer_.setTimerType(Qt::PreciseTimer);
    timer_.setInterval(kTickMs);
    connect(&timer_, &QTimer::timeout, this, [this] {
      const qint64 gap = clock_.restart() - kTickMs;
      const qint64 queued = runQueueNs();
      const qint64 waited = (queued - lastQueuedNs_) / 1000000;
      lastQueuedNs_ = queued;
      if (gap > wallWorst_) wallWorst_ = gap;
      if (gap - waited > worst_) {
        worst_ = gap - waited;
        waitedInWorst_ = waited;
      }
    });
  }
  ~StallProbe() override {
    if (schedstat_ >= 0) ::close(schedstat_);
  }
  void start() {
    worst_ = wallWorst_ = waitedInWorst_ = 0;
    if (schedstat_ < 0) schedstat_ = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    lastQueuedNs_ = runQueueNs();
    clock_.start();
    timer_.start();
  }
  // The longest stall of the studio's own making, in ms.
  qint64 stop() {
    timer_.stop();
    return worst_;
  }
  // The longest gap between ticks as the wall clock saw it, run-queue waits included.
  qint64 wallWorst() const { return wallWorst_; }
  // How much of the worst stall's gap the thread spent waiting for a core (left out of it).
  qint64 waitedInWorst() const { return waitedInWorst_; }
  bool countsRunQueue() const { return schedstat_ >= 0; }
  // For the failure message and the log.
  QString describe() const {
    return QStringLiteral("stalled %1 ms (%2 ms of waiting for a core left out; the wall "
                          "clock's longest gap between ticks %3 ms%4)")
        .arg(worst_)
        .arg(waitedInWorst_)
        .arg(wallWorst_)
        .arg(countsRunQueue() ? QString() : QStringLiteral(", run-queue time not known here"));
  }

 private:
  // Nanoseconds this thread has spent runnable but not running, since it started (0 if unknown).
  qint64 runQueueNs() const {
    if (schedstat_ < 0) return 0;
    char text[96];
    const ssize_t n = ::pread(schedstat_, text, sizeof text - 1, 0);
    if (n <= 0) return lastQueuedNs_;
    text[n] = '\0';
    char* end = nullptr;
    std::strtoull(text, &end, 10);  // time on a core
    return static_cast<qint64>(std::strtoull(end, nullptr, 10));
  }

  static constexpr int kTickMs = 5;
  QTimer timer_;
  QElapsedTimer clock_;
  int schedstat_ = -1;
  qint64 lastQueuedNs_ = 0;
  qint64 worst_ = 0;
  qint64 wallWorst_ = 0;
  qint64 waitedInWorst_ = 0;
};
