#pragma once
// Follows one run folder's events.jsonl from a worker thread: an EventFileReader polled by a
// timer on a QThread the tailer owns, so the GUI thread never touches the file. New events come
// back through a queued connection, in order, in batches; the cursor of the last batch delivered
// is what a caller persists to resume after a restart without losing or repeating an event.
#include <atomic>
#include <memory>
#include <vector>

#include <QObject>
#include <QString>
#include <QThread>

#include "studio/runs/events.h"

namespace studio::ui {

class TailWorker;
struct TailBatch;

class EventTailer : public QObject {
  Q_OBJECT

 public:
  static constexpr int kDefaultIntervalMs = 250;

  // Follows runDir/events.jsonl from `from` (the start of the file by default), polling every
  // intervalMs. Nothing is read before start().
  explicit EventTailer(const QString& runDir, const studio::EventCursor& from = {},
                       int intervalMs = kDefaultIntervalMs, QObject* parent = nullptr);
  // Stops the worker thread and waits for it: a poll in progress finishes first.
  ~EventTailer() override;

  // Starts the worker thread: it polls at once, then every interval. Calling it again is a no-op.
  void start();
  // Asks for a poll now instead of at the next tick (e.g. a "refresh" button).
  void pollNow();

  QString runDir() const { return runDir_; }
  QString eventsPath() const { return eventsPath_; }
  // Where reading stands after the last batch delivered on this (the GUI) thread.
  studio::EventCursor cursor() const { return cursor_; }
  bool isRunning() const { return thread_.isRunning(); }

 Q_SIGNALS:
  // New complete events, in file order. After restarted() they start again at the first line.
  void eventsRead(QString runDir, std::shared_ptr<const std::vector<studio::Event>> events);
  // The file shrank or was replaced (another inode): what was read so far belongs to the old
  // file, and reading starts again from byte 0. `reason` names the file and what happened.
  void restarted(QString runDir, QString reason);
  // A read failed (permissions, I/O). Sent once per distinct message; polling goes on.
  void readError(QString runDir, QString message);
  // Reading skipped lines or repaired fields (a field of an unexpected type converted or
  // dropped, the rest of its line kept): `summary` says how many, and the first case with its
  // line number (studio::ReadProblems::summary). Sent when the counts change.
  void readProblems(QString runDir, QString summary);

 private:
  void deliver(const TailBatch& batch);

  QString runDir_;
  QString eventsPath_;
  QThread thread_;
  TailWorker* worker_ = nullptr;  // lives on thread_, deleted when it finishes (or by us)
  std::atomic<int> inFlight_{0};  // batches sent by the worker and not delivered yet
  studio::EventCursor cursor_;
};

}  // namespace studio::ui
