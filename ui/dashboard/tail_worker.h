#pragma once
// The reading half of EventTailer, living on the tailer's thread. Private to studio_dashboard.
#include <atomic>
#include <memory>
#include <optional>
#include <vector>

#include <QMetaType>
#include <QObject>
#include <QString>

#include "studio/runs/events.h"

class QTimer;

namespace studio::ui {

// What one poll found, sent to the GUI thread.
struct TailBatch {
  std::shared_ptr<const std::vector<studio::Event>> events;
  studio::EventCursor cursor;  // after these events
  bool restarted = false;
  QString restartReason;
  QString error;      // a new read error, or empty
  // What reading has skipped or repaired so far (ReadProblems::summary), when that changed
  // with this batch; empty otherwise.
  QString problems;
  bool more = false;  // the poll stopped at its byte limit: there is more to read right away
};

class TailWorker : public QObject {
  Q_OBJECT

 public:
  // Bytes read per poll at most, so a huge file arrives in batches the GUI can take one by one.
  // 1 MiB: some 10-40 ms of parsing, the longest a run switch waits for a poll in progress.
  static constexpr std::size_t kMaxBytesPerPoll = std::size_t{1} << 20;

  // `inFlight` counts batches sent and not yet delivered; the worker does not read further
  // while one is pending, so a slow GUI is never buried under queued events.
  TailWorker(const std::string& eventsPath, const studio::EventCursor& from, int intervalMs,
             std::atomic<int>& inFlight);

  // Runs on the worker thread: starts the timer and polls once.
  void start();
  void poll();

 signals:
  void batch(const studio::ui::TailBatch& batch);

 private:
  studio::EventFileReader reader_;
  int intervalMs_;
  std::atomic<int>& inFlight_;
  QTimer* timer_ = nullptr;
  QString eventsPath_;
  QString lastError_;
  studio::ReadProblems lastProblems_;

  // LLaMA-Factory's trainer_log.jsonl lacks what Hugging Face's trainer_state.json (written at
  // each checkpoint) keeps: the gradient norm, DPO's rejected reward and margin. Those come as
  // amending step events (Event::amends) for the steps the log has given.
  void amendFromTrainerState(studio::EventPollResult& result);
  std::optional<studio::EventFileReader> stateReader_;
  std::vector<studio::StepEvent> stateSteps_;  // steps of the last state read with such fields
  std::int64_t lastStepRead_ = -1;  // the log's last step delivered
  std::int64_t amendedUpTo_ = -1;   // amendments delivered for steps up to here
};

}  // namespace studio::ui

Q_DECLARE_METATYPE(studio::ui::TailBatch)
