#include "stop_worker.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

#include <QFile>
#include <QFileInfo>
#include <QTimer>
#include <QtGlobal>

#include <signal.h>
#include <unistd.h>

#include "studio/ui/base/local_path.h"
#include "studio/config/config_io.h"
#include "studio/config/sweep.h"
#include "studio/runs/events.h"
#include "studio/ui/runs/launch_record.h"
#include "studio/ui/runs/process_probe.h"
#include "studio/ui/runs/run_info.h"
#include "studio/ui/runs/run_folder.h"

namespace studio::ui {
namespace {

// The engine that may be signalled for a run, and its pid: the launch record when the studio
// started it, else what the engine itself recorded in status.json when it runs on this host.
bool findEngine(const QString& runDir, const QString& fallbackEngine, qint64& pid, QString& engine,
                QString& config, QString& error) {
  LaunchRecord launch;
  QString launchError;
  if (LaunchRecord::read(runDir, launch, &launchError)) {
    pid = launch.pid;
    engine = launch.engine.isEmpty() ? fallbackEngine : launch.engine;
    config = launch.config;
    return true;
  }
  studio::RunStatus status;
  std::string statusError;
  if (!studio::RunStatus::read(localPath(runFile(runDir, studio::kStatusFileName)), status,
                               statusError)) {
    error = QStringLiteral("cannot tell which process runs %1: %2; %3")
                .arg(runDir, launchError, QString::fromStdString(statusError));
    return false;
  }
  if (QString::fromStdString(status.host) != localHostName()) {
    error =
        QStringLiteral("%1 runs on %2, not on this machine (%3): it cannot be stopped from here")
            .arg(runDir, QString::fromStdString(status.host), localHostName());
    return false;
  }
  pid = status.pid;
  engine = fallbackEngine;
  // A run started without the studio (a sweep's point, a terminal): its folder's config.yaml
  // says whether it saves on stop.
  if (const QString file = runFile(runDir, studio::kRunConfigFileName); QFileInfo::exists(file))
    config = file;
  return true;
}

// The grace after SIGTERM for the run of `config` (the launch's config.yaml, read here off the
// GUI thread): `base`, and with save_on_stop the time its last checkpoint may take.
double stopGraceSeconds(const QString& config, int base) {
  if (config.isEmpty()) return base;
  const studio::LoadResult loaded = studio::load_config_file(localPath(config));
  if (!loaded.ok()) return base;
  return studio::stop_grace_seconds(loaded.config, base);
}

// Appends a newline when the file ends inside a line (the killed engine may have been writing
// one), so that the next line appended is whole.
void endPartialLine(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadWrite) || file.size() == 0) return;
  file.seek(file.size() - 1);
  if (file.read(1) != "\n") {
    file.seek(file.size());
    file.write("\n");
  }
}

}  // namespace

StopWorker::StopWorker() : timer_(new QTimer(this)) {
  timer_->setInterval(kPollMs);
  connect(timer_, &QTimer::timeout, this, &StopWorker::poll);
  clock_.start();
}

void StopWorker::track(Job job) {
  jobs_.push_back(std::move(job));
  if (!timer_->isActive()) timer_->start();
}

void StopWorker::watchLaunch(const QString& runDir, qint64 pid) {
  Job job;
  job.dir = runDir;
  job.pid = pid;
  job.phase = Phase::Launching;
  track(std::move(job));
}

void StopWorker::watchSweepLaunch(const QString& sweepDir, qint64 pid) {
  Job job;
  job.dir = sweepDir;
  job.pid = pid;
  job.phase = Phase::Launching;
  job.sweep = true;
  track(std::move(job));
}

void StopWorker::stop(const QString& runDir, const QString& engine, int graceSeconds) {
  stopRun(runDir, engine, graceSeconds, false);
}

