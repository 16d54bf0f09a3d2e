#include "studio/ui/dashboard/ema_smoother.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace studio::ui {

namespace {
constexpr double kMaxWeight = 0.999999;
}

EmaSmoother::EmaSmoother(double weight)
    : weight_(std::isfinite(weight) ? std::clamp(weight, 0.0, kMaxWeight) : 0.0) {}

double EmaSmoother::next(double x) {
  if (!std::isfinite(x)) return std::numeric_limits<double>::quiet_NaN();
  last_ = weight_ * last_ + (1.0 - weight_) * x;
  weightPowN_ *= weight_;
  ++count_;
  return last_ / (1.0 - weightPowN_);
}

void EmaSmoother::reset() {
  last_ = 0.0;
  weightPowN_ = 1.0;
  count_ = 0;
}

}  // namespace studio::ui
