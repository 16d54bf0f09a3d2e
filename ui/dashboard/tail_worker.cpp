#include "tail_worker.h"

#include <algorithm>
#include <cmath>

#include <QFileInfo>
#include <QTimer>

namespace studio::ui {

TailWorker::TailWorker(const std::string& eventsPath, const studio::EventCursor& from,
                       int intervalMs, std::atomic<int>& inFlight)
    : reader_(eventsPath),
      intervalMs_(intervalMs),
      inFlight_(inFlight),
      eventsPath_(QString::fromStdString(eventsPath)) {
  reader_.set_cursor(from);
}

void TailWorker::start() {
  if (timer_ != nullptr) return;
  timer_ = new QTimer(this);  // created here so that it belongs to the worker's thread
  timer_->setInterval(intervalMs_);
  connect(timer_, &QTimer::timeout, this, &TailWorker::poll);
  timer_->start();
  poll();
}

void TailWorker::poll() {
  if (inFlight_.load() > 0) return;
  // Nothing read yet and no such file: which file the folder's events are in may change (a
  // LLaMA-Factory run writes trainer_log.jsonl only once training starts).
  if (reader_.cursor().offset == 0 && !QFileInfo::exists(eventsPath_)) {
    const std::string now = studio::run_events_file(studio::run_folder_of(eventsPath_.toStdString()));
    if (QString::fromStdString(now) != eventsPath_) {
      reader_ = studio::EventFileReader(now);
      eventsPath_ = QString::fromStdString(now);
    }
  }
  const std::uint64_t fedBefore = reader_.parser().fed();
  studio::EventPollResult result = reader_.poll(kMaxBytesPerPoll);
  // A trainer_state.json reader moves on to each newer checkpoint's file.
  eventsPath_ = QString::fromStdString(reader_.path());
  if (reader_.parser().format() == studio::LineFormat::TrainerLog) amendFromTrainerState(result);

  TailBatch out;
  out.restarted = result.restarted;
  out.restartReason = QString::fromStdString(result.restart_reason);
  QString error = QString::fromStdString(result.error);
  // A file read before and gone now: its folder was deleted or moved while shown. The reader
  // waits for it to come back; the user is told why nothing more arrives.
  if (error.isEmpty() && result.events.empty() && reader_.cursor().offset > 0 &&
      !QFileInfo::exists(eventsPath_))
    error = QStringLiteral("%1 is gone: its run folder %2 was deleted or moved; the charts show "
                           "what was read before")
                .arg(eventsPath_, QFileInfo(eventsPath_).absolutePath());
  if (error != lastError_) out.error = error;
  lastError_ = error;
  // After a restart fed() starts again from 0, so compare against 0 then.
  const studio::ReadProblems& problems = reader_.problems();
  if (problems != lastProblems_) {
    lastProblems_ = problems;
    out.problems = QString::fromStdString(
        problems.summary(QFileInfo(eventsPath_).fileName().toStdString()));
  }
  const std::uint64_t base = result.restarted ? 0 : fedBefore;
  out.more = result.error.empty() && reader_.parser().fed() - base >= kMaxBytesPerPoll;
  if (result.events.empty() && !out.restarted && out.error.isEmpty() && out.problems.isEmpty())
    return;

  // The dashboard draws from the parsed fields: the JSON copy of each line goes here, on this
  // thread (a huge file would otherwise hold it all on the GUI's), except for the kinds only it
  // describes.
  for (studio::Event& event : result.events)
    if (event.kind != studio::EventKind::Unknown) event.raw = nullptr;

  out.events =
      std::make_shared<const std::vector<studio::Event>>(std::move(result.events));
  out.cursor = reader_.cursor();
  inFlight_.fetch_add(1);
  emit batch(out);
}

void TailWorker::amendFromTrainerState(studio::EventPollResult& result) {
  if (result.restarted) lastStepRead_ = amendedUpTo_ = -1;  // the series start over
  for (const studio::Event& event : result.events) {
    const auto* step = event.get<studio::StepEvent>();
    if (step == nullptr) continue;
    // A resumed run logs earlier steps again: the rows from there on are replaced, and lose
    // what was added to them.
    if (step->step <= amendedUpTo_) amendedUpTo_ = step->step - 1;
    lastStepRead_ = std::max(lastStepRead_, step->step);
  }
  if (!stateReader_) {
    const std::string folder = studio::run_folder_of(reader_.path());
    stateReader_.emplace(folder + "/" + studio::kTrainerStateFileName);
  }
  studio::EventPollResult state = stateReader_->poll();
  if (!state.events.empty()) {
    stateSteps_.clear();
    for (const studio::Event& event : state.events) {
      const auto* step = event.get<studio::StepEvent>();
      if (step == nullptr) continue;
      const studio::DpoMetrics dpo = step->dpo.value_or(studio::DpoMetrics{});
      // A value, or one written as NaN or Infinity (a diverged step's, marked as such).
      auto seen = [&](double v, studio::StepValue bit) {
        return !std::isnan(v) || step->written_not_finite(bit);
      };
      const bool norm = seen(step->grad_norm, studio::StepValue::GradNorm);
      const bool rejected = seen(dpo.rewards_rejected, studio::StepValue::RewardsRejected);
      const bool margins = seen(dpo.rewards_margins, studio::StepValue::RewardsMargins);
      const bool kl = seen(dpo.kl, studio::StepValue::Kl);  // KTO's, in trainer_state only
      if (!norm && !rejected && !margins && !kl) continue;
      studio::StepEvent only;  // what the log lacks, and nothing it has
      only.step = step->step;
      only.grad_norm = step->grad_norm;
      if (step->written_not_finite(studio::StepValue::GradNorm))
        only.set_not_finite(studio::StepValue::GradNorm);
      if (rejected || margins || kl) {
        studio::DpoMetrics extra;
        extra.rewards_rejected = dpo.rewards_rejected;
        extra.rewards_margins = dpo.rewards_margins;
        extra.kl = dpo.kl;
        only.dpo = extra;
        if (step->written_not_finite(studio::StepValue::RewardsRejected))
          only.set_not_finite(studio::StepValue::RewardsRejected);
        if (step->written_not_finite(studio::StepValue::RewardsMargins))
          only.set_not_finite(studio::StepValue::RewardsMargins);
        if (step->written_not_finite(studio::StepValue::Kl))
          only.set_not_finite(studio::StepValue::Kl);
      }
      stateSteps_.push_back(std::move(only));
    }
  }
  std::int64_t upTo = amendedUpTo_;
  for (const studio::StepEvent& step : stateSteps_) {
    if (step.step <= amendedUpTo_ || step.step > lastStepRead_) continue;
    studio::Event event;
    event.kind = studio::EventKind::Step;
    event.payload = step;
    event.amends = true;
    result.events.push_back(std::move(event));
    upTo = std::max(upTo, step.step);
  }
  amendedUpTo_ = upTo;
}

}  // namespace studio::ui
