#include "studio/ui/runs/run_comparison.h"

#include <QDir>
#include <QFileInfo>
#include <QSaveFile>

#include <unistd.h>

#include <cmath>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "studio/base/atomic_file.h"
#include "studio/config/sweep.h"
#include "studio/runs/events.h"
#include "studio/ui/base/local_path.h"
#include "studio/ui/runs/remote_mirror.h"

namespace studio::ui {
namespace {

void flatten(const nlohmann::json& j, const std::string& prefix, std::map<QString, QString>& out) {
  if (j.is_object() && !j.empty()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
    return;
  }
  const std::string text = j.is_string() ? j.get<std::string>() : j.dump();
  out[QString::fromStdString(prefix)] = QString::fromStdString(text);
}

QString number(double v) {
  return std::isfinite(v) ? QString::number(v, 'g', 6) : QString();
}

QString csvField(const QString& s) {
  if (!s.contains(QLatin1Char(',')) && !s.contains(QLatin1Char('"')) &&
      !s.contains(QLatin1Char('\n')))
    return s;
  QString quoted = s;
  quoted.replace(QLatin1String("\""), QLatin1String("\"\""));
  return QLatin1Char('"') + quoted + QLatin1Char('"');
}

void keepLeast(double& best, double v) {
  if (std::isfinite(v) && (!std::isfinite(best) || v < best)) best = v;
}

}  // namespace

QString RunComparison::value(int run, const QString& key) const {
  const auto& config = runs[run].config;
  const auto it = config.find(key);
  return it == config.end() ? QStringLiteral("(unset)") : it->second;
}

QString RunComparison::toCsv() const {
  QStringList lines;
  if (!swept.isEmpty()) {
    QStringList header{QStringLiteral("run")};
    for (const QString& key : differing) header << csvField(key);
    header << QStringLiteral("final loss") << QStringLiteral("best loss")
           << QStringLiteral("final eval loss") << QStringLiteral("best eval loss")
           << QStringLiteral("steps");
    lines << header.join(QLatin1Char(','));
    for (int i = 0; i < runs.size(); ++i) {
      const ComparedRun& r = runs[i];
      QStringList cells{csvField(r.name)};
      for (const QString& key : differing) cells << csvField(value(i, key));
      cells << number(r.finalLoss) << number(r.bestLoss) << number(r.finalEvalLoss)
            << number(r.bestEvalLoss) << QString::number(r.steps);
      lines << cells.join(QLatin1Char(','));
    }
    return lines.join(QLatin1Char('\n')) + QLatin1Char('\n');
  }
  QStringList header{QStringLiteral("key")};
  for (const ComparedRun& r : runs) header << csvField(r.name);
  lines << header.join(QLatin1Char(','));
  auto row = [&](const QString& key, auto field) {
    QStringList cells{csvField(key)};
    for (const ComparedRun& r : runs) cells << csvField(field(r));
    lines << cells.join(QLatin1Char(','));
  };
  row(QStringLiteral("final loss"), [](const ComparedRun& r) { return number(r.finalLoss); });
  row(QStringLiteral("best loss"), [](const ComparedRun& r) { return number(r.bestLoss); });
  row(QStringLiteral("final eval loss"), [](const ComparedRun& r) { return number(r.finalEvalLoss); });
  row(QStringLiteral("best eval loss"), [](const ComparedRun& r) { return number(r.bestEvalLoss); });
  row(QStringLiteral("steps"), [](const ComparedRun& r) { return QString::number(r.steps); });
  for (const QString& key : differing) {
    QStringList cells{csvField(key)};
    for (int i = 0; i < runs.size(); ++i) cells << csvField(value(i, key));
    lines << cells.join(QLatin1Char(','));
  }
  return lines.join(QLatin1Char('\n')) + QLatin1Char('\n');
}

ComparedRun readComparedRun(const QString& dir) {
  ComparedRun run;
  run.dir = dir;
  run.name = QFileInfo(dir).fileName();
  const std::string file = studio::run_events_file(localPath(dir));
  // Only a regular file: a FIFO or a link to /dev/zero in its place would hang the comparison.
  std::string why;
  const int fd = studio::open_regular_file(file, why);
  if (fd >= 0) ::close(fd);
  std::ifstream in(file, std::ios::binary);
  if (fd < 0 || !in) {
    run.error = fd < 0 ? QString::fromStdString(why)
                       : QStringLiteral("cannot read %1").arg(QString::fromStdString(file));
    return run;
  }
  const bool trainerLog = studio::line_format_of(file) == studio::LineFormat::TrainerLog;
  std::string line, error;
  std::vector<studio::Event> events;
  while (std::getline(in, line)) {
    events.clear();
    if (trainerLog) {
      if (!studio::parse_trainer_log_line(line, events, error)) continue;
    } else {
      studio::Event e;
      if (!studio::parse_event_line(line, e, error)) continue;  // a bad line costs only itself
      events.push_back(std::move(e));
    }
    for (const studio::Event& e : events) {
      if (const auto* start = e.get<studio::StartEvent>()) {
        run.config.clear();
        flatten(start->config, "", run.config);
      } else if (const auto* step = e.get<studio::StepEvent>()) {
        run.steps = std::max<qint64>(run.steps, step->step);
        if (std::isfinite(step->loss)) run.finalLoss = step->loss;
        keepLeast(run.bestLoss, step->loss);
      } else if (const auto* eval = e.get<studio::EvalEvent>()) {
        if (std::isfinite(eval->loss)) run.finalEvalLoss = eval->loss;
        keepLeast(run.bestEvalLoss, eval->loss);
      }
    }
  }
  return run;
}

RunComparison compareRuns(const QStringList& dirs) {
  RunComparison c;
  for (const QString& dir : dirs) c.runs << readComparedRun(dir);
  // One sweep's points: its keys lead, in its order.
  QString parent;
  for (const QString& dir : dirs) {
    const QString p = QFileInfo(QDir::cleanPath(dir)).path();
    parent = parent.isNull() || parent == p ? p : QString();
    if (parent.isEmpty()) break;
  }
  if (!parent.isEmpty() &&
      QFileInfo::exists(QString::fromStdString(localPath(parent)) + QLatin1Char('/') +
                        QString::fromLatin1(studio::kSweepFileName))) {
    try {
      const studio::SweepFile sweep = studio::read_sweep(localPath(parent));
      c.sweep = QString::fromStdString(sweep.name);
      for (const studio::SweepAxis& a : sweep.spec.axes) c.swept << QString::fromStdString(a.key);
    } catch (const std::exception&) {
      // Not readable as a sweep: compared as plain runs.
    }
  }
  // The points of a sweep submitted as a Slurm job array, mirrored here: each record names
  // the sweep and its keys.
  if (c.swept.isEmpty() && dirs.size() >= 2) {
    std::string id;
    studio::remote::RemoteRunRecord first;
    bool same = true;
    for (const QString& dir : dirs) {
      if (!QFileInfo::exists(QDir(dir).filePath(QString::fromLatin1(studio::kRemoteRecordFileName)))) {
        same = false;
        break;
      }
      try {
        const studio::remote::RemoteRunRecord r = RemoteMirror(dir).readRecord();
        if (r.sweep_id.empty() || (!id.empty() && r.sweep_id != id)) same = false;
        if (id.empty()) first = r;
        id = r.sweep_id;
      } catch (const std::exception&) {
        same = false;
      }
      if (!same) break;
    }
    if (same && !id.empty()) {
      c.sweep = QString::fromStdString(first.sweep_name.empty() ? first.sweep_id : first.sweep_name);
      for (const std::string& key : first.sweep_keys) c.swept << QString::fromStdString(key);
    }
  }
  c.differing = c.swept;
  std::set<QString> keys;
  for (const ComparedRun& r : c.runs)
    for (const auto& [key, value] : r.config) keys.insert(key);
  for (const QString& key : keys) {
    if (key == QLatin1String("output_dir") || c.swept.contains(key)) continue;
    for (int i = 1; i < c.runs.size(); ++i)
      if (c.value(i, key) != c.value(0, key)) {
        c.differing << key;
        break;
      }
  }
  return c;
}

bool writeTextAtomically(const QString& path, const QString& text, QString* error) {
  QSaveFile f(path);
  const QByteArray bytes = text.toUtf8();
  if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size() || !f.commit()) {
    if (error) *error = QStringLiteral("cannot write %1: %2").arg(path, f.errorString());
    return false;
  }
  return true;
}

}  // namespace studio::ui
