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

  poll_.setInterval(kDefaultPollMs);
  connect(&poll_, &QTimer::timeout, this, &RunStore::refresh);
  QTimer::singleShot(0, this, &RunStore::refresh);
}

RunStore::~RunStore() {
  thread_.quit();
  thread_.wait();
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
  bool anyActive = false;
  for (const RunInfo& r : runs) {
    anyActive = anyActive || isActive(r.state) || r.sweepQueueAlive;
    const RunInfo* old = before.value(r.dir);
    if (!old || *old != r) changed << r.dir;
  }
  // Same count and nothing new or changed: the same runs as before.
  const bool anyChanged = runs.size() != runs_.size() || !changed.isEmpty();
  runs_ = runs;
  for (const QString& dir : changed) emit runChanged(dir);
  if (anyChanged) emit runsChanged();
  emit scanFinished();

  if (anyActive && !poll_.isActive()) poll_.start();
  if (!anyActive) poll_.stop();
  if (rescan_) {
    rescan_ = false;
    refresh();
  }
}

}  // namespace studio::ui
