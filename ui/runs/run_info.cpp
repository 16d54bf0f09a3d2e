#include "studio/ui/runs/run_info.h"

#include "studio/config/sweep.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <QDir>
#include <QFileInfo>
#include <QHash>

#include "studio/ui/base/local_path.h"
#include "studio/config/config_io.h"
#include "studio/runs/events.h"
#include "studio/base/whole_number.h"
#include "studio/ui/runs/launch_record.h"
#include "studio/ui/runs/process_probe.h"
#include "studio/ui/runs/remote_mirror.h"
#include "studio/ui/runs/run_event_digest.h"
#include "studio/ui/runs/run_folder.h"

namespace studio::ui {
namespace {

QDateTime fromUnixTime(double seconds) {
  if (!std::isfinite(seconds)) return {};
  return QDateTime::fromMSecsSinceEpoch(static_cast<qint64>(std::llround(seconds * 1000)));
}

QString fromView(std::string_view text) {
  return QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size()));
}

RunState fromStatusState(studio::RunState s) {
  switch (s) {
    case studio::RunState::Running:
      return RunState::Running;
    case studio::RunState::Finished:
      return RunState::Finished;
    case studio::RunState::Failed:
      return RunState::Failed;
    case studio::RunState::Stopped:
      return RunState::Stopped;
  }
  return RunState::Unknown;
}

// Stage, SP layout and step budget: from the engine's last start event, else (before the engine
// got that far) from the config the run was launched with.
void readLayout(RunInfo& info, const RunEventDigest& digest, const LaunchRecord* launch) {
  if (const auto& start = digest.lastStart()) {
    info.stage = QString::fromStdString(start->stage);
    info.spSize = start->sequence_parallel_size;
    info.spMode = QString::fromStdString(start->sequence_parallel_mode);
    info.worldSize = start->world_size;
    const auto maxSteps = start->config.find("max_steps");
    int64_t steps = 0;
    if (maxSteps != start->config.end() && json_whole(*maxSteps, steps).empty())
      info.maxSteps = std::max<qint64>(0, steps);
    return;
  }
  if (launch) info.worldSize = launch->nproc;
  if (info.configPath.isEmpty()) return;
  const studio::LoadResult loaded = studio::load_config_file(localPath(info.configPath));
  if (!loaded.ok()) return;
  const studio::RunConfig& cfg = loaded.config;
  info.stage = fromView(to_string(cfg.stage));
  info.spSize = static_cast<int>(cfg.sequence_parallel_size);
  info.spMode = fromView(to_string(cfg.sequence_parallel_mode));
  info.maxSteps = std::max<qint64>(0, cfg.max_steps);
}

// When the run last wrote one of its files (`eventsFile`: the one its events are read from, e.g.
// a checkpoint's trainer_state.json).
QDateTime lastModified(const QDir& dir, const QString& eventsFile = {}) {
  QDateTime latest;
  QStringList files;
  for (const char* name : {studio::kStatusFileName, studio::kEventsFileName,
                           studio::kTrainerLogFileName, kLlamaFactoryLogFileName})
    files << runFile(dir.path(), name);
  if (!eventsFile.isEmpty()) files << eventsFile;
  for (const QString& file : files) {
    const QFileInfo f(file);
    if (f.exists() && (!latest.isValid() || f.lastModified() > latest)) latest = f.lastModified();
  }
  return latest;
}

