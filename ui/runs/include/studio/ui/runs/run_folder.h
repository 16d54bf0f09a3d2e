#pragma once
// A run folder as the studio sees it, with Qt paths. Which files it holds, and their names, are
// runs/run_folder.h's.
#include <QString>

#include "studio/runs/run_folder.h"  // the files' names

namespace studio::ui {

// The absolute, clean path by which a run folder is known (its key in RunStore and RunsModel).
QString runDirPath(const QString& dir);

// studio::is_run_folder and studio::has_trainer_state (runs/run_folder.h) on a Qt path.
bool isRunFolder(const QString& dir);
bool hasTrainerState(const QString& dir);

// What `studio-train sweep` prints when the studio starts it (LocalLauncher::launchSweep): in
// the sweep's folder, beside sweep.json.
inline constexpr const char* kSweepLogFileName = "sweep.log";

// RUN_DIR/<name>.
QString runFile(const QString& dir, const char* name);

// The last non-blank line of a log (at most 300 characters), for messages that tell the user
// why a run ended; "" when there is none.
QString lastLogLine(const QString& logPath);

}  // namespace studio::ui
