#pragma once
// The few facts the runs list needs from a run's events.jsonl (how it started, its last step,
// how it ended), read incrementally. Run lists scan many folders every few seconds and an events
// file can reach gigabytes, so the first read takes only the head (for the start event) and the
// tail (for the last step and the end), and every later read only the bytes appended since.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "studio/runs/events.h"

namespace studio::ui {

class RunEventDigest {
 public:
  // Bytes read from the head of a file looking for its start event; from the end of a larger
  // file for its last step; and the gap behind the end past which reading jumps to the tail.
  static constexpr std::uint64_t kHeadBytes = std::uint64_t{1} << 20;
  static constexpr std::uint64_t kTailBytes = std::uint64_t{256} << 10;
  static constexpr std::uint64_t kJumpBytes = std::uint64_t{4} << 20;

  explicit RunEventDigest(std::string eventsPath);
  ~RunEventDigest();
  RunEventDigest(RunEventDigest&&) noexcept;
  RunEventDigest& operator=(RunEventDigest&&) noexcept;

  // Reads what was appended since the last call. A replaced or truncated file starts over.
  // A missing file is not an error (the run has not started yet).
  void update();

  bool exists() const { return exists_; }
  const std::string& path() const { return path_; }
  // The start event seen last (a resume writes another), and the time of the first one.
  const std::optional<studio::StartEvent>& lastStart() const { return start_; }
  double firstStartTime() const { return firstStartTime_; }
  // The last step event seen; 0 / NaN when there is none.
  std::int64_t lastStep() const { return lastStep_; }
  double lastLoss() const { return lastLoss_; }
  double lastEventTime() const { return lastTime_; }
  // The run's step count as its step lines say it (LLaMA-Factory's total_steps); 0 when none do.
  std::int64_t totalSteps() const { return totalSteps_; }
  // The end event, when the last start was followed by one.
  const std::optional<studio::EndEvent>& end() const { return end_; }
  // Lines skipped and fields repaired in what was read of the file (its head and what followed
  // the tail's start), since it was last read from the start.
  studio::ReadProblems problems() const;
  // A read error other than a missing file; "" when the last update read fine.
  const std::string& error() const { return error_; }
  // Bytes read from disk so far: shows that rescans of a large file stay cheap.
  std::uint64_t bytesRead() const { return bytesRead_; }

 private:
  void clearFacts();
  void startOver(std::uint64_t size);
  // A Hugging Face trainer_state.json: a whole document its reader reads again when it changes
  // (and follows to each newer checkpoint), so no head or tail is sought.
  void updateTrainerState();
  void readHead(std::uint64_t size);
  void seekTail(std::uint64_t size);
  void poll();
  void ingest(const studio::Event& event);

  std::string path_;
  std::int64_t totalSteps_ = 0;
  std::unique_ptr<studio::EventFileReader> reader_;
  std::uint64_t device_ = 0;
  std::uint64_t inode_ = 0;
  bool exists_ = false;
  std::optional<studio::StartEvent> start_;
  double firstStartTime_ = studio::kNoValue;
  std::int64_t lastStep_ = 0;
  double lastLoss_ = studio::kNoValue;
  double lastTime_ = studio::kNoValue;
  std::optional<studio::EndEvent> end_;
  studio::ReadProblems headProblems_;  // of the head read apart when the tail was sought
  std::string error_;
  std::uint64_t bytesRead_ = 0;
};

}  // namespace studio::ui
