#pragma once
// What the Chat tab's tests share: the engine under test and model folders made by it.
#include <QDir>
#include <QFile>
#include <QProcess>
#include <QString>

namespace chat_test {

// The studio-train of this build; "" when the engine is not built (STUDIO_BUILD_ENGINE off).
inline QString engine() {
#ifdef STUDIO_TRAIN_EXE
  return QStringLiteral(STUDIO_TRAIN_EXE);
#else
  return {};
#endif
}

// A model folder shaped as the demo model (resources/demo/model: ~1.4M parameters, the project's
// tokenizer) with random weights from `seed`, written by `studio-train init-model` to `dir`.
// Returns "" on success, else what went wrong.
inline QString makeModel(const QString& dir, int seed) {
  QProcess init;
  init.start(engine(),
             {QStringLiteral("init-model"), QStringLiteral("--config"),
              QStringLiteral(STUDIO_SOURCE_DIR "/resources/demo/model/config.json"),
              QStringLiteral("--out"), dir, QStringLiteral("--seed"), QString::number(seed)});
  if (!init.waitForFinished(120000)) return QStringLiteral("init-model did not finish");
  if (init.exitCode() != 0) return QString::fromUtf8(init.readAllStandardError());
  return {};
}

// A folder that looks like a model to a listing (config.json, an empty *.safetensors): for the
// tests of what is listed, which read names only.
inline bool makeModelShape(const QString& dir, bool withWeights = true) {
  QDir().mkpath(dir);
  QFile config(dir + QStringLiteral("/config.json"));
  if (!config.open(QIODevice::WriteOnly) || config.write("{}") != 2) return false;
  if (!withWeights) return true;
  QFile weights(dir + QStringLiteral("/model.safetensors"));
  return weights.open(QIODevice::WriteOnly);
}

}  // namespace chat_test
