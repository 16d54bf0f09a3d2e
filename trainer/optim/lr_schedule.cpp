#include "studio/trainer/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace studio::trainer {
namespace {
constexpr double kPi = 3.14159265358979323846;
}

double LrSchedule::factor(int64_t completed) const {
  const double step = static_cast<double>(completed);
  const double warmup = static_cast<double>(warmup_steps);
  if (kind == LrScheduler::Constant) return 1.0;
  if (completed < warmup_steps) return step / std::max(1.0, warmup);
  const double decay_steps = std::max(1.0, static_cast<double>(total_steps) - warmup);
  switch (kind) {
    case LrScheduler::ConstantWithWarmup:
      return 1.0;
    case LrScheduler::Linear:
      return std::max(0.0, (static_cast<double>(total_steps) - step) / decay_steps);
    case LrScheduler::Cosine:
    case LrScheduler::CosineWithMinLr: {
      const double progress = (step - warmup) / decay_steps;
      double f = 0.5 * (1.0 + std::cos(kPi * num_cycles * 2.0 * progress));
      f = f * (1.0 - min_lr_rate) + min_lr_rate;
      return std::max(0.0, f);
    }
    case LrScheduler::Constant:
      break;
  }
  return 1.0;
}

int64_t warmup_steps_for(const RunConfig& cfg, int64_t total_steps) {
  if (cfg.warmup_steps > 0) return cfg.warmup_steps;
  return static_cast<int64_t>(std::ceil(static_cast<double>(total_steps) * cfg.warmup_ratio));
}

LrSchedule make_lr_schedule(const RunConfig& cfg, int64_t total_steps, std::string& error) {
  LrSchedule s;
  s.kind = cfg.lr_scheduler_type;
  s.total_steps = std::max<int64_t>(1, total_steps);
  s.warmup_steps = warmup_steps_for(cfg, s.total_steps);
  const auto& kw = cfg.lr_scheduler_kwargs;
  if (auto it = kw.find("num_cycles"); it != kw.end()) s.num_cycles = it->second;
  if (s.kind == LrScheduler::CosineWithMinLr) {
    if (auto it = kw.find("min_lr_rate"); it != kw.end()) {
      s.min_lr_rate = it->second;
    } else if (auto abs = kw.find("min_lr"); abs != kw.end() && cfg.learning_rate > 0) {
      s.min_lr_rate = abs->second / cfg.learning_rate;
    } else {
      error = "cosine_with_min_lr needs lr_scheduler_kwargs min_lr_rate or min_lr";
    }
  }
  return s;
}

}  // namespace studio::trainer
