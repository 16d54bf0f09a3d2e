#include "studio/ui/runs/run_folder.h"

#include <algorithm>

#include <QDir>
#include <QFile>
#include <QFileInfo>

#include "studio/config/events.h"
#include "studio/remote/remote_run.h"

namespace studio::ui {

QString runDirPath(const QString& dir) {
  return QDir::cleanPath(QFileInfo(dir).absoluteFilePath());
}

bool isRunFolder(const QString& dir) {
  return QFileInfo::exists(runFile(dir, studio::kStatusFileName)) ||
         QFileInfo::exists(runFile(dir, studio::kEventsFileName)) ||
         QFileInfo::exists(runFile(dir, studio::kTrainerLogFileName)) ||
         QFileInfo::exists(runFile(dir, kLaunchRecordFileName)) ||
         QFileInfo::exists(runFile(dir, studio::remote::kRemoteRecordFileName));
}

QString runFile(const QString& dir, const char* name) {
  return QDir(dir).filePath(QString::fromUtf8(name));
}

QString lastLogLine(const QString& logPath) {
  constexpr qint64 kTail = 4096;
  QFile file(logPath);
  if (!file.open(QIODevice::ReadOnly)) return {};
  file.seek(std::max<qint64>(0, file.size() - kTail));
  const QStringList lines = QString::fromUtf8(file.readAll()).split(QLatin1Char('\n'));
  for (auto it = lines.crbegin(); it != lines.crend(); ++it)
    if (!it->trimmed().isEmpty()) return it->trimmed().left(300);
  return {};
}

}  // namespace studio::ui
