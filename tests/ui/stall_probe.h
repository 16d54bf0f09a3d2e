#pragma once
// The GUI thread's responsiveness, for the tests that must show nothing blocks it (the studio
// under load, the Chat tab's engine sessions).
#include <QElapsedTimer>
#include <QObject>
#include <QTimer>

// The longest the GUI thread's event loop went without turning, measured by a 5 ms timer: each
// tick late by more than its interval is a stall of that much.
class StallProbe : public QObject {
 public:
  StallProbe() {
    timer_.setTimerType(Qt::PreciseTimer);
    timer_.setInterval(kTickMs);
    connect(&timer_, &QTimer::timeout, this, [this] {
      const qint64 gap = clock_.restart() - kTickMs;
      if (gap > worst_) worst_ = gap;
    });
  }
  void start() {
    worst_ = 0;
    clock_.start();
    timer_.start();
  }
  qint64 stop() {
    timer_.stop();
    return worst_;
  }

 private:
  static constexpr int kTickMs = 5;
  QTimer timer_;
  QElapsedTimer clock_;
  qint64 worst_ = 0;
};
