#include "studio/ui/runs/launch_record.h"

#include <cmath>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include "studio/ui/base/local_path.h"
#include "studio/config/atomic_file.h"
#include "studio/ui/runs/run_folder.h"

namespace studio::ui {
namespace {

bool fail(QString* error, const QString& message) {
  if (error) *error = message;
  return false;
}

}  // namespace

QString LaunchRecord::write(const QString& runDir) const {
  QJsonObject o;
  o[QStringLiteral("command")] = QJsonArray::fromStringList(command);
  o[QStringLiteral("cwd")] = cwd;
  o[QStringLiteral("engine")] = engine;
  o[QStringLiteral("config")] = config;
  // Seconds since the epoch, as every time in events.jsonl and status.json.
  o[QStringLiteral("started")] = static_cast<double>(started.toMSecsSinceEpoch()) / 1000.0;
  o[QStringLiteral("pid")] = static_cast<double>(pid);
  o[QStringLiteral("nproc")] = nproc;
  o[QStringLiteral("host")] = host;
  const QByteArray json = QJsonDocument(o).toJson(QJsonDocument::Indented);
  return QString::fromStdString(studio::write_file_atomic(
      localPath(runFile(runDir, kLaunchRecordFileName)), json.toStdString()));
}

bool LaunchRecord::read(const QString& runDir, LaunchRecord& out, QString* error) {
  const QString path = runFile(runDir, kLaunchRecordFileName);
  std::string text, readError;
  if (!studio::read_small_file(localPath(path), studio::kRunMetadataMaxBytes, text, readError))
    return fail(error, QString::fromStdString(readError));
  QJsonParseError parse;
  const QJsonDocument doc = QJsonDocument::fromJson(QByteArray::fromStdString(text), &parse);
  if (parse.error != QJsonParseError::NoError)
    return fail(error, QStringLiteral("%1 is not valid JSON: %2 at byte %3")
                           .arg(path, parse.errorString())
                           .arg(parse.offset));
  if (!doc.isObject()) return fail(error, QStringLiteral("%1: expected a JSON object").arg(path));
  const QJsonObject o = doc.object();
  const QJsonValue pid = o.value(QStringLiteral("pid"));
  const double pidValue = pid.toDouble(-1);
  if (!pid.isDouble() || pidValue < 1 || std::floor(pidValue) != pidValue)
    return fail(error, QStringLiteral("%1: field 'pid' must be a positive integer").arg(path));
  LaunchRecord r;
  for (const QJsonValue& a : o.value(QStringLiteral("command")).toArray())
    r.command << a.toString();
  r.cwd = o.value(QStringLiteral("cwd")).toString();
  r.engine = o.value(QStringLiteral("engine")).toString();
  r.config = o.value(QStringLiteral("config")).toString();
  const double started = o.value(QStringLiteral("started")).toDouble(NAN);
  if (std::isfinite(started))
    r.started = QDateTime::fromMSecsSinceEpoch(static_cast<qint64>(std::llround(started * 1000)));
  r.pid = static_cast<qint64>(pidValue);
  r.nproc = o.value(QStringLiteral("nproc")).toInt(1);
  r.host = o.value(QStringLiteral("host")).toString();
  out = std::move(r);
  return true;
}

}  // namespace studio::ui
