#pragma once
// Worker threads that may outlive the QObject that started them. An SSH call can block for its
// whole timeout, so an owner being destroyed waits only briefly for its threads and then lets
// them finish on their own (each thread deletes itself when it ends). Whatever a thread reports
// after its owner is gone goes nowhere: it reaches the owner only through a WorkerLink, which
// the owner cuts first thing in its destructor.
#include <functional>
#include <memory>

#include <QDeadlineTimer>
#include <QMetaObject>
#include <QMutex>
#include <QObject>
#include <QPointer>
#include <QThread>

namespace studio::ui {

class WorkerLink {
 public:
  // Runs `f` (typically an emit of the owner's signal, queued to the GUI thread) unless the
  // link has been cut. The owner cannot be destroyed while `f` runs.
  template <typename F>
  void call(F&& f) {
    QMutexLocker lock(&mutex_);
    if (!cut_) f();
  }
  // Queues `f` to run on `context`'s thread unless the link has been cut (Qt drops it if
  // `context` is destroyed first). A signal emitted in `f` is emitted on the owner's thread, so
  // the owner's own slots connected to it (state such as "busy") run before any other receiver,
  // a direct one such as a QSignalSpy included; emitted from the worker they would be queued
  // while a direct receiver already saw the signal.
  template <typename F>
  void post(QObject* context, F f) {
    QMutexLocker lock(&mutex_);
    if (!cut_) QMetaObject::invokeMethod(context, std::move(f), Qt::QueuedConnection);
  }
  void cut() {
    QMutexLocker lock(&mutex_);
    cut_ = true;
  }

 private:
  QMutex mutex_;
  bool cut_ = false;
};

// Starts `work` on a new QThread that deletes itself once finished. Returns the thread, to be
// waited for with waitBriefly().
inline QPointer<QThread> startWorkerThread(std::function<void()> work) {
  QThread* thread = QThread::create(std::move(work));
  QObject::connect(thread, &QThread::finished, thread, &QObject::deleteLater);
  thread->start();
  return thread;
}

// Waits until `deadline` for the thread to finish (call on the GUI thread, where the thread
// object is deleted). A thread still blocked in a network call after that is left to end alone.
inline void waitBriefly(const QPointer<QThread>& thread, QDeadlineTimer deadline) {
  if (thread) thread->wait(deadline);
}

}  // namespace studio::ui
