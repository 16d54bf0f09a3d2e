#include "studio/ui/runs/local_launcher.h"

#include "studio/config/llamafactory_target.h"

#include <filesystem>
#include <system_error>

#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>

#include <signal.h>

#include "studio/ui/base/local_path.h"
#include "stop_worker.h"
#include "studio/base/atomic_file.h"
#include "studio/config/config_io.h"
#include "studio/config/llamafactory_v1.h"
#include "studio/ui/runs/launch_record.h"
#include "studio/ui/runs/process_probe.h"
#include "studio/ui/runs/run_folder.h"
#include "studio/ui/runs/run_store.h"

namespace studio::ui {
namespace {

QString fail(QString* error, const QString& message) {
  if (error) *error = message;
  return {};
}

// A name that is safe as a folder name on any file system the run may be copied to.
QString folderName(const QString& name) {
  static const QRegularExpression unsafe(QStringLiteral("[^A-Za-z0-9._-]+"));
  QString clean = name.trimmed();
  clean.replace(unsafe, QStringLiteral("-"));
  while (clean.startsWith(QLatin1Char('.')) || clean.startsWith(QLatin1Char('-')))
    clean.remove(0, 1);
  return clean.isEmpty() ? QStringLiteral("run") : clean;
}

void makeAbsolute(std::string& path, const QDir& base) {
  if (path.empty()) return;
  const QString p = QString::fromStdString(path);
  if (QDir::isAbsolutePath(p)) return;
  path = QDir::cleanPath(base.absoluteFilePath(p)).toStdString();
}

void makeAbsolute(std::optional<std::string>& path, const QDir& base) {
  if (path) makeAbsolute(*path, base);
}

// Starts `setsid ARGS` detached in `dir`, stdin from /dev/null, stdout and stderr appended to
// DIR/log. QProcess forks twice; setsid then makes the program the leader of a new session and
// process group (it is no group leader yet, so setsid execs it in place and the pid is the
// program's), so it outlives the studio.
bool startInSession(const QString& setsid, const QStringList& args, const QString& dir,
                    const char* log, qint64* pid, QString* why) {
  QProcess process;
  process.setProgram(setsid);
  process.setArguments(args);
  process.setWorkingDirectory(dir);
  process.setStandardInputFile(QProcess::nullDevice());
  const QString path = runFile(dir, log);
  process.setStandardOutputFile(path, QIODevice::Append);
  process.setStandardErrorFile(path, QIODevice::Append);
  if (process.startDetached(pid)) return true;
  *why = process.errorString();
  return false;
}

}  // namespace

LocalLauncher::LocalLauncher(QObject* parent) : QObject(parent), root_(defaultRunsRoot()) {
  thread_.setObjectName(QStringLiteral("local-launcher"));
  worker_ = new StopWorker;
  worker_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
  connect(worker_, &StopWorker::launchFailed, this, &LocalLauncher::launchFailed);
  connect(worker_, &StopWorker::sweepWritten, this, &LocalLauncher::sweepWritten);
  connect(worker_, &StopWorker::stopRequested, this, &LocalLauncher::stopRequested);
  connect(worker_, &StopWorker::stopFinished, this, &LocalLauncher::stopFinished);
  connect(worker_, &StopWorker::stopFailed, this, &LocalLauncher::stopFailed);
  thread_.start();
}

LocalLauncher::~LocalLauncher() {
  // The runs keep going: they were started in their own sessions, and nothing here owns them.
  thread_.quit();
  thread_.wait();
}

studio::RunConfig LocalLauncher::configForRun(const studio::RunConfig& config,
                                              const QString& baseDir, const QString& runDir) {
  studio::RunConfig cfg = config;
  const QDir base(baseDir.isEmpty() ? QDir::currentPath() : baseDir);
  makeAbsolute(cfg.model_name_or_path, base);
  makeAbsolute(cfg.ref_model, base);
  makeAbsolute(cfg.dataset_dir, base);
  makeAbsolute(cfg.deepspeed, base);
  makeAbsolute(cfg.resume_from_checkpoint, base);
  // LLaMA-Factory v1: the data paths (in the config and in its dataset YAML) are the working
  // directory's; the run starts in its own folder, so they become absolute, the dataset YAML
  // rewritten into the run folder.
  studio::relocate_v1_datasets(
      cfg, base.absolutePath().toStdString(), [](const std::string& path) { return path; },
      [&runDir](const std::string& name, const std::string& text) {
        const std::string path =
            localPath(QDir(runDir).filePath(QString::fromStdString(name)));
        if (const std::string error = studio::write_file_atomic(path, text); !error.empty())
          throw std::invalid_argument(error);
        return path;
      });
  cfg.output_dir = runDirPath(runDir).toStdString();
  // The fresh run folder already holds config.yaml, studio-launch.json and train.log when the
  // engine checks it, and has no checkpoint to resume from: without this, the engine would
  // refuse the folder as "already holds files".
  cfg.overwrite_output_dir = true;
  return cfg;
}

QString LocalLauncher::createRunDir(const QString& name, QString* error) const {
  namespace fs = std::filesystem;
  if (root_.isEmpty()) return fail(error, tr("no runs folder is set"));
  std::error_code ec;
  fs::create_directories(localPath(root_), ec);
  if (ec)
    return fail(error, tr("cannot create the runs folder %1: %2 (choose a writable runs folder)")
                           .arg(root_, QString::fromStdString(ec.message())));
  const QString base = folderName(name) + QLatin1Char('-') +
                       QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss"));
  // Two launches in the same second get -2, -3, ...: create_directory is the atomic test.
  for (int n = 1; n < 1000; ++n) {
    const QString dir = QDir(root_).filePath(n == 1 ? base : base + QStringLiteral("-%1").arg(n));
    if (fs::create_directory(localPath(dir), ec)) return runDirPath(dir);
    if (ec)
      return fail(error, tr("cannot create the run folder %1: %2 (is %3 writable?)")
                             .arg(dir, QString::fromStdString(ec.message()), root_));
  }
  return fail(error, tr("cannot find a free folder name for %1 in %2").arg(base, root_));
}

QString LocalLauncher::checkEngine(QString* error, QString* setsidOut) const {
  const QFileInfo engine(engine_);
  if (engine_.isEmpty())
    return fail(error, tr("no training engine is set: the studio runs the studio-train that is "
                          "installed next to it"));
  if (!engine.exists())
    return fail(error, tr("the training engine %1 does not exist: build studio-train "
                          "(-DSTUDIO_BUILD_ENGINE=ON) or install it next to the studio")
                           .arg(engine_));
  if (!engine.isFile())
    return fail(error, tr("the training engine %1 is not a program file").arg(engine_));
  if (!engine.isExecutable())
    return fail(error, tr("the training engine %1 is not executable (chmod +x it)").arg(engine_));
  const QString setsid = QStandardPaths::findExecutable(QStringLiteral("setsid"));
  if (setsid.isEmpty())
    return fail(error, tr("setsid was not found in PATH: the studio starts runs in their own "
                          "session with it, so they outlive the studio (install util-linux)"));
  *setsidOut = setsid;
  return engine.absoluteFilePath();
}

QString LocalLauncher::launchSweep(const SweepLaunchRequest& request, QString* error) {
  QString setsid;
  const QString engine = checkEngine(error, &setsid);
  if (engine.isEmpty()) return {};
  if (request.nproc < 1 || request.parallel < 1)
    return fail(error, tr("a sweep needs at least 1 process per point and 1 point at once"));
  if (request.axes.isEmpty())
    return fail(error, tr("a sweep needs at least one key to vary"));
  const QString name = request.name.isEmpty() ? QStringLiteral("sweep") : request.name;
  const QString dir = createRunDir(name, error);
  if (dir.isEmpty()) return {};
  auto abandon = [&](const QString& message) {
    QDir(dir).removeRecursively();
    return fail(error, message);
  };
  studio::RunConfig base;
  try {
    base = configForRun(request.config, request.baseDir, dir);
  } catch (const std::exception& e) {
    return abandon(QString::fromStdString(e.what()));
  }
  // The base's output_dir is the sweep's folder, which holds base.yaml; every point gets its own
  // folder and overwrite_output_dir anyway (studio-train sweep).
  base.overwrite_output_dir = true;
  const QString basePath = runFile(dir, "base.yaml");
  if (const std::string saved = studio::save_config_file(base, localPath(basePath)); !saved.empty())
    return abandon(QString::fromStdString(saved));
  QStringList args{engine, QStringLiteral("sweep"), basePath};
  for (const QString& axis : request.axes) args << QStringLiteral("--sweep") << axis;
  if (request.list) args << QStringLiteral("--list");
  args << QStringLiteral("--nproc") << QString::number(request.nproc) << QStringLiteral("--parallel")
       << QString::number(request.parallel) << QStringLiteral("--name") << name
       << QStringLiteral("--out") << dir;
  qint64 pid = 0;
  QString why;
  if (!startInSession(setsid, args, dir, kSweepLogFileName, &pid, &why))
    return abandon(tr("cannot start %1: %2").arg((QStringList{setsid} + args).join(QLatin1Char(' ')), why));
  QMetaObject::invokeMethod(
      worker_, [w = worker_, dir, pid] { w->watchSweepLaunch(dir, pid); }, Qt::QueuedConnection);
  return dir;
}

QString LocalLauncher::launch(const LaunchRequest& request, QString* error) {
  QString setsid;
  const QString enginePath = checkEngine(error, &setsid);
  if (enginePath.isEmpty()) return {};
  const QFileInfo engine(enginePath);
  if (request.nproc < 1)
    return fail(error, tr("nproc must be at least 1, got %1").arg(request.nproc));

  const QString dir = createRunDir(request.name, error);
  if (dir.isEmpty()) return {};
  // Nothing of a run that did not start is left behind: the folder is ours and new.
  auto abandon = [&](const QString& message) {
    QDir(dir).removeRecursively();
    return fail(error, message);
  };
  const bool lf = request.trainer == LaunchRequest::Trainer::LlamaFactory;
  QString lfCli;
  if (lf) {
    lfCli = request.llamafactoryCli.contains(QLatin1Char('/'))
                ? request.llamafactoryCli
                : QStandardPaths::findExecutable(request.llamafactoryCli);
    if (lfCli.isEmpty() || !QFileInfo(lfCli).isExecutable())
      return abandon(tr("LLaMA-Factory's %1 was not found%2: install LLaMA-Factory (pip install "
                        "llamafactory) or give the path of its llamafactory-cli")
                         .arg(request.llamafactoryCli,
                              request.llamafactoryCli.contains(QLatin1Char('/'))
                                  ? QString()
                                  : tr(" in PATH")));
  }
  studio::RunConfig runConfig;
  try {
    runConfig = configForRun(request.config, request.baseDir, dir);
  } catch (const std::exception& e) {
    return abandon(QString::fromStdString(e.what()));
  }
  if (lf) {
    if (const std::string why = studio::llamafactory_refusal(runConfig); !why.empty())
      return abandon(tr("LLaMA-Factory cannot run this config:\n%1").arg(QString::fromStdString(why)));
  }
  const QString configPath = runFile(dir, kRunConfigFileName);
  const std::string saved = studio::save_config_file(
      runConfig, localPath(configPath),
      lf ? studio::YamlStyle::LlamaFactory : studio::YamlStyle::Minimal);
  if (!saved.empty()) return abandon(QString::fromStdString(saved));

  LaunchRecord record;
  record.engine = engine.absoluteFilePath();
  record.config = configPath;
  record.cwd = dir;
  record.nproc = request.nproc;
  record.host = localHostName();
  QStringList args{record.engine, QStringLiteral("train"), configPath};
  if (request.nproc > 1) args << QStringLiteral("--nproc") << QString::number(request.nproc);
  if (lf) {
    args = QStringList{record.engine,
                       QStringLiteral("supervise"),
                       QStringLiteral("--output-dir"),
                       dir,
                       // Inside the studio's own grace (Stop), so that the supervisor still
                       // records the stop before the studio would SIGKILL it.
                       QStringLiteral("--grace"),
                       QString::number(kDefaultGraceSeconds - 5),
                       QStringLiteral("--env"),
                       QStringLiteral("FORCE_TORCHRUN=1"),
                       QStringLiteral("--env"),
                       QStringLiteral("NPROC_PER_NODE=%1").arg(request.nproc),
                       QStringLiteral("--"),
                       QFileInfo(lfCli).absoluteFilePath(),
                       QStringLiteral("train"),
                       configPath};
  }
  record.command = QStringList{setsid} + args;

  record.started = QDateTime::currentDateTime();
  QString why;
  if (!startInSession(setsid, args, dir, kTrainLogFileName, &record.pid, &why))
    return abandon(tr("cannot start %1: %2").arg(record.command.join(QLatin1Char(' ')), why));
  if (const QString written = record.write(dir); !written.isEmpty()) {
    // Without the record the run could not be stopped or recognised later: do not leave it
    // running unaccounted for.
    ::kill(static_cast<pid_t>(record.pid), SIGTERM);
    return fail(error, tr("stopped the run just started in %1: %2").arg(dir, written));
  }
  emit launched(dir);
  QMetaObject::invokeMethod(
      worker_, [w = worker_, dir, pid = record.pid] { w->watchLaunch(dir, pid); },
      Qt::QueuedConnection);
  return dir;
}

void LocalLauncher::stop(const QString& runDir, int graceSeconds) {
  QMetaObject::invokeMethod(
      worker_,
      [w = worker_, dir = runDirPath(runDir), engine = engine_, graceSeconds] {
        w->stop(dir, engine, graceSeconds);
      },
      Qt::QueuedConnection);
}

void LocalLauncher::stopSweep(const QString& sweepDir, const QStringList& points,
                              int graceSeconds) {
  QMetaObject::invokeMethod(
      worker_,
      [w = worker_, dir = runDirPath(sweepDir), points, engine = engine_, graceSeconds] {
        w->stopSweep(dir, points, engine, graceSeconds);
      },
      Qt::QueuedConnection);
}

}  // namespace studio::ui
