#include "studio/ui/shell/demo_project.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QProcess>
#include <QStandardPaths>

namespace studio::ui {

QString findResourcesDir() {
  const QString env = qEnvironmentVariable("STUDIO_RESOURCES_DIR");
  if (!env.isEmpty()) return QDir(env).absolutePath();
  const QDir app(QCoreApplication::applicationDirPath());
  const QString installed = app.absoluteFilePath(QStringLiteral("../share/seqstudio/resources"));
  if (QFileInfo::exists(installed + QStringLiteral("/demo/sft_demo.yaml")))
    return QDir(installed).canonicalPath();
  return QStringLiteral(STUDIO_SOURCE_RESOURCES_DIR);
}

QString findEngineProgram() {
  const QString env = qEnvironmentVariable("STUDIO_TRAIN");
  if (!env.isEmpty()) return env;
  return QDir(QCoreApplication::applicationDirPath()).absoluteFilePath(QStringLiteral("studio-train"));
}

DemoProject::DemoProject(QString resourcesDir, QString engineProgram, QString dataDir,
                         QObject* parent)
    : QObject(parent),
      resources_(std::move(resourcesDir)),
      engine_(std::move(engineProgram)),
      dataDir_(dataDir.isEmpty()
                   ? QStandardPaths::writableLocation(QStandardPaths::AppLocalDataLocation)
                   : std::move(dataDir)) {}

QString DemoProject::sftConfigPath() const {
  return QDir(resources_).absoluteFilePath(QStringLiteral("demo/sft_demo.yaml"));
}

QString DemoProject::dpoConfigPath() const {
  return QDir(resources_).absoluteFilePath(QStringLiteral("demo/dpo_demo.yaml"));
}

QString DemoProject::baseDir() const {
  return QFileInfo(resources_).absolutePath();
}

QString DemoProject::modelDir() const {
  return QDir(dataDir_).absoluteFilePath(QStringLiteral("demo/model"));
}

bool DemoProject::isModelReady() const {
  const QDir dir(modelDir());
  return dir.exists(QStringLiteral("config.json")) && dir.exists(QStringLiteral("tokenizer.json")) &&
         !dir.entryList({QStringLiteral("*.safetensors")}, QDir::Files).isEmpty();
}

void DemoProject::ensureModel() {
  if (isModelReady()) {
    emit modelReady(modelDir());
    return;
  }
  if (process_) return;
  if (!QFileInfo(engine_).isExecutable()) {
    emit modelFailed(tr("Cannot create the demo model: the engine %1 is not an executable "
                        "(build studio-train, or set STUDIO_TRAIN)")
                         .arg(QDir::toNativeSeparators(engine_)));
    return;
  }
  const QString config =
      QDir(resources_).absoluteFilePath(QStringLiteral("demo/model/config.json"));
  tmpDir_ = modelDir() + QStringLiteral(".creating-%1").arg(QCoreApplication::applicationPid());
  QDir(tmpDir_).removeRecursively();
  QDir().mkpath(QFileInfo(tmpDir_).absolutePath());
  process_ = new QProcess(this);
  process_->setProcessChannelMode(QProcess::MergedChannels);
  connect(process_, &QProcess::finished, this,
          [this](int code, QProcess::ExitStatus status) { finish(code, status == QProcess::CrashExit); });
  connect(process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError error) {
    if (error == QProcess::FailedToStart) finish(-1, true);
  });
  process_->start(engine_, {QStringLiteral("init-model"), QStringLiteral("--config"), config,
                            QStringLiteral("--out"), tmpDir_, QStringLiteral("--seed"),
                            QStringLiteral("7")});
}

void DemoProject::finish(int exitCode, bool crashed) {
  QProcess* p = process_;
  if (!p) return;
  process_ = nullptr;
  const QString output = QString::fromLocal8Bit(p->readAll()).trimmed();
  const QString startError = p->error() == QProcess::FailedToStart ? p->errorString() : QString();
  p->deleteLater();
  if (crashed || exitCode != 0) {
    QDir(tmpDir_).removeRecursively();
    emit modelFailed(tr("studio-train init-model failed (%1): %2")
                         .arg(startError.isEmpty() ? tr("exit code %1").arg(exitCode) : startError,
                              output.section(QLatin1Char('\n'), -1)));
    return;
  }
  QDir(modelDir()).removeRecursively();
  if (!QDir().rename(tmpDir_, modelDir())) {
    emit modelFailed(tr("Cannot move the new demo model into %1").arg(modelDir()));
    return;
  }
  emit modelReady(modelDir());
}

}  // namespace studio::ui