// A LLaMA-Factory run (trainer_log.jsonl, no status.json), or any Hugging Face Trainer run read
// from its trainer_state.json: neither records an end, so the state is read from what the
// Trainer leaves at the end, the step count, and how recently the run wrote its files.
void decideLlamaFactoryState(RunInfo& info, const QDir& dir, const QString& eventsFile) {
  const bool hf = studio::line_format_of(eventsFile.toStdString()) ==
                  studio::LineFormat::TrainerState;
  const QString log = hf ? QStringLiteral("Hugging Face Trainer run (%1)")
                               .arg(QDir(dir).relativeFilePath(eventsFile))
                         : QStringLiteral("LLaMA-Factory run");
  for (const char* done : {kTrainResultsFileName, kAllResultsFileName}) {
    if (!QFileInfo::exists(runFile(dir.path(), done))) continue;
    info.state = RunState::Finished;
    info.reason = QStringLiteral("%1: training completed at step %2 (%3 written)")
                      .arg(log)
                      .arg(info.lastStep)
                      .arg(QLatin1String(done));
    return;
  }
  if (info.maxSteps > 0 && info.lastStep >= info.maxSteps) {
    info.state = RunState::Finished;
    info.reason = QStringLiteral("%1: reached step %2 of %3").arg(log).arg(info.lastStep).arg(info.maxSteps);
    return;
  }
  const QDateTime written = lastModified(dir, eventsFile);
  const qint64 age = written.isValid() ? written.secsTo(QDateTime::currentDateTime()) : -1;
  if (age >= 0 && age <= kRunFolderLiveSeconds) {
    info.state = RunState::Running;
    info.reason = QStringLiteral("%1 at step %2 of %3, last written %4 s ago")
                      .arg(log)
                      .arg(info.lastStep)
                      .arg(info.maxSteps > 0 ? QString::number(info.maxSteps) : QStringLiteral("?"))
                      .arg(age);
    return;
  }
  info.state = RunState::Unknown;
  info.reason = QStringLiteral("%1 at step %2 of %3: nothing written for %4 min, and %6 "
                               "records no end (stopped, failed or stalled; its log: %5)")
                    .arg(log)
                    .arg(info.lastStep)
                    .arg(info.maxSteps > 0 ? QString::number(info.maxSteps) : QStringLiteral("?"))
                    .arg(age / 60)
                    .arg(info.logPath.isEmpty() ? QStringLiteral("none") : info.logPath)
                    .arg(hf ? QStringLiteral("the Trainer") : QStringLiteral("LLaMA-Factory"));
}

void decideState(RunInfo& info, const QDir& dir, const RunEventDigest& digest,
                 const studio::RunStatus* status, const QString& statusError,
                 const LaunchRecord* launch) {
  if (status) {
    info.state = fromStatusState(status->state);
    info.reason = QString::fromStdString(status->reason);
    if (info.state == RunState::Running && info.local && info.pid > 0 && !processAlive(info.pid)) {
      info.state = RunState::Lost;
      info.reason = QStringLiteral(
                        "status.json says running, but process %1 is gone on %2: the run was "
                        "killed before it could record how it ended")
                        .arg(info.pid)
                        .arg(info.host);
    }
  } else if (const auto& end = digest.end()) {
    studio::RunState s;
    info.state = studio::parse_run_state(end->state, s) ? fromStatusState(s) : RunState::Unknown;
    info.reason = QString::fromStdString(end->reason);
  } else if (!statusError.isEmpty()) {
    info.reason = statusError;
  } else if (launch) {
    if (processAlive(launch->pid)) {
      info.state = RunState::Starting;
    } else {
      info.state = RunState::Failed;
      const QString last = lastLogLine(info.logPath);
      info.reason = QStringLiteral("studio-train (pid %1) exited before it started the run")
                        .arg(launch->pid) +
                    (last.isEmpty() ? QString() : QStringLiteral(": ") + last) +
                    QStringLiteral("; see %1").arg(info.logPath);
    }
  } else if (!digest.error().empty()) {
    info.reason = QString::fromStdString(digest.error());
  } else if (digest.exists() && studio::line_format_of(digest.path()) !=
                                      studio::LineFormat::Events) {
    decideLlamaFactoryState(info, dir, QString::fromStdString(digest.path()));
  } else if (digest.exists()) {
    info.reason =
        QStringLiteral("no status.json in %1, and events.jsonl has no end event").arg(dir.path());
  } else if (!dir.exists()) {
    info.reason = QStringLiteral("%1 no longer exists: deleted or moved (Forget removes it from "
                                 "the list)")
                      .arg(dir.path());
  } else if (!info.sweepDir.isEmpty() && QFileInfo::exists(runFile(info.dir, studio::kRunConfigFileName))) {
    // A sweep writes every point's folder first and starts them in order, K at a time.
    info.state = RunState::Queued;
    info.configPath = runFile(info.dir, studio::kRunConfigFileName);
    info.reason = QStringLiteral("not started yet: the sweep starts it when a slot is free (a "
                                 "sweep that was stopped continues with studio-train sweep "
                                 "--resume %1)")
                      .arg(info.sweepDir);
  } else {
    info.reason = QStringLiteral("neither status.json nor events.jsonl is in %1").arg(dir.path());
  }
  info.stateText = runStateText(info.state);
}

