#pragma once
// Slow work of a wizard page (reading a model or data folder, tokenizing the preview, estimating
// memory) on QtConcurrent's pool, one run at a time. A request made while one runs waits; when
// the running one finishes its result is dropped because newer inputs are pending, and only the
// newest request's result reaches the GUI thread. Private to studio_wizard.
#include <functional>
#include <utility>

#include <QFutureWatcher>
#include <QObject>
#include <QtConcurrent/QtConcurrentRun>

namespace studio::ui {

template <class Result>
class LatestJob {
 public:
  using Work = std::function<Result()>;

  // `deliver` runs on `context`'s thread with the newest request's result. The work must capture
  // everything by value: after the owner is gone, a running job finishes in the pool unobserved.
  LatestJob(QObject* context, std::function<void(const Result&)> deliver)
      : deliver_(std::move(deliver)) {
    QObject::connect(&watcher_, &QFutureWatcherBase::finished, context, [this] { finished(); });
  }
  LatestJob(const LatestJob&) = delete;
  LatestJob& operator=(const LatestJob&) = delete;

  // Replaces any request that has not started yet.
  void request(Work work) {
    pending_ = std::move(work);
    if (!running_) startPending();
  }
  // True until the newest request's result has been delivered.
  bool busy() const { return running_ || static_cast<bool>(pending_); }

 private:
  void startPending() {
    Work work = std::move(pending_);
    pending_ = nullptr;
    running_ = true;
    watcher_.setFuture(QtConcurrent::run(std::move(work)));
  }
  void finished() {
    running_ = false;
    if (pending_) {
      startPending();  // the inputs changed meanwhile: this result is stale
      return;
    }
    deliver_(watcher_.result());
  }

  QFutureWatcher<Result> watcher_;
  Work pending_;
  bool running_ = false;
  std::function<void(const Result&)> deliver_;
};

}  // namespace studio::ui
