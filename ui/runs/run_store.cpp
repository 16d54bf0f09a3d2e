#include "studio/ui/runs/run_store.h"

#include <QDir>
#include <QFileInfo>
#include <QHash>
#include <QSettings>
#include <QStandardPaths>

#include "run_scanner.h"
#include "studio/ui/runs/run_folder.h"

namespace studio::ui {
namespace {

const QString kAddedKey = QStringLiteral("runs/added");
const QString kHiddenKey = QStringLiteral("runs/hidden");

}  // namespace

QString defaultRunsRoot() {
  return QStandardPaths::writableLocation(QStandardPaths::AppLocalDataLocation) +
         QStringLiteral("/runs");
}

RunStore::RunStore(QObject* parent) : QObject(parent), root_(defaultRunsRoot()) {
  qRegisterMetaType<RunInfo>();
  qRegisterMetaType<QVector<RunInfo>>();
  const QSettings settings;
  added_ = settings.value(kAddedKey).toStringList();
  hidden_ = settings.value(kHiddenKey).toStringList();

  thread_.setObjectName(QStringLiteral("run-store"));
  scanner_ = new RunScanner;
  scanner_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, scanner_, &QObject::deleteLater);
  connect(scanner_, &RunScanner::scanned, this, &RunStore::deliver, Qt::QueuedConnection);
  thread_.start();

  connect(&poll_, &QTimer::timeout, this, &RunStore::refresh);
  QTimer::singleShot(0, this, &RunStore::refresh);
}

RunStore::~RunStore() {
  thread_.quit();
  thread_.wait();
}

void RunStore::setPollInterval(int ms) {
  pollMs_ = ms;
  schedulePoll();
}

void RunStore::setIdlePollInterval(int ms) {
  idlePollMs_ = ms;
  schedulePoll();
}

void RunStore::schedulePoll() {
  const int ms = moving_ ? pollMs_ : idlePollMs_;
  if (ms <= 0) {
    poll_.stop();
    return;
  }
  // Restarting a running timer would push its next scan out by every call: only a new interval
  // restarts it.
  if (!poll_.isActive() || poll_.interval() != ms) poll_.start(ms);
}

void RunStore::setRoot(const QString& root) {
  root_ = root.isEmpty() ? QString() : runDirPath(root);
  refresh();
}

bool RunStore::addRun(const QString& path, QString* error) {
  const QString dir = runDirPath(path);
  if (!QFileInfo(dir).isDir() || !isRunFolder(dir)) {
    if (error)
      *error = QFileInfo(dir).isDir()
                   ? QStringLiteral(
                         "%1 is not a run folder: it holds neither status.json nor "
                         "events.jsonl (choose the run's output_dir)")
                         .arg(dir)
                   : QStringLiteral("%1 does not exist or is not a folder").arg(dir);
    return false;
  }
  hidden_.removeAll(dir);
  if (!added_.contains(dir)) added_ << dir;
  saveSettings();
  refresh();
  return true;
}

void RunStore::forgetRun(const QString& path) {
  const QString dir = runDirPath(path);
  added_.removeAll(dir);
  if (!hidden_.contains(dir)) hidden_ << dir;
  saveSettings();
  refresh();
}

void RunStore::saveSettings() const {
  QSettings settings;
  settings.setValue(kAddedKey, added_);
  settings.setValue(kHiddenKey, hidden_);
}

std::optional<RunInfo> RunStore::run(const QString& dir) const {
  const QString key = runDirPath(dir);
  for (const RunInfo& r : runs_)
    if (r.dir == key) return r;
  return std::nullopt;
}

void RunStore::refresh() {
  if (scanning_) {
    rescan_ = true;
    return;
  }
  scanning_ = true;
  QMetaObject::invokeMethod(
      scanner_,
      [scanner = scanner_, root = root_, added = added_, hidden = hidden_] {
        scanner->scan(root, added, hidden);
      },
      Qt::QueuedConnection);
}

void RunStore::deliver(const QVector<RunInfo>& runs) {
  scanning_ = false;
  QHash<QString, const RunInfo*> before;
  for (const RunInfo& r : runs_) before.insert(r.dir, &r);
  QStringList changed;
  // What may change soon: a run starting or running, or a sweep whose queue runs here (between
  // two points none of them runs). A Queued point of a sweep whose queue is not running (stopped,
  // or prepared for a Slurm array) waits for someone to start it: the idle poll notices that.
  bool moving = false;
  for (const RunInfo& r : runs) {
    moving = moving || r.state == RunState::Starting || r.state == RunState::Running ||
             r.sweepQueueAlive;
    const RunInfo* old = before.value(r.dir);
    if (!old || *old != r) changed << r.dir;
  }
  // Same count and nothing new or changed: the same runs as before.
  const bool anyChanged = runs.size() != runs_.size() || !changed.isEmpty();
  runs_ = runs;
  for (const QString& dir : changed) emit runChanged(dir);
  if (anyChanged) emit runsChanged();
  emit scanFinished();

  moving_ = moving;
  schedulePoll();
  if (rescan_) {
    rescan_ = false;
    refresh();
  }
}

}  // namespace studio::ui
