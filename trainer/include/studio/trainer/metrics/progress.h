#pragma once
// The terminal view of a run: a progress bar redrawn in place on a terminal, one plain line per
// report otherwise (logs, CI, the studio's log console).
#include <cstdint>
#include <cstdio>
#include <string>

namespace studio::trainer {

struct ProgressLine {
  int64_t step = 0;
  double loss = 0;
  double tokens_per_sec = 0;
  double lr = 0;
};

class ProgressBar {
 public:
  // `first_step`: the step a resumed run starts from, so the ETA uses this run's pace only.
  ProgressBar(int64_t total_steps, int64_t first_step, bool terminal, std::FILE* out = stderr);
  void update(const ProgressLine& line, double elapsed_seconds);
  // Prints a message without breaking the bar.
  void message(const std::string& text);
  void finish();

  // "1:02:03" / "4:05"
  static std::string format_duration(double seconds);
  std::string render(const ProgressLine& line, double elapsed_seconds) const;

 private:
  int64_t total_;
  int64_t first_;
  bool terminal_;
  std::FILE* out_;
  bool drawn_ = false;
};

}  // namespace studio::trainer
