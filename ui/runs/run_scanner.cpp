#include "run_scanner.h"

#include <algorithm>

#include <QDir>

#include "studio/ui/base/local_path.h"
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

void RunScanner::scan(const QString& root, const QStringList& added, const QStringList& hidden) {
  QStringList dirs;
  if (!root.isEmpty()) {
    const QDir rootDir(root);
    for (const QString& name : rootDir.entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
      const QString dir = runDirPath(rootDir.filePath(name));
      if (isRunFolder(dir)) dirs << dir;
    }
  }
  dirs << added;
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
  std::sort(runs.begin(), runs.end(), newerFirst);
  emit scanned(runs);
}

}  // namespace studio::ui