int StopWorker::stopRun(const QString& runDir, const QString& engine, int graceSeconds,
                        bool quiet) {
  // Asking again while a stop is under way must not push its SIGKILL further out.
  for (const Job& j : jobs_)
    if (j.dir == runDir && j.phase != Phase::Launching) {
      emit stopRequested(runDir);
      return j.graceSeconds;
    }
  qint64 pid = 0;
  QString engineProgram, config, error;
  if (!findEngine(runDir, engine, pid, engineProgram, config, error)) {
    if (!quiet) emit stopFailed(runDir, error);
    return -1;
  }
  if (!processAlive(pid)) {
    if (!quiet)
      emit stopFailed(runDir,
                      QStringLiteral("%1 is not running: its process %2 is gone").arg(runDir).arg(pid));
    return -1;
  }
  if (!isRunProcess(pid, runDir, engineProgram)) {
    // A sweep's point that ended long ago may have left its pid to anything.
    if (quiet) return -1;
    emit stopFailed(runDir,
                    QStringLiteral("process %1 is no longer the engine of %2 (it runs '%3'), so "
                                   "it was not signalled")
                        .arg(pid)
                        .arg(runDir, processArguments(pid).join(QLatin1Char(' '))));
    return -1;
  }
  if (::kill(static_cast<pid_t>(pid), SIGTERM) != 0) {
    emit stopFailed(runDir, QStringLiteral("cannot signal process %1 of %2: %3")
                                .arg(pid)
                                .arg(runDir, QString::fromLocal8Bit(std::strerror(errno))));
    return -1;
  }
  emit stopRequested(runDir);
  // A run stopped while starting is no launch failure when it exits.
  jobs_.erase(
      std::remove_if(jobs_.begin(), jobs_.end(), [&](const Job& j) { return j.dir == runDir; }),
      jobs_.end());
  Job job;
  job.dir = runDir;
  job.pid = pid;
  job.engine = engineProgram;
  job.phase = Phase::Terminating;
  // save_on_stop: the engine writes a last checkpoint before it exits; leave it that time.
  job.graceSeconds = std::max(0, static_cast<int>(stopGraceSeconds(config, graceSeconds)));
  job.deadlineMs = clock_.elapsed() + qint64{job.graceSeconds} * 1000;
  const int grace = job.graceSeconds;
  track(std::move(job));
  return grace;
}

void StopWorker::stopSweep(const QString& sweepDir, const QStringList& points,
                           const QString& engine, int graceSeconds) {
  for (const Job& j : jobs_)
    if (j.dir == sweepDir && j.phase != Phase::Launching) {
      emit stopRequested(sweepDir);
      return;
    }
  // The queue first: once it has the signal no point starts, so the points stopped below are
  // the last. Its process relays the SIGTERM to its running points too (studio-train sweep).
  // Signalled only when it is `studio-train sweep` (or the launcher's engine) holding the lock.
  const SweepQueueProcess queue =
      sweepQueueProcess(sweepDir, engine.isEmpty() ? QStringLiteral("studio-train") : engine);
  if (!queue.otherHost.isEmpty()) {
    emit stopFailed(sweepDir, QStringLiteral("the queue of %1 runs on %2, not on this machine (%3): "
                                             "it cannot be stopped from here")
                                  .arg(sweepDir, queue.otherHost, localHostName()));
    return;
  }
  const qint64 queuePid = queue.pid;
  const QString& queueGone = queue.why;  // why no queue process is signalled
  if (queuePid > 0 && ::kill(static_cast<pid_t>(queuePid), SIGTERM) != 0) {
    emit stopFailed(sweepDir, QStringLiteral("cannot signal process %1, the queue of %2: %3")
                                  .arg(queuePid)
                                  .arg(sweepDir, QString::fromLocal8Bit(std::strerror(errno))));
    return;
  }
  int longestGrace = -1;
  for (const QString& point : points)
    longestGrace = std::max(longestGrace, stopRun(runDirPath(point), engine, graceSeconds, true));
  if (queuePid == 0 && longestGrace < 0) {
    emit stopFailed(sweepDir, QStringLiteral("the sweep in %1 is not running: %2, and none of its "
                                             "points runs on this machine")
                                  .arg(sweepDir, queueGone));
    return;
  }
  emit stopRequested(sweepDir);
  if (queuePid == 0) return;  // its points report their own ends
  Job job;
  job.dir = sweepDir;
  job.pid = queuePid;
  job.engine = engine;
  job.phase = Phase::Terminating;
  job.sweep = true;
  // It ends once its points have: their grace, SIGKILL's wait, and a margin for it to reap them.
  job.graceSeconds = std::max(longestGrace, 0) + kKillWaitMs / 1000 + kQueueMarginSeconds;
  job.deadlineMs = clock_.elapsed() + qint64{job.graceSeconds} * 1000;
  track(std::move(job));
}

void StopWorker::poll() {
  jobs_.erase(std::remove_if(jobs_.begin(), jobs_.end(), [this](Job& j) { return advance(j); }),
              jobs_.end());
  if (jobs_.empty()) timer_->stop();
}

