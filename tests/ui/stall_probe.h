#pragma once
// The GUI thread's responsiveness, for the tests that must show nothing blocks it (the studio
// under load, the Chat tab's engine sessions).
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <QElapsedTimer>
#include <QObject>
#include <QString>
#include <QTimer>

// The longest the GUI thread's event loop went without turning, measured by a 5 ms timer: each
// tick late by more than its interval is a stall of that much.
//
// A tick can also be late for reasons that are not the studio's doing, and those are left out:
// - the thread was ready to run and the machine gave its core to someone else (two cores, a
//   reader thread at full speed, a neighbour on the host); on a busy CI machine that came to more
//   than 70 ms at once. Linux counts it per thread, as the time spent runnable on a run queue
//   (the second field of /proc/thread-self/schedstat).
// - the virtual machine's CPU was not running at all: the hypervisor gave the host's core to
//   another guest ("steal" time, the eighth number of the CPU's line in /proc/stat). The guest
//   sees that time as its thread running, so schedstat cannot tell it apart; /proc/stat counts it
//   per CPU, in clock ticks (10 ms here). The steal of the CPU the thread was on at both ends of
//   the gap is left out (if it moved, the smaller of the two CPUs' steal).
// Time spent working or sleeping in a blocking call, which is what the studio must not do, stays
// in. Where the kernel keeps no such count the whole gap is the stall. describe() splits the
// worst stall into its time on a core and its time asleep, so a failure says which it was.
class StallProbe : public QObject {
 public:
  StallProbe() {
    timer_.setTimerType(Qt::PreciseTimer);
    timer_.setInterval(kTickMs);
    connect(&timer_, &QTimer::timeout, this, [this] {
      const qint64 gap = clock_.restart() - kTickMs;
      const Sched sched = readSched();
      const int cpu = ::sched_getcpu();
      readSteal(steal_);
      const qint64 waited = (sched.queuedNs - last_.queuedNs) / 1000000;
      const qint64 onCore = (sched.runNs - last_.runNs) / 1000000;
      const qint64 stolen = std::min(gap, stolenSince(cpu));
      last_ = sched;
      lastCpu_ = cpu;
      lastSteal_ = steal_;
      if (gap > wallWorst_) wallWorst_ = gap;
      const qint64 stall = std::max<qint64>(0, gap - waited - stolen);
      if (stall > worst_) {
        worst_ = stall;
        waitedInWorst_ = waited;
        stolenInWorst_ = stolen;
        workingInWorst_ = std::clamp<qint64>(onCore - stolen, 0, stall);
      }
    });
  }
  ~StallProbe() override {
    if (schedstat_ >= 0) ::close(schedstat_);
    if (stat_ >= 0) ::close(stat_);
  }
  void start() {
    worst_ = wallWorst_ = waitedInWorst_ = stolenInWorst_ = workingInWorst_ = 0;
    if (schedstat_ < 0) schedstat_ = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (stat_ < 0) stat_ = ::open("/proc/stat", O_RDONLY | O_CLOEXEC);
    last_ = readSched();
    lastCpu_ = ::sched_getcpu();
    readSteal(lastSteal_);
    clock_.start();
    timer_.start();
  }
  // The longest stall of the studio's own making, in ms.
  qint64 stop() {
    timer_.stop();
    return worst_;
  }
  // The longest gap between ticks as the wall clock saw it, run-queue waits and steal included.
  qint64 wallWorst() const { return wallWorst_; }
  // How much of the worst stall's gap the thread spent waiting for a core (left out of it).
  qint64 waitedInWorst() const { return waitedInWorst_; }
  // How much of it the hypervisor took from the thread's CPU (left out of it).
  qint64 stolenInWorst() const { return stolenInWorst_; }
  // How much of the worst stall the thread spent on a core (the rest it slept).
  qint64 workingInWorst() const { return workingInWorst_; }
  bool countsRunQueue() const { return schedstat_ >= 0; }
  bool countsSteal() const { return stat_ >= 0 && !lastSteal_.empty(); }
  // For the failure message and the log.
  QString describe() const {
    QString text = QStringLiteral("stalled %1 ms").arg(worst_);
    if (countsRunQueue() && worst_ > 0)
      text += QStringLiteral(" (%1 ms of it working on a core, %2 ms asleep)")
                  .arg(workingInWorst_)
                  .arg(worst_ - workingInWorst_);
    text += QStringLiteral("; left out: %1 ms waiting for a core").arg(waitedInWorst_);
    if (countsSteal()) text += QStringLiteral(", %1 ms taken by the hypervisor").arg(stolenInWorst_);
    text += QStringLiteral("; the wall clock's longest gap between ticks %1 ms").arg(wallWorst_);
    if (!countsRunQueue()) text += QStringLiteral(", run-queue time not known here");
    if (!countsSteal()) text += QStringLiteral(", steal time not known here");
    return text;
  }

