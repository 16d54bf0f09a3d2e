#pragma once
// The runs the studio knows: every run folder under a root (where LocalLauncher creates them),
// plus folders the user added one by one (runs started elsewhere: a terminal, another studio).
// The list of added folders persists in QSettings; everything else is read from the folders, so
// a restarted studio finds its runs (and their live state) again. Scans run on a worker thread.
#include <optional>

#include <QObject>
#include <QString>
#include <QStringList>
#include <QThread>
#include <QTimer>
#include <QVector>

#include "studio/ui/runs/run_info.h"

namespace studio::ui {

class RunScanner;

// QStandardPaths::AppLocalDataLocation + "/runs": where the studio keeps the runs it launches.
QString defaultRunsRoot();

class RunStore : public QObject {
  Q_OBJECT

 public:
  // While any run may change soon (Starting, Running, or a sweep's point whose queue runs on
  // this machine), the store rescans on its own at this interval.
  static constexpr int kDefaultPollMs = 2000;
  // Otherwise it still rescans, less often, so that a run or sweep started elsewhere (a terminal,
  // a script, another studio) in the runs folder, or a stopped sweep resumed from a terminal,
  // appears without a click on Refresh (TensorBoard's logdir reload does the same, every 5 s).
  static constexpr int kDefaultIdlePollMs = 10000;

  // The first scan happens once the event loop runs, so a setRoot() right after construction
  // decides which root is scanned first.
  explicit RunStore(QObject* parent = nullptr);
  ~RunStore() override;

  void setPollInterval(int ms);
  int pollInterval() const { return pollMs_; }
  // 0: no rescans while nothing is active (only refresh() and the active poll rescan).
  void setIdlePollInterval(int ms);
  int idlePollInterval() const { return idlePollMs_; }
  // The interval the store rescans at now (the active or the idle one), or 0 when it does not.
  int currentPollInterval() const { return poll_.isActive() ? poll_.interval() : 0; }

  QString root() const { return root_; }
  // Sets the folder whose subfolders are runs, and rescans.
  void setRoot(const QString& root);

  // Adds a run folder outside the root (persisted) and rescans; it must exist and be a run
  // folder (isRunFolder). Returns false with a message naming the folder otherwise.
  bool addRun(const QString& dir, QString* error = nullptr);
  // Removes a run from the list (persisted) without touching its files; addRun() brings it back.
  void forgetRun(const QString& dir);
  // The folders added with addRun(), as persisted.
  QStringList addedRuns() const { return added_; }

  // Newest first, as of the last scan.
  QVector<RunInfo> runs() const { return runs_; }
  std::optional<RunInfo> run(const QString& dir) const;
  bool isScanning() const { return scanning_; }

 public Q_SLOTS:
  // Rescans on the worker thread. Calls while a scan runs are folded into one more scan.
  void refresh();

 Q_SIGNALS:
  // After a scan that changed anything (a run appeared, went away or changed).
  void runsChanged();
  // For each run whose information changed or that appeared in a scan.
  void runChanged(const QString& dir);
  // After every scan, changed or not.
  void scanFinished();

 private:
  void deliver(const QVector<RunInfo>& runs);
  void saveSettings() const;
  // Starts, retimes or stops the poll for what the last scan found.
  void schedulePoll();

  QThread thread_;
  RunScanner* scanner_ = nullptr;  // lives on thread_, deleted when it finishes
  QTimer poll_;
  int pollMs_ = kDefaultPollMs;
  int idlePollMs_ = kDefaultIdlePollMs;
  bool moving_ = false;  // the last scan found a run that may change soon
  bool scanning_ = false;
  bool rescan_ = false;  // refresh() was called during a scan
  QString root_;
  QStringList added_;
  QStringList hidden_;  // runs under the root the user forgot
  QVector<RunInfo> runs_;
};

}  // namespace studio::ui
