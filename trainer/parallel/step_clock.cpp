#include "studio/trainer/parallel/step_clock.h"

#include <mutex>

#include <c10/core/impl/VirtualGuardImpl.h>

namespace studio::trainer::dist {

namespace {

thread_local int tl_kind = -1;   // the innermost TimeKindScope's kind; -1: none
thread_local int tl_depth = 0;   // spans open on this thread

}  // namespace

TimeKindScope::TimeKindScope(StepTime kind) : previous_(tl_kind) {
  tl_kind = static_cast<int>(kind);
}

TimeKindScope::~TimeKindScope() { tl_kind = previous_; }

StepTime time_kind_now(StepTime fallback) {
  return tl_kind >= 0 ? static_cast<StepTime>(tl_kind) : fallback;
}

StepClock& StepClock::instance() {
  static StepClock clock;
  return clock;
}

void StepClock::start(const torch::Device& device) {
  const std::lock_guard<std::mutex> lock(mutex_);
  device_ = device;
  cuda_ = device.is_cuda();
  host_ = {};
  device_spans_.clear();
  counting_ = true;
}

void StepClock::stop() {
  const std::lock_guard<std::mutex> lock(mutex_);
  counting_ = false;
  host_ = {};
  device_spans_.clear();
}

bool StepClock::counting() const { return counting_; }

c10::Event StepClock::record() const {
  // BACKEND_DEFAULT: a CUDA event with timing (PYTORCH_DEFAULT turns timing off).
  c10::Event e(device_.type(), c10::EventFlag::BACKEND_DEFAULT);
  const c10::impl::VirtualGuardImpl guard(device_.type());
  e.record(guard.getStream(device_));
  return e;
}

StepClock::Span::Span(StepTime kind) : kind_(kind) {
  StepClock& clock = instance();
  if (!clock.counting_) return;
  entered_ = true;
  if (tl_depth++ > 0) return;
  active_ = true;
  if (clock.cuda_)
    event_.emplace(clock.record());
  else
    began_ = std::chrono::steady_clock::now();
}

StepClock::Span::~Span() {
  if (!entered_) return;
  --tl_depth;
  if (!active_) return;
  StepClock& clock = instance();
  const auto k = static_cast<size_t>(kind_);
  try {
    if (event_) {
      c10::Event ended = clock.record();
      const std::lock_guard<std::mutex> lock(clock.mutex_);
      clock.device_spans_.push_back({kind_, std::move(*event_), std::move(ended)});
    } else {
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - began_).count();
      const std::lock_guard<std::mutex> lock(clock.mutex_);
      clock.host_[k] += s;
    }
  } catch (...) {
    // A device that fails to record an event is failing the step: its error is what counts.
  }
}

std::array<double, kStepTimeKinds> StepClock::take() {
  std::vector<DeviceSpan> spans;
  std::array<double, kStepTimeKinds> out{};
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    out = host_;
    spans.swap(device_spans_);
    host_ = {};
  }
  for (const DeviceSpan& s : spans) {
    s.ended.synchronize();
    out[static_cast<size_t>(s.kind)] += s.began.elapsedTime(s.ended) / 1000.0;  // ms
  }
  return out;
}

}  // namespace studio::trainer::dist
