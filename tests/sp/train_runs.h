#pragma once
// What the end-to-end training tests (tst_sp_equivalence, tst_zero) share: running studio-train
// with every collective verified, reading a run's events, and comparing two saved models.
#include <QtCore/QFile>
#include <QtCore/QJsonDocument>
#include <QtCore/QJsonObject>
#include <QtCore/QProcess>
#include <QtCore/QString>
#include <QtCore/QStringList>

#include <algorithm>
#include <cmath>
#include <vector>

#include "studio/trainer/hf_checkpoint.h"

namespace train_runs {

struct Run {
  int code = -1;
  QString err;
};

// STUDIO_TRAIN_EXE with `args`; STUDIO_VERIFY_COLLECTIVES=1, so that ranks reaching different
// operations fail with both named instead of exchanging mismatched buffers.
inline Run run(const QStringList& args, int timeout_ms = 300000) {
  QProcess p;
  auto env = QProcessEnvironment::systemEnvironment();
  env.insert("STUDIO_VERIFY_COLLECTIVES", "1");
  p.setProcessEnvironment(env);
  p.setProcessChannelMode(QProcess::SeparateChannels);
  p.start(QStringLiteral(STUDIO_TRAIN_EXE), args);
  if (!p.waitForFinished(timeout_ms)) {
    p.kill();
    p.waitForFinished();
    return {-1, "timed out: " + QString::fromUtf8(p.readAllStandardError())};
  }
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAllStandardError())};
}

// Every event line of a run folder, in order.
inline std::vector<QJsonObject> events(const QString& dir) {
  std::vector<QJsonObject> out;
  QFile f(dir + "/events.jsonl");
  if (!f.open(QIODevice::ReadOnly)) return out;
  for (const QByteArray& line : f.readAll().split('\n'))
    if (!line.trimmed().isEmpty()) out.push_back(QJsonDocument::fromJson(line).object());
  return out;
}

// max |a - b| / max |a| over the whole parameter vector of two saved models (the relative error
// in the infinity norm); infinite when b lacks a tensor of a.
inline double max_relative_param_error(const QString& a_dir, const QString& b_dir) {
  auto a = studio::trainer::CheckpointReader::open(a_dir.toStdString());
  auto b = studio::trainer::CheckpointReader::open(b_dir.toStdString());
  double diff = 0, scale = 0;
  for (const auto& name : a.names()) {
    if (!b.has(name)) return INFINITY;
    auto ta = a.tensor(name).to(torch::kDouble), tb = b.tensor(name).to(torch::kDouble);
    diff = std::max(diff, (ta - tb).abs().max().item<double>());
    scale = std::max(scale, ta.abs().max().item<double>());
  }
  return diff / std::max(scale, 1e-30);
}

}  // namespace train_runs
