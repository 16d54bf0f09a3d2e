#include "studio/ui/remote/remote_submitter.h"

#include <QDeadlineTimer>
#include <QFileInfo>
#include <QTemporaryDir>

#include "studio/config/config_io.h"
#include "studio/ui/base/local_path.h"
#include "studio/ui/runs/local_launcher.h"
#include "studio/ui/runs/remote_mirror.h"
#include "worker_link.h"

namespace studio::ui {
namespace {

constexpr int kJoinMs = 1000;

QString runName(const studio::RunConfig& config) {
  const QString name = QFileInfo(QString::fromStdString(config.output_dir)).fileName();
  return name.isEmpty() ? QStringLiteral("run") : name;
}

// Writes `config` (relative paths made absolute against `baseDir`) into `staging` as NAME.yaml,
// the file submit_run and submit_sweep read; throws std::runtime_error when it cannot.
std::string stageConfig(QTemporaryDir& staging, const studio::RunConfig& config,
                        const QString& baseDir, const std::string& name) {
  if (!staging.isValid())
    throw std::runtime_error("cannot create a temporary folder to stage the config: " +
                             staging.errorString().toStdString());
  const QString staged = staging.filePath(QString::fromStdString(name) + QStringLiteral(".yaml"));
  const std::string saved = studio::save_config_file(
      LocalLauncher::configForRun(config, baseDir, staging.path()), localPath(staged));
  if (!saved.empty()) throw std::runtime_error(saved);
  return localPath(staged);
}

}  // namespace

RemoteSubmitter::RemoteSubmitter(RemotePrompts prompts, QObject* parent)
    : QObject(parent), prompts_(std::move(prompts)), link_(std::make_shared<WorkerLink>()) {
  auto done = [this] { busy_ = false; };
  connect(this, &RemoteSubmitter::submitted, this, done);
  connect(this, &RemoteSubmitter::failed, this, done);
  connect(this, &RemoteSubmitter::sweepSubmitted, this, done);
}

RemoteSubmitter::~RemoteSubmitter() {
  link_->cut();
  waitBriefly(thread_, QDeadlineTimer(kJoinMs));
}

bool RemoteSubmitter::start(const studio::RunConfig& config, const QString& baseDir,
                            studio::remote::SubmitRequest request, Submission submission) {
  if (busy_) return false;
  busy_ = true;
  if (request.run_name.empty()) request.run_name = runName(config).toStdString();
  auto link = link_;
  thread_ = startWorkerThread([this, link, config, baseDir, request, prompts = prompts_,
                               submission = std::move(submission)]() mutable {
    auto report = [&](auto&& emitIt) { link->call(emitIt); };
    try {
      // The remote side reads a config file; the staged copy lives only as long as the submit.
      QTemporaryDir staging;
      request.config_file = stageConfig(staging, config, baseDir, request.run_name);
      report([&] {
        emit progress(tr("connecting to %1").arg(QString::fromStdString(request.host.target)), 0, 0,
                      0, 0);
      });
      const studio::remote::SshSession session = connectRemote(request.host, prompts);
      const std::function<void()> done =
          submission(session, request, [&](const studio::remote::SubmitProgress& p) {
            const QString text = QString::fromStdString(p.what) +
                                 (p.skipped ? tr(" (unchanged, skipped)") : QString());
            report([&] {
              emit progress(text, p.file_index, p.file_count, static_cast<qint64>(p.bytes),
                            static_cast<qint64>(p.total));
            });
          });
      // The outcome is emitted on the GUI thread: busy_ is false before anyone sees it.
      link->post(this, done);
    } catch (const std::exception& e) {
      const QString error = QString::fromStdString(e.what());
      link->post(this, [this, error] { emit failed(error); });
    }
  });
  return true;
}

bool RemoteSubmitter::submit(const studio::RunConfig& config, const QString& baseDir,
                             studio::remote::SubmitRequest request, const QString& runsRoot) {
  const RemotePrompts prompts = prompts_;
  return start(config, baseDir, std::move(request),
               [this, runsRoot, prompts](const studio::remote::SshSession& session,
                                         const studio::remote::SubmitRequest& staged,
                                         const studio::remote::SubmitProgressFn& progress) {
                 const studio::remote::SubmitResult result =
                     studio::remote::submit_run(session, staged, progress, nodeConnector(prompts));
                 QString error;
                 const QString dir = RemoteMirror::create(runsRoot, result, &error);
                 if (dir.isEmpty())
                   throw std::runtime_error(
                       tr("the run %1 started on %2, but its local folder could not be written: "
                          "%3")
                           .arg(QString::fromStdString(result.record.run_id),
                                QString::fromStdString(result.record.host.target), error)
                           .toStdString());
                 return std::function<void()>([this, dir] { emit submitted(dir); });
               });
}

bool RemoteSubmitter::submitSweep(const studio::RunConfig& config, const QString& baseDir,
                                  studio::remote::SubmitRequest request, const QStringList& axes,
                                  bool list, int parallel, const QString& runsRoot) {
  studio::remote::SweepSubmitRequest sweep;
  for (const QString& axis : axes) sweep.axes.push_back(axis.toStdString());
  sweep.list = list;
  sweep.parallel = parallel;
  return start(
      config, baseDir, std::move(request),
      [this, sweep, runsRoot](const studio::remote::SshSession& session,
                              const studio::remote::SubmitRequest& staged,
                              const studio::remote::SubmitProgressFn& progress) mutable {
        sweep.run = staged;
        const studio::remote::SweepSubmitResult result =
            studio::remote::submit_sweep(session, sweep, progress);
        // One mirror per point, as for a run submitted alone.
        QStringList dirs;
        QStringList unwritten;
        for (std::size_t i = 0; i < result.points.size(); ++i) {
          studio::remote::SubmitResult point;
          point.record = result.points[i];
          point.remote_config = result.remote_configs[i];
          QString error;
          const QString dir = RemoteMirror::create(runsRoot, point, &error);
          if (dir.isEmpty())
            unwritten << QString::fromStdString(point.record.run_id) + QStringLiteral(": ") + error;
          else
            dirs << dir;
        }
        if (!unwritten.isEmpty())
          throw std::runtime_error(
              tr("sweep %1 was submitted as Slurm job array %2 on %3, but the local folders of "
                 "some points could not be written (attach them by run id): %4")
                  .arg(QString::fromStdString(result.sweep_id),
                       QString::fromStdString(result.job_id),
                       QString::fromStdString(staged.host.target),
                       unwritten.join(QStringLiteral("; ")))
                  .toStdString());
        const QString jobId = QString::fromStdString(result.job_id);
        return std::function<void()>([this, dirs, jobId] { emit sweepSubmitted(dirs, jobId); });
      });
}

}  // namespace studio::ui
