#pragma once
// What the studio knows of one run folder, read from the files the run leaves there:
// status.json and events.jsonl (written by the engine, docs/events.md) and studio-launch.json
// (written by LocalLauncher), or, for a run on an SSH host, its local mirror (remote_mirror.h:
// the mirrored engine files plus studio-remote.json and remote-follow.json). Run state lives on disk, never only in the studio, so any studio
// session sees the same runs, including ones it did not start.
#include <limits>

#include <QDateTime>
#include <QMetaType>
#include <QString>
#include <QStringList>
#include <QVector>

namespace studio::ui {

class RunEventDigest;

enum class RunState {
  Unknown,   // the files do not say (missing, unreadable or garbage): see RunInfo::reason
  Starting,  // launched by the studio, the engine has not written status.json yet
  Running,
  Finished,
  Failed,
  Stopped,
  Lost,  // status.json says running but its pid is gone on this host: killed without a record
  Queued,  // a sweep's point that has not started: its folder holds only its config.yaml
};

// "Running", "Lost", ...: the word the studio shows.
QString runStateText(RunState state);
// Queued, Starting and Running: a run that may still change on disk.
bool isActive(RunState state);
// The process running the queue of the sweep in `sweepDir`, as sweep-status.json names it,
// checked: `pid` is set when the file says running on this host and that process is alive and
// holds the sweep's lock (with `engine` given, also runs `ENGINE sweep`: isSweepProcess).
// Otherwise pid is 0 and `why` says what failed; `otherHost` is the host of a queue that the
// file says runs elsewhere.
struct SweepQueueProcess {
  qint64 pid = 0;
  QString otherHost;
  QString why;
};
SweepQueueProcess sweepQueueProcess(const QString& sweepDir, const QString& engine = {});
// Whether the queue of the local sweep in `sweepDir` runs on this machine now (its pid above).
bool sweepQueueRunsHere(const QString& sweepDir);

struct RunInfo {
  QString dir;   // absolute path of the run folder
  QString name;  // its folder name
  RunState state = RunState::Unknown;
  QString stateText;  // runStateText(state)
  QString reason;     // why it ended, or why the state is Unknown or Lost
  qint64 pid = 0;     // the engine's pid (rank 0 or its launcher); 0 when unknown
  QString host;       // the machine it runs on
  QString stage;      // "sft" or "dpo"
  int spSize = 0;     // sequence_parallel_size; 0 when unknown
  QString spMode;     // "zigzag-ring", "ulysses" or "usp"
  int worldSize = 0;  // processes; 0 when unknown
  qint64 lastStep = 0;
  qint64 maxSteps = 0;  // 0 when the config gives no max_steps (an epoch count instead)
  double lastLoss = std::numeric_limits<double>::quiet_NaN();
  QDateTime started;   // first start of the run (or the launch, before the engine started)
  QDateTime updated;   // last time the run reported anything
  QString configPath;  // the config it runs: the launch's config.yaml; "" when unknown
  QString logPath;     // train.log when the studio launched it or one is there; else ""
  bool local = false;  // runs (or ran) on this machine, so its pid can be checked and signalled
  bool remote = false;   // a mirror of a run on an SSH host (host is then the SSH target)
  QString remoteTarget;  // that SSH target, "[user@]host[:port]" or an alias; "" when local
  // A point of a sweep (studio-train sweep, docs/SWEEPS.md): the sweep's name and folder (the
  // run folder's parent, holding sweep.json); "" for a run of its own. A point of a sweep
  // submitted as a Slurm job array (a remote mirror): its sweep's name, "HOST:REMOTE_ROOT/
  // SWEEP_ID" in sweepDir (the key its points share), its point's name in sweepPoint and the
  // swept keys in sweepKeys.
  QString sweep;
  QString sweepDir;
  QString sweepPoint;
  QStringList sweepKeys;
  // A point that does not run itself while its sweep's queue runs on this machine
  // (sweepQueueRunsHere; set by the runs list's scan, once per sweep): the sweep can be stopped
  // even while none of its points runs, e.g. between two points or while the queue verifies a
  // resumed point's checkpoint.
  bool sweepQueueAlive = false;
  // What reading its files skipped or repaired (status.json fields of an unexpected type,
  // events.jsonl lines or fields): one sentence per file; "" when all read as written.
  QString readProblems;

  bool operator==(const RunInfo& other) const;
  bool operator!=(const RunInfo& other) const { return !(*this == other); }
};

// Reads a run folder. Never fails: missing or garbage files give state Unknown with a reason.
// Cheap for huge events files (reads their head and tail only).
RunInfo readRunInfo(const QString& dir);
// The same with a digest kept between calls, so that reading a run again only reads the bytes
// appended to events.jsonl since (RunStore keeps one per run).
RunInfo readRunInfo(const QString& dir, RunEventDigest& digest);

}  // namespace studio::ui

Q_DECLARE_METATYPE(studio::ui::RunInfo)
