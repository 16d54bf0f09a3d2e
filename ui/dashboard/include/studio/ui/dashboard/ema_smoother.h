#pragma once
// TensorBoard's debiased exponential moving average, one value at a time, so a live chart can
// extend its smoothed curve by the new points only instead of recomputing a million of them.
#include <cstdint>

namespace studio::ui {

class EmaSmoother {
 public:
  // weight: 0 shows the raw values, 0.999 smooths the most. Values outside [0, 1) are clamped
  // (a weight of 1 would never move and divide by zero in the debias term).
  explicit EmaSmoother(double weight = 0.0);

  // Returns the smoothed value at x: last = w*last + (1-w)*x, shown = last / (1 - w^n) with n
  // the finite values so far. A NaN or infinite x returns NaN (a gap) and leaves the state as
  // it was, so one diverged step does not poison the rest of the curve.
  double next(double x);
  void reset();

  double weight() const { return weight_; }
  // Finite values taken so far.
  std::int64_t count() const { return count_; }

 private:
  double weight_;
  double last_ = 0.0;
  double weightPowN_ = 1.0;  // w^n, kept as a running product: pow() per point costs more
  std::int64_t count_ = 0;
};

}  // namespace studio::ui
