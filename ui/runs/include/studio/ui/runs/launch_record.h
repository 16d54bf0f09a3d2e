#pragma once
// RUN_DIR/studio-launch.json: how the studio started a run on this machine. The run is detached
// from the studio, so this file is what a later studio session (or a crash-restarted one) knows
// of it: which process to stop, which engine and config it runs, where it logs.
#include <QDateTime>
#include <QString>
#include <QStringList>

namespace studio::ui {

struct LaunchRecord {
  QStringList command;  // the command line as started, program first
  QString cwd;          // its working directory
  QString engine;       // the studio-train it runs
  QString config;       // the config.yaml it was given
  QDateTime started;    // when the studio started it
  qint64 pid = 0;       // the engine's pid (its session and process group id too)
  int nproc = 1;        // processes per node asked for
  QString host;         // the machine it runs on

  // Writes RUN_DIR/studio-launch.json atomically. Returns "" or an error naming the file.
  QString write(const QString& runDir) const;
  // Returns false with an error naming the file and the problem when it is missing or malformed.
  static bool read(const QString& runDir, LaunchRecord& out, QString* error = nullptr);
};

}  // namespace studio::ui
