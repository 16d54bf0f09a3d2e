#include "studio/ui/dashboard/event_tailer.h"

#include <QDir>
#include <QFile>

#include "studio/ui/base/local_path.h"
#include "tail_worker.h"

namespace studio::ui {

EventTailer::EventTailer(const QString& runDir, const studio::EventCursor& from, int intervalMs,
                         QObject* parent)
    : QObject(parent),
      runDir_(runDir),
      // events.jsonl, or LLaMA-Factory's trainer_log.jsonl in a folder only it wrote
      eventsPath_(QFile::decodeName(
          QByteArray::fromStdString(studio::run_events_file(localPath(runDir))))),
      cursor_(from) {
  qRegisterMetaType<TailBatch>();
  thread_.setObjectName(QStringLiteral("event-tailer"));
  worker_ = new TailWorker(localPath(eventsPath_), from, intervalMs, inFlight_);
  worker_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
  connect(worker_, &TailWorker::batch, this, &EventTailer::deliver, Qt::QueuedConnection);
}

EventTailer::~EventTailer() {
  if (thread_.isRunning()) {
    thread_.quit();
    thread_.wait();  // the worker is deleted as the thread finishes
  } else if (!thread_.isFinished()) {
    delete worker_;  // never started: no thread to delete it
  }
}

void EventTailer::start() {
  if (thread_.isRunning()) return;
  thread_.start();
  QMetaObject::invokeMethod(worker_, &TailWorker::start, Qt::QueuedConnection);
}

void EventTailer::pollNow() {
  QMetaObject::invokeMethod(worker_, &TailWorker::poll, Qt::QueuedConnection);
}

void EventTailer::deliver(const TailBatch& batch) {
  inFlight_.fetch_sub(1);
  cursor_ = batch.cursor;
  if (batch.restarted) emit restarted(runDir_, batch.restartReason);
  if (!batch.error.isEmpty()) emit readError(runDir_, batch.error);
  if (!batch.problems.isEmpty()) emit readProblems(runDir_, batch.problems);
  if (!batch.events->empty()) emit eventsRead(runDir_, batch.events);
  // Catching up on a large file: read the next piece as soon as this one is taken.
  if (batch.more) pollNow();
}

}  // namespace studio::ui