 private:
  struct Sched {
    qint64 runNs = 0;     // on a core
    qint64 queuedNs = 0;  // runnable, waiting for one
  };
  // This thread's times since it started (zeros if unknown).
  Sched readSched() const {
    if (schedstat_ < 0) return {};
    char text[96];
    const ssize_t n = ::pread(schedstat_, text, sizeof text - 1, 0);
    if (n <= 0) return last_;
    text[n] = '\0';
    char* end = nullptr;
    Sched out;
    out.runNs = static_cast<qint64>(std::strtoull(text, &end, 10));
    out.queuedNs = static_cast<qint64>(std::strtoull(end, nullptr, 10));
    return out;
  }
  // Each CPU's steal time in ms, by CPU number, from the "cpuN" lines of /proc/stat; left as it
  // was if the file cannot be read.
  void readSteal(std::vector<qint64>& out) const {
    if (stat_ < 0) return;
    char text[8192];
    const ssize_t n = ::pread(stat_, text, sizeof text - 1, 0);
    if (n <= 0) return;
    text[n] = '\0';
    static const long ticksPerSecond = ::sysconf(_SC_CLK_TCK);
    if (ticksPerSecond <= 0) return;
    const char* line = std::strchr(text, '\n');  // past the "cpu" total line
    while (line != nullptr && std::strncmp(line + 1, "cpu", 3) == 0) {
      char* p = nullptr;
      const long cpu = std::strtol(line + 4, &p, 10);
      unsigned long long field = 0;
      for (int i = 0; i < 8 && p != nullptr; ++i) field = std::strtoull(p, &p, 10);
      if (cpu >= 0 && cpu < 4096) {
        if (out.size() <= static_cast<std::size_t>(cpu)) out.resize(cpu + 1, 0);
        out[cpu] = static_cast<qint64>(field) * 1000 / ticksPerSecond;
      }
      line = std::strchr(line + 1, '\n');
    }
  }
  // The steal since the last tick of the CPU the thread was on then and is on now.
  qint64 stolenSince(int cpu) const {
    auto delta = [this](int c) -> qint64 {
      if (c < 0 || static_cast<std::size_t>(c) >= steal_.size() ||
          static_cast<std::size_t>(c) >= lastSteal_.size())
        return 0;
      return std::max<qint64>(0, steal_[c] - lastSteal_[c]);
    };
    return cpu == lastCpu_ ? delta(cpu) : std::min(delta(cpu), delta(lastCpu_));
  }

  static constexpr int kTickMs = 5;
  QTimer timer_;
  QElapsedTimer clock_;
  int schedstat_ = -1;
  int stat_ = -1;
  Sched last_;
  int lastCpu_ = -1;
  std::vector<qint64> steal_, lastSteal_;
  qint64 worst_ = 0;
  qint64 wallWorst_ = 0;
  qint64 waitedInWorst_ = 0;
  qint64 stolenInWorst_ = 0;
  qint64 workingInWorst_ = 0;
};
