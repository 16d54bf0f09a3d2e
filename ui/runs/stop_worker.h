#pragma once
// Watches launched and stopping runs on LocalLauncher's thread: polls their processes with a
// timer, so that many runs can be watched at once and the GUI thread never waits on a process.
// Private to studio_runs: LocalLauncher is the interface.
#include <vector>

#include <QElapsedTimer>
#include <QObject>
#include <QString>
#include <QStringList>

class QTimer;

namespace studio::ui {

class StopWorker : public QObject {
  Q_OBJECT

 public:
  static constexpr int kPollMs = 100;
  // How long a SIGKILLed process may take to disappear before the stop counts as failed.
  static constexpr int kKillWaitMs = 5000;
  // What a sweep's queue process is given, past its points' grace and kill wait, to reap them
  // and record its end before it is killed.
  static constexpr int kQueueMarginSeconds = 10;

  StopWorker();

  // Reports launchFailed when `pid` exits before the engine wrote status.json.
  void watchLaunch(const QString& runDir, qint64 pid);
  // The same for `studio-train sweep`: before it wrote SWEEP_DIR/sweep.json (log: sweep.log).
  // sweepWritten comes once the queue has started too (it holds the sweep's lock), or has ended,
  // so that the scan it prompts finds the queue running and keeps the store polling.
  void watchSweepLaunch(const QString& sweepDir, qint64 pid);
  // `engine`: the launcher's engine program, used when the run has no launch record.
  void stop(const QString& runDir, const QString& engine, int graceSeconds);
  // Stops the sweep in `sweepDir`: SIGTERM to the process that runs its queue (from
  // sweep-status.json, when it is still that process), so that no point starts any more, then
  // stop() of every folder of `points` whose engine runs on this machine. The queue process
  // gets SIGKILL when it outlives its points' grace times; stopFinished(sweepDir) when it ends.
  void stopSweep(const QString& sweepDir, const QStringList& points, const QString& engine,
                 int graceSeconds);

 signals:
  void launchFailed(const QString& runDir, const QString& message);
  // A sweep watched by watchSweepLaunch wrote sweep.json and its queue started (or already
  // ended): its points can be listed.
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
    bool sweep = false;  // a sweep's queue process (sweep.json, sweep.log), not a run's engine
    QString engine;      // Terminating: the program it runs, to tell it from a reuse of its pid
  };

  // Whether the job's pid is still its process (isRunProcess, isSweepProcess): a process that
  // exited during the grace time may have left its pid to another, which is never signalled.
  bool stillItsProcess(const Job& job) const;

  // stop(), or with `quiet` nothing said when the run is not running (a point of a sweep being
  // stopped may have ended meanwhile). Returns the grace time given, or -1 when not signalled.
  int stopRun(const QString& runDir, const QString& engine, int graceSeconds, bool quiet);

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