RunState fromRemoteState(studio::remote::RemoteRunState s) {
  using studio::remote::RemoteRunState;
  switch (s) {
    case RemoteRunState::Queued:
    case RemoteRunState::Starting:
      return RunState::Starting;
    case RemoteRunState::Running:
      return RunState::Running;
    case RemoteRunState::Finished:
      return RunState::Finished;
    case RemoteRunState::Failed:
      return RunState::Failed;
    case RemoteRunState::Stopped:
      return RunState::Stopped;
    case RemoteRunState::Lost:
      return RunState::Lost;
  }
  return RunState::Unknown;
}

// A remote run's state: the mirrored status.json (or the end event), corrected by what the
// follower last learned on the host (the process gone, the job still queued), and the
// connection trouble while the run may still be going.
void decideRemoteState(RunInfo& info, const RunEventDigest& digest, const studio::RunStatus* status,
                       const QString& statusError, const std::optional<RemoteFollowState>& follow,
                       const QString& jobId) {
  using studio::remote::RemoteRunState;
  std::optional<RemoteRunState> remote;
  if (follow) remote = follow->remoteState;
  if (status) {
    info.state = fromStatusState(status->state);
    info.reason = QString::fromStdString(status->reason);
    if (info.state == RunState::Running && remote && studio::remote::is_terminal(*remote)) {
      // The engine could not record its end (killed, node lost, job cancelled).
      info.state = fromRemoteState(*remote);
      info.reason = follow->remoteReason.isEmpty()
                        ? QStringLiteral("status.json says running, but the run is gone on %1")
                              .arg(info.remoteTarget)
                        : follow->remoteReason;
    }
  } else if (const auto& end = digest.end()) {
    studio::RunState s;
    info.state = studio::parse_run_state(end->state, s) ? fromStatusState(s) : RunState::Unknown;
    info.reason = QString::fromStdString(end->reason);
  } else if (!statusError.isEmpty()) {
    info.reason = statusError;
  } else {
    // Submitted, the engine has not written status.json yet (or the job waits in the queue).
    info.state = remote ? fromRemoteState(*remote) : RunState::Starting;
    if (remote && *remote == RemoteRunState::Queued)
      info.reason = QStringLiteral("queued (Slurm job %1)").arg(jobId);
    else if (remote && studio::remote::is_terminal(*remote))
      info.reason = follow->remoteReason;
  }
  if (follow && isActive(info.state)) {
    if (follow->connection == RemoteFollowState::Connection::Retrying) {
      const qint64 ms =
          std::max<qint64>(0, QDateTime::currentDateTime().msecsTo(follow->nextRetry));
      info.reason = QStringLiteral("connection lost: %1; retrying in %2s (attempt %3)")
                        .arg(follow->error)
                        .arg((ms + 999) / 1000)
                        .arg(follow->attempt);
    } else if (follow->connection == RemoteFollowState::Connection::Failed) {
      info.reason = QStringLiteral("not followed: %1").arg(follow->error);
    }
  }
  info.stateText = runStateText(info.state);
}

// A sweep folder's name from its sweep.json, read again only when the file changed: a scan
// reads every point of a sweep, and they all share the one file.
QString sweepName(const QString& sweepDir) {
  struct Known {
    QDateTime modified;
    qint64 size = -1;
    QString name;
  };
  thread_local QHash<QString, Known> known;
  const QFileInfo file(runFile(sweepDir, studio::kSweepFileName));
  Known& k = known[sweepDir];
  if (k.size == file.size() && k.modified == file.lastModified() && !k.name.isEmpty()) return k.name;
  k.modified = file.lastModified();
  k.size = file.size();
  try {
    k.name = QString::fromStdString(studio::read_sweep(localPath(sweepDir)).name);
  } catch (const std::exception&) {
    k.name = QFileInfo(sweepDir).fileName();
  }
  return k.name;
}

// For a mirror folder: host, target and record times; "" or why the record is unreadable.
QString readRemoteRecord(RunInfo& info, QString& jobId, QDateTime& submitted) {
  try {
    const studio::remote::RemoteRunRecord record = RemoteMirror(info.dir).readRecord();
    info.remoteTarget = QString::fromStdString(record.host.target);
    jobId = QString::fromStdString(record.job_id);
    if (!record.sweep_id.empty()) {
      info.sweepDir = QStringLiteral("%1:%2/%3").arg(info.remoteTarget,
                                                     QString::fromStdString(record.remote_root),
                                                     QString::fromStdString(record.sweep_id));
      info.sweep = QString::fromStdString(record.sweep_name.empty() ? record.sweep_id : record.sweep_name);
      info.sweepPoint = QString::fromStdString(record.sweep_point);
      for (const std::string& key : record.sweep_keys) info.sweepKeys << QString::fromStdString(key);
    }
    if (record.submitted > 0) submitted = fromUnixTime(record.submitted);
    return {};
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what());
  }
}

}  // namespace

