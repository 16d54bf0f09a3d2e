#pragma once
// Starts runs on this machine, detached from the studio: each run gets its own folder under the
// runs root holding the config it runs, a launch record and its log, and the engine runs in its
// own session so that it outlives the studio quitting or crashing. Everything stop() needs is
// read back from the folder, so runs started by an earlier studio session can be stopped too.
#include <QObject>
#include <QString>
#include <QStringList>
#include <QThread>

#include "studio/config/run_config.h"

namespace studio::ui {

class StopWorker;

struct LaunchRequest {
  studio::RunConfig config;
  // Where the config's relative paths point, e.g. the folder of the YAML it came from;
  // empty: the studio's working directory.
  QString baseDir;
  // The run's name; the folder is <root>/<name>-<yyyyMMdd-HHmmss>. Empty: "run".
  QString name;
  int nproc = 1;  // processes on this machine (studio-train --nproc)
  // Which trainer runs the config: studio-train, or LLaMA-Factory's `llamafactory-cli train`
  // (FORCE_TORCHRUN, NPROC_PER_NODE = nproc) under `studio-train supervise`, which gives it the
  // same status.json, stop and reattach as studio-train's own runs (docs/LLAMAFACTORY.md).
  enum class Trainer { StudioTrain, LlamaFactory };
  Trainer trainer = Trainer::StudioTrain;
  // For LlamaFactory: llamafactory-cli's path, or a name looked up in PATH. Its folder goes first
  // in the run's PATH, so that the torchrun of its environment is the one it starts.
  QString llamafactoryCli = QStringLiteral("llamafactory-cli");
};

// A sweep (docs/SWEEPS.md) of one base config on this machine.
struct SweepLaunchRequest {
  studio::RunConfig config;  // the base config
  QString baseDir;           // as LaunchRequest's
  QString name;              // the sweep's name; the folder is <root>/<name>-<yyyyMMdd-HHmmss>
  QStringList axes;          // "key=v1,v2,...", as studio-train sweep --sweep takes them
  bool list = false;         // the i-th values together; false: every combination
  int nproc = 1;             // processes per point
  int parallel = 1;          // points at once
};

class LocalLauncher : public QObject {
  Q_OBJECT

 public:
  static constexpr int kDefaultGraceSeconds = 20;

  explicit LocalLauncher(QObject* parent = nullptr);
  ~LocalLauncher() override;

  // The studio-train to run (the app passes the one next to the studio binary).
  void setEngineProgram(const QString& path) { engine_ = path; }
  QString engineProgram() const { return engine_; }
  // Where run folders are created; default defaultRunsRoot(), as RunStore scans.
  void setRunsRoot(const QString& root) { root_ = root; }
  QString runsRoot() const { return root_; }

  // Creates the run folder, writes config.yaml and studio-launch.json there and starts
  // `studio-train train RUN_DIR/config.yaml [--nproc N]` detached, its stdout and stderr
  // appended to RUN_DIR/train.log. Returns the run folder, or "" with `error` saying what to do
  // (no engine, folder not writable, ...). Should the engine then exit before it records the
  // run in status.json (e.g. the config is refused), launchFailed() says so.
  QString launch(const LaunchRequest& request, QString* error = nullptr);

  // Creates the sweep's folder, writes the base config there as base.yaml (configForRun: its
  // relative paths made absolute) and starts `studio-train sweep base.yaml --sweep AXIS ...
  // [--list] --nproc N --parallel K --name NAME --out SWEEP_DIR` detached in its own session,
  // its output appended to SWEEP_DIR/sweep.log. The sweep checks every point before it writes
  // sweep.json and the point folders, which RunStore then lists (Queued until each starts).
  // Returns the folder, or "" with `error`; should the sweep exit before it wrote sweep.json
  // (a point the engine refuses), launchFailed() says why.
  QString launchSweep(const SweepLaunchRequest& request, QString* error = nullptr);

  // Asks the run to stop: SIGTERM to its engine, then SIGKILL to its process group when it is
  // still alive after `graceSeconds`. Only a process that still is this run's engine is ever
  // signalled (see isRunProcess). Returns at once; the outcome comes as stopRequested(), then
  // stopFinished() or stopFailed().
  void stop(const QString& runDir, int graceSeconds = kDefaultGraceSeconds);

  // Asks the sweep in `sweepDir` to stop: SIGTERM to the process that runs its queue (recorded
  // in sweep-status.json; signalled only while it is that process, see isSweepProcess), so that
  // no point starts any more, then stop() of every folder of `points` that runs here. The
  // signals are those of stop(), with sweepDir for the queue: stopRequested(sweepDir) when
  // anything was signalled, stopFinished(sweepDir) when the queue process ended, and
  // stopFailed(sweepDir) when nothing of the sweep runs on this machine.
  void stopSweep(const QString& sweepDir, const QStringList& points,
                 int graceSeconds = kDefaultGraceSeconds);

  // The config as launch() writes it: output_dir = runDir, and every path key that is relative
  // (model_name_or_path, ref_model, dataset_dir, deepspeed, resume_from_checkpoint) made
  // absolute against baseDir, since the engine runs in the run folder. A LLaMA-Factory v1
  // config's local data paths are made absolute too, its dataset YAML rewritten into runDir
  // (studio::relocate_v1_datasets); throws std::invalid_argument when that YAML cannot be read
  // or written.
  static studio::RunConfig configForRun(const studio::RunConfig& config, const QString& baseDir,
                                        const QString& runDir);

 Q_SIGNALS:
  void launched(const QString& runDir);
  void launchFailed(const QString& runDir, const QString& message);
  // A sweep launchSweep started wrote sweep.json and its point folders: they can be listed.
  void sweepWritten(const QString& sweepDir);
  // SIGTERM was sent.
  void stopRequested(const QString& runDir);
  // The engine is gone; `killed` when it took SIGKILL (the studio then records the run as
  // stopped in status.json and events.jsonl, since the engine could not).
  void stopFinished(const QString& runDir, bool killed);
  // Nothing was signalled (no pid recorded, not running, not this run's process), or the run
  // outlived SIGKILL.
  void stopFailed(const QString& runDir, const QString& message);

 private:
  QString createRunDir(const QString& name, QString* error) const;
  // The engine and setsid to start it with; "" with `error` when either is missing.
  QString checkEngine(QString* error, QString* setsid) const;

  QString engine_;
  QString root_;
  QThread thread_;
  StopWorker* worker_ = nullptr;  // lives on thread_, deleted when it finishes
};

}  // namespace studio::ui
