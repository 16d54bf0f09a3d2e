#pragma once
// The numeric derivative the gradient checks compare against: a central difference of `loss`
// in element i of `flat` (a view into a parameter or input), which is restored afterwards.
#include <functional>

#include <torch/torch.h>

inline double central_difference(const torch::Tensor& flat, int64_t i, double h,
                                 const std::function<torch::Tensor()>& loss) {
  torch::NoGradGuard no_grad;
  const double x0 = flat[i].item<double>();
  flat[i] = x0 + h;
  const double up = loss().item<double>();
  flat[i] = x0 - h;
  const double down = loss().item<double>();
  flat[i] = x0;
  return (up - down) / (2 * h);
}