bool StopWorker::advance(Job& job) {
  const bool alive = processAlive(job.pid);
  switch (job.phase) {
    case Phase::Launching:
      if (!job.sweep && QFileInfo::exists(runFile(job.dir, studio::kStatusFileName))) return true;
      // A sweep writes sweep.json, then takes its queue's lock and records itself in
      // sweep-status.json: a scan in between would find every point Queued and no queue, which the
      // store does not poll for.
      if (job.sweep && QFileInfo::exists(runFile(job.dir, studio::kSweepFileName)) &&
          (!alive || sweepQueueRunsHere(job.dir))) {
        emit sweepWritten(job.dir);
        return true;
      }
      if (alive) return false;
      {
        const QString log = runFile(job.dir, job.sweep ? kSweepLogFileName : kTrainLogFileName);
        const QString last = lastLogLine(log);
        emit launchFailed(job.dir, (job.sweep ? QStringLiteral("studio-train sweep exited before it "
                                                               "started the sweep")
                                              : QStringLiteral("studio-train exited before it started the run")) +
                                       (last.isEmpty() ? QString() : QStringLiteral(": ") + last) +
                                       QStringLiteral(" (see %1)").arg(log));
      }
      return true;
    case Phase::Terminating:
      if (!alive) {
        emit stopFinished(job.dir, false);
        return true;
      }
      if (clock_.elapsed() < job.deadlineMs) return false;
      if (!stillItsProcess(job)) {  // it ended, and its pid is another process's now
        emit stopFinished(job.dir, false);
        return true;
      }
      kill(job);
      return false;
    case Phase::Killing:
      if (!alive) {
        recordKilled(job);
        emit stopFinished(job.dir, true);
        return true;
      }
      if (clock_.elapsed() < job.deadlineMs) return false;
      emit stopFailed(job.dir, QStringLiteral("process %1 of %2 is still there %3 s after SIGKILL")
                                   .arg(job.pid)
                                   .arg(job.dir)
                                   .arg(kKillWaitMs / 1000));
      return true;
  }
  return true;
}

bool StopWorker::stillItsProcess(const Job& job) const {
  return job.sweep ? isSweepProcess(job.pid, job.dir, job.engine)
                   : isRunProcess(job.pid, job.dir, job.engine);
}

void StopWorker::kill(Job& job) {
  // The launcher started the engine as a session (and process group) leader: the group holds
  // its worker ranks too. A run started some other way may share its group with its shell.
  const pid_t pid = static_cast<pid_t>(job.pid);
  if (::getpgid(pid) == pid)
    ::killpg(pid, SIGKILL);
  else
    ::kill(pid, SIGKILL);
  job.phase = Phase::Killing;
  job.deadlineMs = clock_.elapsed() + kKillWaitMs;
}

void StopWorker::recordKilled(const Job& job) {
  // The engine got no chance to record its end: say it for it, unless it managed after all.
  const std::string statusFile = localPath(
      runFile(job.dir, job.sweep ? studio::kSweepStatusFileName : studio::kStatusFileName));
  studio::RunStatus status;
  std::string error;
  const bool haveStatus = studio::RunStatus::read(statusFile, status, error);
  if (haveStatus && status.state != studio::RunState::Running) return;
  const std::string reason = "killed by the studio: it was still running " +
                             std::to_string(job.graceSeconds) + " s after SIGTERM";
  status.state = studio::RunState::Stopped;
  status.pid = job.pid;
  if (status.host.empty()) status.host = localHostName().toStdString();
  status.exit_code = 128 + SIGKILL;
  status.reason = reason;
  status.updated = studio::kNoValue;
  if (job.sweep) {  // a sweep's queue has no events of its own: its points have theirs
    if (const std::string written = status.write(statusFile); !written.empty())
      qWarning("studio: killed the queue of %s but could not record it: %s", qPrintable(job.dir),
               written.c_str());
    return;
  }
  const QString events = runFile(job.dir, studio::kEventsFileName);
  endPartialLine(events);
  studio::EventWriter writer;
  nlohmann::json end = studio::EndEvent{studio::run_state_name(studio::RunState::Stopped), reason};
  end["exit_code"] = *status.exit_code;
  std::string problem = writer.open(localPath(events));
  if (problem.empty()) problem = writer.write(end);
  const std::string closed = writer.close();
  if (problem.empty()) problem = closed;
  const std::string written = status.write(statusFile);
  if (problem.empty()) problem = written;
  // The run is stopped all the same; the list then shows it as Lost instead of Stopped.
  if (!problem.empty())
    qWarning("studio: killed the run in %s but could not record it: %s", qPrintable(job.dir),
             problem.c_str());
}

}  // namespace studio::ui
