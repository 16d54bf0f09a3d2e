#include "studio/ui/runs/run_folder.h"

#include <algorithm>

#include <unistd.h>

#include <QDir>
#include <QFile>
#include <QFileInfo>

#include "studio/base/atomic_file.h"
#include "studio/ui/base/local_path.h"

namespace studio::ui {

QString runDirPath(const QString& dir) {
  return QDir::cleanPath(QFileInfo(dir).absoluteFilePath());
}

bool hasTrainerState(const QString& dir) { return studio::has_trainer_state(localPath(dir)); }

bool isRunFolder(const QString& dir) { return studio::is_run_folder(localPath(dir)); }

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
