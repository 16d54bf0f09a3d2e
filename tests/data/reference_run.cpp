#include "reference_run.h"

#include <QProcess>
#include <QProcessEnvironment>

namespace studio::test {

std::optional<nlohmann::json> run_reference(const QString& python, const QString& script,
                                            const std::string& input, QString& error) {
  QProcess process;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("HF_HUB_OFFLINE", "1");
  process.setProcessEnvironment(env);
  process.start(python, {QStringLiteral(STUDIO_SOURCE_DIR "/tests/reference/") + script});
  if (!process.waitForStarted(30000)) {
    error = python + " did not start (" + process.errorString() +
            "): run scripts/setup.sh, which installs it";
    return std::nullopt;
  }
  process.write(QByteArray::fromStdString(input));
  process.closeWriteChannel();
  if (!process.waitForFinished(300000) || process.exitStatus() != QProcess::NormalExit ||
      process.exitCode() != 0) {
    error = script + " failed: " + QString::fromUtf8(process.readAllStandardError());
    return std::nullopt;
  }
  try {
    return nlohmann::json::parse(process.readAllStandardOutput().toStdString());
  } catch (const nlohmann::json::exception& e) {
    error = script + " printed no JSON: " + e.what();
    return std::nullopt;
  }
}

}  // namespace studio::test
