#include "studio/ui/runs/launch_record.h"

#include <cmath>

#include "studio/runs/launch_record.h"
#include "studio/ui/base/local_path.h"

namespace studio::ui {

// The file's format is studio::LaunchRecord's (runs/launch_record.h); this is its Qt face.

QString LaunchRecord::write(const QString& runDir) const {
  studio::LaunchRecord r;
  for (const QString& a : command) r.command.push_back(a.toStdString());
  r.cwd = cwd.toStdString();
  r.engine = engine.toStdString();
  r.config = config.toStdString();
  if (started.isValid()) r.started = static_cast<double>(started.toMSecsSinceEpoch()) / 1000.0;
  r.pid = pid;
  r.nproc = nproc;
  r.host = host.toStdString();
  return QString::fromStdString(r.write(localPath(runDir)));
}

bool LaunchRecord::read(const QString& runDir, LaunchRecord& out, QString* error) {
  studio::LaunchRecord r;
  std::string why;
  if (!studio::LaunchRecord::read(localPath(runDir), r, why)) {
    if (error) *error = QString::fromStdString(why);
    return false;
  }
  LaunchRecord q;
  for (const std::string& a : r.command) q.command << QString::fromStdString(a);
  q.cwd = QString::fromStdString(r.cwd);
  q.engine = QString::fromStdString(r.engine);
  q.config = QString::fromStdString(r.config);
  if (r.started)
    q.started = QDateTime::fromMSecsSinceEpoch(static_cast<qint64>(std::llround(*r.started * 1000)));
  q.pid = r.pid;
  q.nproc = r.nproc;
  q.host = QString::fromStdString(r.host);
  out = std::move(q);
  return true;
}

}  // namespace studio::ui
