#pragma once
// What the tests of a training stage against LLaMA-Factory's own code share
// (tst_rm_reference, tst_kto_reference): words for their tiny datasets, running a process
// (studio-train, LF's interpreter) with input on stdin, and reading a run's events.
#include <QFile>
#include <QProcess>
#include <QProcessEnvironment>
#include <QStringList>

#include <vector>

#include <nlohmann/json.hpp>

namespace lf_stage_reference {

inline const QStringList& word_list() {
  static const QStringList words{"alpha", "river", "stone", "green", "moves", "under",
                                 "seven", "light", "quick", "table", "north", "sings"};
  return words;
}

// `n` words of word_list() from a place that depends on `i` and `stride`.
inline QString words(int i, int n, int stride) {
  QStringList w;
  for (int k = 0; k < n; ++k) w << word_list()[(i * 7 + k * stride) % word_list().size()];
  return w.join(' ');
}

struct Proc {
  int code = -1;  // -1: did not start, timed out or crashed
  QString out, err;
};

// Runs `program` (HF_HUB_OFFLINE=1) with `input` on stdin; killed after `timeout_ms`.
inline Proc run(const QString& program, const QStringList& args, const QByteArray& input = {},
                int timeout_ms = 240000) {
  QProcess p;
  auto env = QProcessEnvironment::systemEnvironment();
  env.insert("HF_HUB_OFFLINE", "1");
  p.setProcessEnvironment(env);
  p.start(program, args);
  if (!p.waitForStarted(30000))
    return {-1, {}, program + " did not start (" + p.errorString() + ")"};
  p.write(input);
  p.closeWriteChannel();
  if (!p.waitForFinished(timeout_ms)) {
    p.kill();
    p.waitForFinished();
    return {-1, {}, "timed out: " + QString::fromUtf8(p.readAllStandardError())};
  }
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAllStandardOutput()),
          QString::fromUtf8(p.readAllStandardError())};
}

// Every line of a run folder's events.jsonl, parsed.
inline std::vector<nlohmann::json> events(const QString& dir) {
  std::vector<nlohmann::json> out;
  QFile f(dir + "/events.jsonl");
  if (!f.open(QIODevice::ReadOnly)) return out;
  for (const QByteArray& line : f.readAll().split('\n'))
    if (!line.trimmed().isEmpty()) out.push_back(nlohmann::json::parse(line.toStdString()));
  return out;
}

}  // namespace lf_stage_reference
