#include "studio/ui/remote/remote_run_backend.h"

#include <QFileInfo>

#include "studio/remote/detached_run.h"
#include "studio/ui/base/local_path.h"

namespace studio::ui {

namespace {
QString runName(const QString& dir) { return QFileInfo(dir).fileName(); }
}  // namespace

RemoteRunBackend::RemoteRunBackend(RemotePrompts prompts, QObject* parent)
    : RunBackend(parent),
      runs_(new RemoteRuns(prompts, this)),
      submitter_(new RemoteSubmitter(prompts, this)) {
  connect(submitter_, &RemoteSubmitter::progress, this, &RunBackend::startProgress);
  connect(submitter_, &RemoteSubmitter::submitted, this, [this](const QString& dir) {
    emit notice(tr("Launched %1 on its host; following it into %2").arg(runName(dir), dir), true,
                0);
    runs_->follow(dir);
    emit started(dir);
  });
  connect(submitter_, &RemoteSubmitter::sweepSubmitted, this,
          [this](const QStringList& dirs, const QString& jobId) {
            emit notice(tr("Sweep submitted as Slurm job array %1: %n point(s), each followed into "
                           "its folder",
                           nullptr, static_cast<int>(dirs.size()))
                            .arg(jobId),
                        true, 0);
            for (const QString& dir : dirs) runs_->follow(dir);
            if (!dirs.isEmpty()) emit started(dirs.front());
          });
  connect(submitter_, &RemoteSubmitter::failed, this, [this](const QString& error) {
    emit startFailed(tr("Remote launch failed: %1").arg(error));
  });
  // Every change of a mirror's files is a change of the runs list.
  connect(runs_, &RemoteRuns::statusChanged, this, &RunBackend::runsChanged);
  connect(runs_, &RemoteRuns::disconnected, this,
          [this](const QString& dir, const QString& error, int attempt, int retryInMs) {
            emit notice(tr("%1: connection lost: %2; retrying in %3 s (attempt %4)")
                            .arg(runName(dir), error)
                            .arg((retryInMs + 999) / 1000)
                            .arg(attempt),
                        false, retryInMs + kNoticeMs);
          });
  connect(runs_, &RemoteRuns::connected, this, [this](const QString& dir) {
    emit notice(tr("%1: following on its host").arg(runName(dir)), false, kNoticeMs);
  });
  connect(runs_, &RemoteRuns::ended, this, [this](const QString& dir, const QString& state) {
    emit notice(tr("%1 on its host: %2, every event mirrored").arg(runName(dir), state), true,
                kNoticeMs);
    emit runsChanged();
  });
  connect(runs_, &RemoteRuns::followFailed, this, [this](const QString& dir, const QString& error) {
    emit notice(tr("Cannot follow %1: %2").arg(runName(dir), error), true, kNoticeMs);
  });
  connect(runs_, &RemoteRuns::cancelFinished, this,
          [this](const QString& dir, const QStringList& lines) {
            const QString summary = lines.join(QStringLiteral("; "));
            emit notice(tr("%1: %2").arg(runName(dir), summary), true, 0);
            emit stopFinished(dir, summary);
            emit runsChanged();
          });
  connect(runs_, &RemoteRuns::cancelFailed, this, [this](const QString& dir, const QString& error) {
    emit notice(tr("Cannot stop %1: %2").arg(runName(dir), error), true, kNoticeMs);
    emit stopFailed(dir, error);
  });
  connect(runs_, &RemoteRuns::attached, this, [this](const QString& dir) {
    emit notice(tr("Following %1 into %2").arg(runName(dir), dir), true, 0);
    emit runsChanged();
    emit attached(dir);
  });
  connect(runs_, &RemoteRuns::attachFailed, this,
          [this](const QString& runId, const QString& error) {
            emit notice(tr("Cannot attach %1: %2").arg(runId, error), true, kNoticeMs);
          });
}

bool RemoteRunBackend::startsOn(const LaunchTarget& target) const {
  return target.kind == LaunchTarget::Ssh;
}

bool RemoteRunBackend::owns(const RunInfo& run) const { return run.remote; }

studio::remote::SubmitRequest RemoteRunBackend::requestFor(const LaunchTarget& target) {
  studio::remote::SubmitRequest request;
  request.host.target = target.sshTarget.toStdString();
  request.host.identity_file = localPath(target.identityFile);
  request.host.known_hosts_file = localPath(target.knownHostsFile);
  request.host.ssh_config_file = localPath(target.sshConfigFile);
  if (!target.remoteRoot.isEmpty()) request.remote_root = target.remoteRoot.toStdString();
  if (!target.engine.isEmpty()) request.engine = target.engine.toStdString();
  request.nproc = target.nproc;
  request.upload_model = target.uploadModel;
  if (target.trainer == LaunchTarget::LlamaFactory)
    request.llamafactory_cli = target.llamafactoryCli.toStdString();
  if (target.useSlurm) {
    studio::remote::SbatchOptions slurm;
    slurm.nodes = target.nnodes;
    slurm.gpus_per_node = target.nproc;
    slurm.partition = target.partition.toStdString();
    slurm.account = target.account.toStdString();
    slurm.time = target.timeLimit.toStdString();
    request.slurm = slurm;
  } else if (target.nnodes > 1) {
    for (const QString& node : target.extraNodes) request.extra_nodes.push_back(node.toStdString());
    request.master_addr = target.masterAddr.toStdString();
  }
  return request;
}

bool RemoteRunBackend::start(const studio::RunConfig& config, const QString& baseDir,
                             const LaunchTarget& target, const QString& runsRoot) {
  if (!submitter_->submit(config, baseDir, requestFor(target), runsRoot)) return false;
  emit notice(tr("Launching on %1 ...").arg(target.sshTarget), true, 0);
  return true;
}

bool RemoteRunBackend::startSweep(const studio::RunConfig& config, const QString& baseDir,
                                  const LaunchTarget& target, const QStringList& axes, bool list,
                                  int parallel, const QString& runsRoot) {
  if (!submitter_->submitSweep(config, baseDir, requestFor(target), axes, list, parallel, runsRoot))
    return false;
  emit notice(tr("Submitting a sweep to %1 as a Slurm job array ...").arg(target.sshTarget), true, 0);
  return true;
}

QString RemoteRunBackend::busyMessage() const {
  return tr("A remote launch is already in progress");
}

QString RemoteRunBackend::stopDescription(const QString& dir) const {
  return tr("Stopping %1 on its host (SIGTERM, SIGKILL after %2 s, plus ddp_timeout when it saves "
            "on stop; scancel for Slurm)")
      .arg(dir)
      .arg(studio::remote::kDefaultCancelGraceSeconds);
}

void RemoteRunBackend::stop(const QString& dir) { runs_->cancel(dir); }

QString RemoteRunBackend::stopSweepDescription(const QString& sweepDir) const {
  return tr("Stopping the sweep %1 on its host: scancel of its Slurm job array (running points "
            "get SIGTERM, SIGKILL after Slurm's KillWait; pending ones never start)")
      .arg(sweepDir);
}

void RemoteRunBackend::stopSweep(const QString& sweepDir, const QStringList& points) {
  runs_->cancelSweep(sweepDir, points);
}


void RemoteRunBackend::followAll(const QString& runsRoot) { runs_->followAll(runsRoot); }

void RemoteRunBackend::attach(const studio::remote::RemoteHostRef& host, const QString& remoteRoot,
                              const QString& runId, const QString& runsRoot) {
  runs_->attach(host, remoteRoot, runId, runsRoot);
}

}  // namespace studio::ui
