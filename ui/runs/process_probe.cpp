#include "studio/ui/runs/process_probe.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSysInfo>

#include "studio/config/sweep.h"
#include "studio/ui/runs/run_folder.h"

namespace studio::ui {
namespace {

QString procPath(qint64 pid, const char* entry) {
  return QStringLiteral("/proc/%1/%2").arg(pid).arg(QLatin1String(entry));
}

bool isInside(const QString& path, const QString& dir) {
  const QString clean = QDir::cleanPath(path);
  return clean == dir || clean.startsWith(dir + QLatin1Char('/'));
}

}  // namespace

bool processAlive(qint64 pid) {
  if (pid <= 0) return false;
  QFile stat(procPath(pid, "stat"));
  if (!stat.open(QIODevice::ReadOnly)) return false;
  // "pid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ')'.
  const QByteArray line = stat.readAll();
  const qsizetype close = line.lastIndexOf(')');
  if (close < 0 || close + 2 >= line.size()) return false;
  const char state = line.at(close + 2);
  return state != 'Z' && state != 'X' && state != 'x';
}

QStringList processArguments(qint64 pid) {
  if (pid <= 0) return {};
  QFile cmdline(procPath(pid, "cmdline"));
  if (!cmdline.open(QIODevice::ReadOnly)) return {};
  QByteArray bytes = cmdline.readAll();
  if (bytes.endsWith('\0')) bytes.chop(1);
  QStringList args;
  if (bytes.isEmpty()) return args;
  for (const QByteArray& a : bytes.split('\0')) args << QFile::decodeName(a);
  return args;
}

bool isRunProcess(qint64 pid, const QString& runDir, const QString& engine) {
  const QStringList args = processArguments(pid);
  const QString engineName =
      engine.isEmpty() ? QStringLiteral("studio-train") : QFileInfo(engine).fileName();
  if (args.isEmpty() || QFileInfo(args.front()).fileName() != engineName) return false;
  // The folder as given and as the kernel names it (/proc's cwd has symbolic links resolved).
  const QString dir = runDirPath(runDir);
  const QString real = QFileInfo(dir).canonicalFilePath();
  auto named = [&](const QString& path) {
    return isInside(path, dir) || (!real.isEmpty() && isInside(path, real));
  };
  const QString cwd = QFileInfo(procPath(pid, "cwd")).symLinkTarget();
  if (!cwd.isEmpty() && named(cwd)) return true;
  for (qsizetype i = 1; i < args.size(); ++i) {
    const QString& arg = args[i];
    if (named(QDir::isAbsolutePath(arg) || cwd.isEmpty() ? arg : QDir(cwd).absoluteFilePath(arg)))
      return true;
  }
  return false;
}

bool isSweepProcess(qint64 pid, const QString& sweepDir, const QString& engine) {
  const QStringList args = processArguments(pid);
  const QString engineName =
      engine.isEmpty() ? QStringLiteral("studio-train") : QFileInfo(engine).fileName();
  return args.size() >= 2 && QFileInfo(args.front()).fileName() == engineName &&
         args.at(1) == QLatin1String("sweep") && holdsSweepLock(pid, sweepDir);
}

bool holdsSweepLock(qint64 pid, const QString& sweepDir) {
  if (pid <= 0) return false;
  const QString lock =
      QFileInfo(runFile(sweepDir, studio::kSweepLockFileName)).canonicalFilePath();
  if (lock.isEmpty()) return false;
  const QDir fds(procPath(pid, "fd"));
  for (const QString& fd : fds.entryList(QDir::Files | QDir::System | QDir::NoDotAndDotDot))
    if (QFileInfo(fds.filePath(fd)).symLinkTarget() == lock) return true;
  return false;
}

QString localHostName() {
  return QSysInfo::machineHostName();
}

}  // namespace studio::ui