QString runStateText(RunState state) {
  switch (state) {
    case RunState::Unknown:
      return QStringLiteral("Unknown");
    case RunState::Starting:
      return QStringLiteral("Starting");
    case RunState::Running:
      return QStringLiteral("Running");
    case RunState::Finished:
      return QStringLiteral("Finished");
    case RunState::Failed:
      return QStringLiteral("Failed");
    case RunState::Stopped:
      return QStringLiteral("Stopped");
    case RunState::Lost:
      return QStringLiteral("Lost");
    case RunState::Queued:
      return QStringLiteral("Queued");
  }
  return QStringLiteral("Unknown");
}

bool isActive(RunState state) {
  return state == RunState::Starting || state == RunState::Running || state == RunState::Queued;
}

SweepQueueProcess sweepQueueProcess(const QString& sweepDir, const QString& engine) {
  SweepQueueProcess q;
  studio::RunStatus status;
  std::string error;
  if (!studio::RunStatus::read(localPath(runFile(sweepDir, studio::kSweepStatusFileName)), status,
                               error)) {
    q.why = QString::fromStdString(error);
  } else if (status.state != studio::RunState::Running) {
    q.why = QStringLiteral("its queue ended (%1)")
                .arg(QString::fromStdString(studio::run_state_name(status.state)));
  } else if (const QString host = QString::fromStdString(status.host); host != localHostName()) {
    q.otherHost = host;
    q.why = QStringLiteral("its queue runs on %1, not on this machine (%2)").arg(host, localHostName());
  } else if (!processAlive(status.pid)) {
    q.why = QStringLiteral("its queue process %1 is gone").arg(status.pid);
  } else if (engine.isEmpty() ? !holdsSweepLock(status.pid, sweepDir)
                              : !isSweepProcess(status.pid, sweepDir, engine)) {
    // Killed without a record, its pid taken since; or run by another user, whose /proc/PID/fd
    // this one cannot read (and could not signal either).
    q.why = QStringLiteral("process %1, which sweep-status.json names, is not its queue (it "
                           "runs '%2'; a queue of another user cannot be checked or signalled "
                           "from here)")
                .arg(status.pid)
                .arg(processArguments(status.pid).join(QLatin1Char(' ')));
  } else {
    q.pid = status.pid;
  }
  return q;
}

bool sweepQueueRunsHere(const QString& sweepDir) {
  return sweepQueueProcess(sweepDir).pid > 0;
}

bool RunInfo::operator==(const RunInfo& o) const {
  const bool sameLoss = lastLoss == o.lastLoss || (std::isnan(lastLoss) && std::isnan(o.lastLoss));
  return dir == o.dir && name == o.name && state == o.state && stateText == o.stateText &&
         reason == o.reason && pid == o.pid && host == o.host && stage == o.stage &&
         spSize == o.spSize && spMode == o.spMode && worldSize == o.worldSize &&
         lastStep == o.lastStep && maxSteps == o.maxSteps && sameLoss && started == o.started &&
         updated == o.updated && configPath == o.configPath && logPath == o.logPath &&
         local == o.local && remote == o.remote && remoteTarget == o.remoteTarget &&
         sweep == o.sweep && sweepDir == o.sweepDir && sweepPoint == o.sweepPoint &&
         sweepKeys == o.sweepKeys && sweepQueueAlive == o.sweepQueueAlive &&
         readProblems == o.readProblems;
}

RunInfo readRunInfo(const QString& dir) {
  RunEventDigest digest(studio::run_events_file(localPath(runDirPath(dir))));
  return readRunInfo(dir, digest);
}

