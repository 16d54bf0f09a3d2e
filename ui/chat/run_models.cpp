#include "studio/ui/chat/run_models.h"

#include <QDir>
#include <QFileInfo>
#include <QObject>

#include <algorithm>

namespace studio::ui {
namespace {

constexpr QLatin1String kCheckpointPrefix("checkpoint-");

// STEP of a folder named checkpoint-STEP (STEP all digits); -1 for any other name.
qint64 checkpointStep(const QString& name) {
  if (!name.startsWith(kCheckpointPrefix)) return -1;
  const QString digits = name.mid(kCheckpointPrefix.size());
  bool ok = !digits.isEmpty();
  for (const QChar c : digits) ok = ok && c >= QLatin1Char('0') && c <= QLatin1Char('9');
  const qint64 step = ok ? digits.toLongLong(&ok) : -1;
  return ok ? step : -1;
}

}  // namespace

QString RunModel::label() const {
  return isFinal() ? QObject::tr("final model") : kCheckpointPrefix + QString::number(step);
}

bool isModelFolder(const QString& dir) {
  const QDir d(dir);
  return d.exists(QStringLiteral("config.json")) &&
         !d.entryList({QStringLiteral("*.safetensors")}, QDir::Files).isEmpty();
}

QList<RunModel> listRunModels(const QString& runDir) {
  QList<RunModel> models;
  if (runDir.isEmpty()) return models;
  const QDir run(runDir);
  if (isModelFolder(runDir)) models << RunModel{run.absolutePath(), -1};
  QList<RunModel> checkpoints;
  for (const QString& name : run.entryList({kCheckpointPrefix + QLatin1Char('*')}, QDir::Dirs)) {
    const qint64 step = checkpointStep(name);
    if (step >= 0 && isModelFolder(run.filePath(name)))
      checkpoints << RunModel{QFileInfo(run.filePath(name)).absoluteFilePath(), step};
  }
  std::sort(checkpoints.begin(), checkpoints.end(),
            [](const RunModel& a, const RunModel& b) { return a.step < b.step; });
  return models + checkpoints;
}

}  // namespace studio::ui
