#pragma once
// Watches launched and stopping runs on LocalLauncher's thread: polls their processes with a
// timer, so that many runs can be watched at once and the GUI thread never waits on a process.
// Private to studio_runs: LocalLauncher is the interface.
#include <vector>

#include <QElapsedTimer>
#include <QObject>
#include <QString>

class QTimer;

namespace studio::ui {

class StopWorker : public QObject {
  Q_OBJECT

 public:
  static constexpr int kPollMs = 100;
  // How long a SIGKILLed process may take to disappear before the stop counts as failed.
  static constexpr int kKillWaitMs = 5000;

  StopWorker();

  // Reports launchFailed when `pid` exits before the engine wrote status.json.
  void watchLaunch(const QString& runDir, qint64 pid);
  // The same for `studio-train sweep`: before it wrote SWEEP_DIR/sweep.json (log: sweep.log).
  void watchSweepLaunch(const QString& sweepDir, qint64 pid);
  // `engine`: the launcher's engine program, used when the run has no launch record.
  void stop(const QString& runDir, const QString& engine, int graceSeconds);

 signals:
  void launchFailed(const QString& runDir, const QString& message);
  // A sweep watched by watchSweepLaunch wrote sweep.json: its points can be listed.
  void sweepWritten(const QString& sweepDir);
  void stopRequested(const QString& runDir);
  void stopFinished(const QString& runDir, bool killed);
  void stopFailed(const QString& runDir, const QString& message);

 private:
  enum class Phase { Launching, Terminating, Killing };
  struct Job {
    QString dir;
    qint64 pid = 0;
    Phase phase = Phase::Launching;
    qint64 deadlineMs = 0;  // on `clock`: SIGKILL (Terminating) or give up (Killing)
    int graceSeconds = 0;
    bool sweep = false;  // Launching: a sweep (sweep.json, sweep.log), not a run
  };

  void poll();
  // True when the job is over.
  bool advance(Job& job);
  void kill(Job& job);
  void recordKilled(const Job& job);
  void track(Job job);

  QTimer* timer_;
  QElapsedTimer clock_;
  std::vector<Job> jobs_;
};

}  // namespace studio::ui
