#include "studio/ui/runs/run_folder.h"

#include <algorithm>

#include <unistd.h>

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QRegularExpression>

#include "studio/config/atomic_file.h"
#include "studio/runs/events.h"
#include "studio/remote/remote_run.h"
#include "studio/ui/base/local_path.h"

namespace studio::ui {

QString runDirPath(const QString& dir) {
  return QDir::cleanPath(QFileInfo(dir).absoluteFilePath());
}

bool hasTrainerState(const QString& dir) {
  static const QRegularExpression checkpoint(QStringLiteral("^checkpoint-[0-9]+$"));
  // A checkpoint's own folder holds one too, but is part of a run, not one.
  if (checkpoint.match(QFileInfo(dir).fileName()).hasMatch()) return false;
  const QString state = QString::fromLatin1(studio::kTrainerStateFileName);
  if (QFileInfo::exists(QDir(dir).filePath(state))) return true;
  const QDir folder(dir);
  for (const QString& name : folder.entryList({QStringLiteral("checkpoint-*")}, QDir::Dirs))
    if (checkpoint.match(name).hasMatch() && QFileInfo::exists(folder.filePath(name + u'/' + state)))
      return true;
  return false;
}

bool isRunFolder(const QString& dir) {
  return QFileInfo::exists(runFile(dir, studio::kStatusFileName)) ||
         QFileInfo::exists(runFile(dir, studio::kEventsFileName)) ||
         QFileInfo::exists(runFile(dir, studio::kTrainerLogFileName)) ||
         QFileInfo::exists(runFile(dir, kLaunchRecordFileName)) ||
         QFileInfo::exists(runFile(dir, studio::remote::kRemoteRecordFileName)) ||
         hasTrainerState(dir);
}

QString runFile(const QString& dir, const char* name) {
  return QDir(dir).filePath(QString::fromUtf8(name));
}

QString lastLogLine(const QString& logPath) {
  constexpr qint64 kTail = 4096;
  // Only a regular file, and only its tail: a FIFO would block the open, /dev/zero never end.
  std::string error;
  const int fd = studio::open_regular_file(localPath(logPath), error);
  QFile file;
  if (fd < 0 || !file.open(fd, QIODevice::ReadOnly, QFileDevice::AutoCloseHandle)) {
    if (fd >= 0) ::close(fd);
    return {};
  }
  file.seek(std::max<qint64>(0, file.size() - kTail));
  const QStringList lines = QString::fromUtf8(file.read(kTail)).split(QLatin1Char('\n'));
  for (auto it = lines.crbegin(); it != lines.crend(); ++it)
    if (!it->trimmed().isEmpty()) return it->trimmed().left(300);
  return {};
}

}  // namespace studio::ui
