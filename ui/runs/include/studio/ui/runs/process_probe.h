#pragma once
// What /proc says about a process of this machine. Runs are started detached, so the studio never
// holds a handle on them: whether a run is alive, and whether a recorded pid still belongs to it,
// can only be asked of the kernel by pid.
#include <QString>
#include <QStringList>

namespace studio::ui {

// True while `pid` exists and is not a zombie. A detached run is reparented away from the
// studio, and a container's init may never reap it: a zombie has stopped running all the same.
bool processAlive(qint64 pid);

// The process's arguments (argv[0] first); empty when it is gone or not readable.
QStringList processArguments(qint64 pid);

// Whether `pid` is still the engine process of the run in `runDir`, so that a pid reused by an
// unrelated process after the run ended is never signalled: its program must have the engine's
// file name (`engine` is a path or a name; empty means "studio-train"), and it must name the run:
// an argument inside runDir (the launcher passes runDir/config.yaml) or its working directory.
bool isRunProcess(qint64 pid, const QString& runDir, const QString& engine);

// Whether `pid` is the process that runs the queue of the sweep in `sweepDir`: its program has
// the engine's file name, its first argument is `sweep`, and it holds the sweep's lock file open
// (kSweepLockFileName, which `studio-train sweep` keeps open and locked while it runs). A pid
// reused by any other process, another sweep's included, is never taken for it.
bool isSweepProcess(qint64 pid, const QString& sweepDir, const QString& engine);
// Only the lock half of that: `pid` holds the sweep's lock file open. Enough to show that the
// sweep's queue runs (only it holds that file), whatever the engine's program is named; a signal
// takes isSweepProcess.
bool holdsSweepLock(qint64 pid, const QString& sweepDir);

// This machine's host name, as the engine writes it into status.json.
QString localHostName();

}  // namespace studio::ui
