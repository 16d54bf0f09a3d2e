#pragma once
// Reads the run folders on RunStore's thread. Private to studio_runs: RunStore is the interface.
#include <map>

#include <QObject>
#include <QStringList>
#include <QVector>

#include "studio/ui/runs/run_event_digest.h"
#include "studio/ui/runs/run_info.h"

namespace studio::ui {

class RunScanner : public QObject {
  Q_OBJECT

 public:
  // Every run folder directly under `root`, and the points of every sweep folder there
  // (studio-train sweep; those not started yet as Queued), plus `added` (listed even when their files are gone, so the
  // user sees why; an added sweep folder stands for its points), minus `hidden`; newest
  // first, each sweep's points together in point order.
  void scan(const QString& root, const QStringList& added, const QStringList& hidden);
  // The point folders of a sweep folder, in name order: those sweep.json names, started or
  // not, and any other run folder in it; none when `dir` holds no sweep.json.
  static QStringList sweepPoints(const QString& dir);
  // Moves each sweep's points next to its newest one, in point order.
  static void groupSweeps(QVector<RunInfo>& runs);

 signals:
  void scanned(const QVector<studio::ui::RunInfo>& runs);

 private:
  // One per run seen in the last scan: rescans read only what was appended to events.jsonl.
  std::map<QString, RunEventDigest> digests_;
};

// Newest first: by start (or launch) time, then by last update, then by folder name.
bool newerFirst(const RunInfo& a, const RunInfo& b);

}  // namespace studio::ui
