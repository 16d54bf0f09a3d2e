#pragma once
// TensorBoard's own reader (its Python package, STUDIO_PYTHON) on a log folder, for the tests:
// every scalar as tag -> [[step, value, wall_time], ...]. A missing package is an error that
// says to run scripts/setup.sh; the tests fail then, never skip.
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QString>

namespace tensorboard_reference {

inline QJsonObject scalars(const QString& logdir, QString& error) {
  QProcess python;
  python.start(QStringLiteral(STUDIO_PYTHON),
               {QStringLiteral(STUDIO_SOURCE_DIR "/tests/trainer/read_tensorboard.py"), logdir});
  if (!python.waitForFinished(120000) || python.exitCode() != 0) {
    error = QString::fromUtf8(python.readAllStandardError()) + python.errorString();
    return {};
  }
  return QJsonDocument::fromJson(python.readAllStandardOutput()).object();
}

}  // namespace tensorboard_reference
