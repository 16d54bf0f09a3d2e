#pragma once
// One way to start and stop runs, whoever runs them: this machine (LocalRunBackend), or an SSH
// host, plain or under Slurm (RemoteRunBackend, studio_ui_remote). The main window holds one
// backend per kind and talks to each through this interface: it asks which backend starts on a
// target or owns a run folder, and shows what the backends report. Every slow step (an SSH
// connection, an upload, waiting for a process to stop) happens off the GUI thread inside the
// backend; the signals arrive on the GUI thread.
#include <QObject>
#include <QString>
#include <QStringList>

#include "studio/config/run_config.h"
#include "studio/ui/runs/launch_target.h"
#include "studio/ui/runs/run_info.h"

namespace studio::ui {

// How long a notice stays on the status bar, unless a backend says otherwise.
inline constexpr int kNoticeMs = 8000;

class RunBackend : public QObject {
  Q_OBJECT

 public:
  using QObject::QObject;

  // Whether this backend starts runs on `target`, and whether it owns the run folder `run` (it
  // stops and follows it).
  virtual bool startsOn(const LaunchTarget& target) const = 0;
  virtual bool owns(const RunInfo& run) const = 0;

  // Starts `config` (its relative paths against `baseDir`) on `target`, in a run folder under
  // `runsRoot`. The outcome comes as started() or startFailed(), perhaps before this returns.
  // False when the backend cannot take a start now (one is in flight), with busyMessage() saying
  // so; nothing is then emitted.
  virtual bool start(const studio::RunConfig& config, const QString& baseDir,
                     const LaunchTarget& target, const QString& runsRoot) = 0;
  virtual QString busyMessage() const = 0;
  // Whether startFailed() warrants a dialog (the user is waiting on the wizard for it) or a line
  // in the log and the status bar.
  virtual bool startFailureIsModal() const = 0;

  // What stop() will do to the run in `dir`, for the log (signals, grace times, scancel).
  virtual QString stopDescription(const QString& dir) const = 0;
  // Asks the run in `dir` to stop; the outcome comes as stopFinished() or stopFailed().
  virtual void stop(const QString& dir) = 0;
  // What stopSweep() will do to the sweep `sweepDir` (RunInfo::sweepDir), for the log.
  virtual QString stopSweepDescription(const QString& sweepDir) const = 0;
  // Asks the sweep `sweepDir`, whose points the runs list holds as `points`, to stop: no point
  // starts any more, and the running ones stop as stop() stops a run. The outcome comes as
  // stopFinished() or stopFailed() for sweepDir (and for each point stopped, when it ends).
  virtual void stopSweep(const QString& sweepDir, const QStringList& points) = 0;

  // At start-up: goes on following the runs under `runsRoot` that were followed when the studio
  // last closed (a run is followed from its start on: its folder fills as it goes).
  virtual void followAll(const QString& runsRoot) = 0;

 signals:
  // A run started; `dir` is its folder under the runs root (listed from the next scan).
  void started(const QString& dir);
  void startFailed(const QString& error);
  // How a start that takes a while is going: `step` for the log, and the bytes of the file being
  // uploaded (fileCount 0 and total 0: no file, just busy).
  void startProgress(const QString& step, int fileIndex, int fileCount, qint64 bytes,
                     qint64 total);
  // The run in `dir` stopped; `summary` says how.
  void stopFinished(const QString& dir, const QString& summary);
  void stopFailed(const QString& dir, const QString& error);
  // Files of the runs changed in a way the runs list shows (state, end, a stop).
  void runsChanged();
  // Something the user should read: into the log when `log`, and on the status bar for
  // `statusMs` (0: not there).
  void notice(const QString& text, bool log, int statusMs);
};

}  // namespace studio::ui
