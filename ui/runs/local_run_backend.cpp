#include "studio/ui/runs/local_run_backend.h"

#include <QFileInfo>

namespace studio::ui {

LocalRunBackend::LocalRunBackend(QObject* parent)
    : RunBackend(parent), launcher_(new LocalLauncher(this)) {
  connect(launcher_, &LocalLauncher::launchFailed, this,
          [this](const QString& dir, const QString& message) {
            emit notice(tr("Launch of %1 failed: %2").arg(dir, message), true, 0);
            emit notice(message, false, kNoticeMs);
          });
  // The points of a sweep just started are listed once it wrote their folders.
  connect(launcher_, &LocalLauncher::sweepWritten, this, [this] { emit runsChanged(); });
  connect(launcher_, &LocalLauncher::stopFailed, this,
          [this](const QString& dir, const QString& message) {
            emit notice(tr("Cannot stop %1: %2").arg(dir, message), true, 0);
            emit notice(message, false, kNoticeMs);
            emit stopFailed(dir, message);
          });
  connect(launcher_, &LocalLauncher::stopFinished, this, [this](const QString& dir, bool killed) {
    const QString summary = killed ? tr("%1 did not stop in time and was killed").arg(dir)
                                   : tr("%1 stopped").arg(dir);
    emit notice(summary, true, 0);
    emit stopFinished(dir, summary);
    emit runsChanged();
  });
}

bool LocalRunBackend::startsOn(const LaunchTarget& target) const {
  return target.kind == LaunchTarget::Local;
}

bool LocalRunBackend::owns(const RunInfo& run) const { return !run.remote; }

bool LocalRunBackend::start(const studio::RunConfig& config, const QString& baseDir,
                            const LaunchTarget& target, const QString& runsRoot) {
  launch(config, baseDir, target, runsRoot);
  return true;
}

QString LocalRunBackend::launch(const studio::RunConfig& config, const QString& baseDir,
                                const LaunchTarget& target, const QString& runsRoot) {
  LaunchRequest request;
  request.config = config;
  request.baseDir = baseDir;
  request.name = QFileInfo(QString::fromStdString(config.output_dir)).fileName();
  if (request.name.isEmpty()) request.name = QStringLiteral("run");
  request.nproc = target.nproc;
  if (target.trainer == LaunchTarget::LlamaFactory) {
    request.trainer = LaunchRequest::Trainer::LlamaFactory;
    request.llamafactoryCli = target.llamafactoryCli;
  }
  launcher_->setRunsRoot(runsRoot);
  QString error;
  const QString dir = launcher_->launch(request, &error);
  if (dir.isEmpty()) {
    emit startFailed(error);
    return {};
  }
  emit notice(tr("Launched %1").arg(dir), true, 0);
  emit started(dir);
  return dir;
}

QString LocalRunBackend::launchSweep(const SweepLaunchRequest& request, const QString& runsRoot) {
  launcher_->setRunsRoot(runsRoot);
  QString error;
  const QString dir = launcher_->launchSweep(request, &error);
  if (dir.isEmpty()) {
    emit startFailed(error);
    return {};
  }
  emit notice(tr("Sweep started in %1 (%2 at a time; its points are listed as they are written)")
                  .arg(dir)
                  .arg(request.parallel),
              true, 0);
  emit runsChanged();
  return dir;
}

QString LocalRunBackend::stopDescription(const QString& dir) const {
  return tr("Stopping %1 (SIGTERM; SIGKILL after %2 s, plus ddp_timeout when it saves on stop)")
      .arg(dir)
      .arg(LocalLauncher::kDefaultGraceSeconds);
}

void LocalRunBackend::stop(const QString& dir) { launcher_->stop(dir); }

QString LocalRunBackend::stopSweepDescription(const QString& sweepDir) const {
  return tr("Stopping the sweep %1: SIGTERM to its queue, so that no point starts any more, and "
            "each running point stopped as a run is (SIGKILL after %2 s, plus ddp_timeout when it "
            "saves on stop); studio-train sweep --resume %1 continues it")
      .arg(sweepDir)
      .arg(LocalLauncher::kDefaultGraceSeconds);
}

void LocalRunBackend::stopSweep(const QString& sweepDir, const QStringList& points) {
  launcher_->stopSweep(sweepDir, points);
}

// A run on this machine writes its own folder, which the run store reads: nothing to resume.
void LocalRunBackend::followAll(const QString& runsRoot) { Q_UNUSED(runsRoot); }

}  // namespace studio::ui
