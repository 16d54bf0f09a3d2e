#include "run_scanner.h"

#include <algorithm>

#include <QDir>
#include <QFileInfo>
#include <QHash>
#include <QSet>

#include "studio/ui/base/local_path.h"
#include "studio/config/sweep.h"
#include "studio/runs/events.h"
#include "studio/ui/runs/run_folder.h"

namespace studio::ui {

bool newerFirst(const RunInfo& a, const RunInfo& b) {
  const QDateTime ta = a.started.isValid() ? a.started : a.updated;
  const QDateTime tb = b.started.isValid() ? b.started : b.updated;
  if (ta.isValid() != tb.isValid()) return ta.isValid();  // undated runs last
  if (ta != tb) return ta > tb;
  return a.dir < b.dir;
}

QStringList RunScanner::sweepPoints(const QString& dir) {
  QStringList points;
  if (!QFileInfo::exists(runFile(dir, studio::kSweepFileName))) return points;
  const QDir sweep(dir);
  QSet<QString> named;
  try {
    // Every point sweep.json names whose folder is there, started or not (Queued).
    for (const studio::SweepPoint& p : studio::read_sweep(localPath(dir)).points)
      named.insert(QString::fromStdString(p.name));
  } catch (const std::exception&) {
    // Unreadable: the folders that have started are still worth listing.
  }
  for (const QString& name : sweep.entryList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name)) {
    const QString point = runDirPath(sweep.filePath(name));
    if (named.contains(name) || isRunFolder(point)) points << point;
  }
  return points;
}

void RunScanner::groupSweeps(QVector<RunInfo>& runs) {
  // Each sweep's points together, in point order, where its newest point sorted.
  QVector<RunInfo> grouped;
  grouped.reserve(runs.size());
  QSet<QString> placed;
  for (const RunInfo& run : runs) {
    if (run.sweepDir.isEmpty()) {
      grouped << run;
      continue;
    }
    if (placed.contains(run.sweepDir)) continue;
    placed.insert(run.sweepDir);
    QVector<RunInfo> points;
    for (const RunInfo& other : runs)
      if (other.sweepDir == run.sweepDir) points << other;
    std::sort(points.begin(), points.end(),
              [](const RunInfo& a, const RunInfo& b) { return a.name < b.name; });
    grouped << points;
  }
  runs = std::move(grouped);
}

void RunScanner::scan(const QString& root, const QStringList& added, const QStringList& hidden) {
  QStringList dirs;
  if (!root.isEmpty()) {
    const QDir rootDir(root);
    for (const QString& name : rootDir.entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
      const QString dir = runDirPath(rootDir.filePath(name));
      if (isRunFolder(dir))
        dirs << dir;
      else
        dirs << sweepPoints(dir);  // a sweep folder: its points, started or not
    }
  }
  // An added sweep folder stands for its points; any other added folder is listed as it is.
  for (const QString& dir : added)
    dirs << (!isRunFolder(dir) && QFileInfo::exists(runFile(dir, studio::kSweepFileName))
                 ? sweepPoints(dir)
                 : QStringList{dir});
  dirs.removeDuplicates();
  for (const QString& h : hidden) dirs.removeAll(h);

  std::map<QString, RunEventDigest> digests;
  QVector<RunInfo> runs;
  runs.reserve(dirs.size());
  for (const QString& dir : dirs) {
    auto it = digests_.find(dir);
    RunEventDigest digest = it != digests_.end()
                                ? std::move(it->second)
                                : RunEventDigest(studio::run_events_file(localPath(dir)));
    runs.push_back(readRunInfo(dir, digest));
    digests.emplace(dir, std::move(digest));
  }
  digests_ = std::move(digests);  // forgets the runs that are gone
  // A local sweep's queue, looked at once per sweep, for its points that do not run themselves:
  // between two points, or while it verifies a resumed point's checkpoint, none of them runs.
  QHash<QString, bool> queues;
  for (RunInfo& run : runs) {
    if (run.sweepDir.isEmpty() || run.remote || run.state == RunState::Running ||
        run.state == RunState::Starting)
      continue;
    auto queue = queues.find(run.sweepDir);
    if (queue == queues.end())
      queue = queues.insert(run.sweepDir, sweepQueueRunsHere(run.sweepDir));
    run.sweepQueueAlive = *queue;
  }
  std::sort(runs.begin(), runs.end(), newerFirst);
  groupSweeps(runs);
  emit scanned(runs);
}

}  // namespace studio::ui
