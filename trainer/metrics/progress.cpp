#include "studio/trainer/metrics/progress.h"

#include <algorithm>
#include <cmath>

namespace studio::trainer {

ProgressBar::ProgressBar(int64_t total_steps, int64_t first_step, bool terminal, std::FILE* out)
    : total_(std::max<int64_t>(1, total_steps)), first_(first_step), terminal_(terminal),
      out_(out) {}

std::string ProgressBar::format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto s = static_cast<int64_t>(std::llround(seconds));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  return buf;
}

std::string ProgressBar::render(const ProgressLine& l, double elapsed) const {
  constexpr int kWidth = 24;
  const double frac = std::clamp(static_cast<double>(l.step) / static_cast<double>(total_), 0.0, 1.0);
  const int filled = static_cast<int>(frac * kWidth);
  const int64_t done = l.step - first_;
  const double eta = done > 0 ? elapsed / static_cast<double>(done) *
                                    static_cast<double>(total_ - l.step)
                              : NAN;
  char buf[256];
  std::snprintf(buf, sizeof buf, "[%s%s] %lld/%lld %3.0f%%  loss %.4f  lr %.2e  %.0f tok/s  "
                "elapsed %s  ETA %s",
                std::string(static_cast<size_t>(filled), '#').c_str(),
                std::string(static_cast<size_t>(kWidth - filled), '-').c_str(),
                static_cast<long long>(l.step), static_cast<long long>(total_), frac * 100.0,
                l.loss, l.lr, l.tokens_per_sec, format_duration(elapsed).c_str(),
                format_duration(eta).c_str());
  return buf;
}

void ProgressBar::update(const ProgressLine& line, double elapsed) {
  const std::string text = render(line, elapsed);
  if (terminal_) {
    std::fprintf(out_, "\r\033[K%s", text.c_str());
    drawn_ = true;
  } else {
    std::fprintf(out_, "%s\n", text.c_str());
  }
  std::fflush(out_);
}

void ProgressBar::message(const std::string& text) {
  std::fprintf(out_, "%s%s\n", terminal_ && drawn_ ? "\r\033[K" : "", text.c_str());
  drawn_ = false;
  std::fflush(out_);
}

void ProgressBar::finish() {
  if (terminal_ && drawn_) std::fprintf(out_, "\n");
  drawn_ = false;
  std::fflush(out_);
}

}  // namespace studio::trainer
