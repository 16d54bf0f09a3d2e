#pragma once
// Runs compared by what differs (as H2O LLM Studio's experiment comparison): the config keys
// whose values are not the same in every run (the resolved config of each run's start event,
// nested keys dotted, a key missing from a run counted as different), and each run's final and
// best training and eval losses side by side. Reading a run parses its whole events file: call
// compareRuns() off the GUI thread.
#include <QString>
#include <QStringList>
#include <QVector>
#include <limits>
#include <map>

namespace studio::ui {

struct ComparedRun {
  QString dir;
  QString name;                       // the folder's name
  std::map<QString, QString> config;  // flattened: "lr_scheduler_kwargs.min_lr_rate" -> "0.1"
  double finalLoss = std::numeric_limits<double>::quiet_NaN();
  double bestLoss = std::numeric_limits<double>::quiet_NaN();
  double finalEvalLoss = std::numeric_limits<double>::quiet_NaN();
  double bestEvalLoss = std::numeric_limits<double>::quiet_NaN();
  qint64 steps = 0;  // the last step logged
  QString error;     // why the run could not be read ("" when it was)
};

struct RunComparison {
  QVector<ComparedRun> runs;
  // Keys whose values differ between the runs, sorted (output_dir, different by nature, left out).
  // For a sweep, its swept keys first, in the sweep's order.
  QStringList differing;
  // When every run is a point of one sweep (studio-train sweep: the runs' common parent folder
  // holds sweep.json, docs/SWEEPS.md): its name and swept keys. The comparison then reads as a
  // table of points: one row per run, the swept keys as columns, then the losses.
  QString sweep;
  QStringList swept;

  // A run's value of a config key as shown: "(unset)" where the run has none.
  QString value(int run, const QString& key) const;
  // The comparison as CSV: a header of "key" and the run names, the loss rows (final loss, best
  // loss, final eval loss, best eval loss, steps), then one row per differing key. A sweep's:
  // a header of "run", the swept keys, the losses and the other differing keys, and one row per
  // run. RFC 4180 quoting.
  QString toCsv() const;
};

// One run folder: its start event's config and its losses (studio-train's events.jsonl or
// LLaMA-Factory's trainer_log.jsonl).
ComparedRun readComparedRun(const QString& dir);
RunComparison compareRuns(const QStringList& dirs);
// Writes `csv` to `path` atomically (whole or not at all); false with the reason in `error`.
bool writeTextAtomically(const QString& path, const QString& text, QString* error);

}  // namespace studio::ui
