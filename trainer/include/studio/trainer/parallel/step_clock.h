#pragma once
// Where a rank's step time goes (docs/events.md, "Where the time goes"): the time its work was
// held up by sequence-parallel communication, by gradient reduction and gathering, by building
// and copying its data, and at the step's small sums where it waits for the other ranks. The
// rest of the step is compute. One clock per process (studio-train runs one rank per process):
// the training thread starts it, and spans on any thread count (on CUDA the backward, with its
// SP and ZeRO communication, runs on autograd's device thread). Only training code opens spans
// and issues counted collectives; a checkpoint writer or the watchdog adds nothing.
//
// Communication is measured where its wait is (dist::Pending::wait), so what overlaps with
// compute costs nothing and what holds the step up counts, a late peer included. On a CPU that
// is the host's time blocked in the wait. On CUDA the host does not block in a wait (NCCL makes
// the stream wait), so each span records a pair of device events on the current stream and the
// span is the stream's time between them, read when the step's time is taken (after the step's
// one wait for the device, so reading them costs no extra sync).
#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <vector>

#include <c10/core/Event.h>
#include <torch/torch.h>

namespace studio::trainer::dist {

enum class StepTime : int { Data = 0, SpComm, GradComm, Wait };
inline constexpr int kStepTimeKinds = 4;

// Collectives issued on this thread inside the scope are counted as `kind` when waited for
// (ZeRO's gathers and reductions run on the world group, whose own kind is Wait).
class TimeKindScope {
 public:
  explicit TimeKindScope(StepTime kind);
  ~TimeKindScope();
  TimeKindScope(const TimeKindScope&) = delete;
  TimeKindScope& operator=(const TimeKindScope&) = delete;

 private:
  int previous_;
};

// The kind of a collective issued now on this thread: the innermost TimeKindScope's, else
// `fallback` (its group's: SP groups count as SpComm, the world and DP groups as Wait).
StepTime time_kind_now(StepTime fallback);

class StepClock {
 public:
  // The process's clock.
  static StepClock& instance();

  // Counts from now, for `device`'s work.
  void start(const torch::Device& device);
  // Stops counting (the run ended); what was counted is dropped.
  void stop();
  // Whether spans count.
  bool counting() const;

  // Measures the enclosing block as `kind` when counting; nested spans count once (the
  // outermost one).
  class Span {
   public:
    explicit Span(StepTime kind);
    ~Span();
    Span(const Span&) = delete;
    Span& operator=(const Span&) = delete;

   private:
    StepTime kind_;
    bool entered_ = false;  // counted in the thread's depth
    bool active_ = false;   // the outermost: measures
    std::chrono::steady_clock::time_point began_;
    std::optional<c10::Event> event_;  // CUDA: the event recorded when the span began
  };

  // The seconds counted per kind (StepTime order) since the previous take, and starts over.
  // On CUDA this waits for the spans' events (the device has finished them when the step's
  // loss has been read).
  std::array<double, kStepTimeKinds> take();

 private:
  StepClock() = default;
  struct DeviceSpan {
    StepTime kind;
    c10::Event began, ended;
  };
  c10::Event record() const;  // an event on the device's current stream, timing on

  std::array<double, kStepTimeKinds> host_{};
  std::vector<DeviceSpan> device_spans_;
  torch::Device device_{torch::kCPU};
  bool cuda_ = false;
  std::atomic<bool> counting_{false};
  std::mutex mutex_;  // guards host_ and device_spans_
  friend class Span;
};

}  // namespace studio::trainer::dist