RunInfo readRunInfo(const QString& path, RunEventDigest& digest) {
  RunInfo info;
  info.dir = runDirPath(path);
  info.name = QFileInfo(info.dir).fileName();
  const QDir dir(info.dir);
  digest.update();
  // A sweep's point: its parent folder holds sweep.json.
  if (const QString parent = QFileInfo(info.dir).path();
      QFileInfo::exists(runFile(parent, studio::kSweepFileName))) {
    info.sweepDir = parent;
    info.sweep = sweepName(parent);
  }

  LaunchRecord launchRecord;
  QString launchError;
  const bool launched = QFileInfo::exists(runFile(info.dir, kLaunchRecordFileName)) &&
                        LaunchRecord::read(info.dir, launchRecord, &launchError);
  const LaunchRecord* launch = launched ? &launchRecord : nullptr;

  const QString statusFile = runFile(info.dir, studio::kStatusFileName);
  studio::RunStatus statusRecord;
  std::string statusError;
  std::vector<studio::FieldIssue> statusIssues;
  const bool haveStatus =
      QFileInfo::exists(statusFile) &&
      studio::RunStatus::read(localPath(statusFile), statusRecord, statusError, &statusIssues);
  const studio::RunStatus* status = haveStatus ? &statusRecord : nullptr;
  QStringList problems;
  if (!statusIssues.empty()) {
    QStringList fields;
    for (const auto& issue : statusIssues) fields << QString::fromStdString(issue.describe());
    problems << QStringLiteral("%1: %2").arg(QLatin1String(studio::kStatusFileName),
                                             fields.join(QStringLiteral("; ")));
  }
  // A launch record that cannot be read is not used (its pid is never signalled): say why.
  if (!launchError.isEmpty())
    problems << QStringLiteral("%1 was skipped, so the studio neither stops this run nor reads "
                               "its pid from it: %2")
                    .arg(QLatin1String(kLaunchRecordFileName), launchError);
  if (const auto& p = digest.problems(); p.any())
    problems << QString::fromStdString(
        p.summary(QFileInfo(QString::fromStdString(digest.path())).fileName().toStdString()));
  info.readProblems = problems.join(QLatin1Char('\n'));

  info.remote = isRemoteRunFolder(info.dir);
  QString remoteError, jobId;
  QDateTime submitted;
  std::optional<RemoteFollowState> follow;
  if (info.remote) {
    remoteError = readRemoteRecord(info, jobId, submitted);
    try {
      follow = RemoteMirror(info.dir).readFollowState();
    } catch (const std::exception& e) {
      if (remoteError.isEmpty()) remoteError = QString::fromStdString(e.what());
    }
  }

  info.pid = status ? status->pid : launch ? launch->pid : 0;
  info.host = info.remote ? info.remoteTarget
              : status    ? QString::fromStdString(status->host)
              : launch    ? launch->host
                          : QString();
  // A remote run's pid is one on its host, which may even share this machine's name.
  info.local = !info.remote && !info.host.isEmpty() && info.host == localHostName();
  const QString config = runFile(info.dir, kRunConfigFileName);
  info.configPath = launch && !launch->config.isEmpty() ? launch->config
                    : QFileInfo::exists(config)         ? config
                                                        : QString();
  const QString log = runFile(info.dir, kTrainLogFileName);
  const QString lfLog = runFile(info.dir, kLlamaFactoryLogFileName);
  if (launch || info.remote || QFileInfo::exists(log)) info.logPath = log;
  else if (QFileInfo::exists(lfLog)) info.logPath = lfLog;
  readLayout(info, digest, launch);
  if (info.maxSteps == 0 && digest.totalSteps() > 0) info.maxSteps = digest.totalSteps();

  info.lastStep = digest.lastStep();
  if (status && status->step && *status->step > info.lastStep) info.lastStep = *status->step;
  info.lastLoss = digest.lastLoss();
  // The user's click on Launch is when a launched run started; loading the model comes later.
  info.started = launch && launch->started.isValid() ? launch->started
                 : submitted.isValid()               ? submitted
                                                     : fromUnixTime(digest.firstStartTime());
  info.updated = fromUnixTime(status ? std::fmax(status->updated, digest.lastEventTime())
                                     : digest.lastEventTime());
  if (!info.updated.isValid())
    info.updated = lastModified(dir, digest.exists() ? QString::fromStdString(digest.path()) : QString());
  if (!info.updated.isValid()) info.updated = info.started;

  if (!info.remote) {
    decideState(info, dir, digest, status, QString::fromStdString(statusError), launch);
  } else if (!remoteError.isEmpty()) {
    info.state = RunState::Unknown;
    info.stateText = runStateText(info.state);
    info.reason = remoteError;
  } else {
    decideRemoteState(info, digest, status, QString::fromStdString(statusError), follow, jobId);
  }
  return info;
}

}  // namespace studio::ui
