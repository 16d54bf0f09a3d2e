// The engine's CPU AdamW (CPU runs and offloaded optimizer states: trainer/optim/zero.cpp
// adamw_update, PyTorch's fused multi-tensor kernel) against LibTorch's own torch::optim::AdamW
// (a sequence of tensor ops, as torch.optim's for-loop implementation) on the same tensors in the
// same run: milliseconds per update of N fp32 parameters and the ratio, and
// the largest difference of the updated parameters (the same formula, so rounding only).
//
//   bench_adamw [--elements N] [--steps K] [--threads T]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "studio/trainer/optim/zero.h"

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 50'000'000;
  int steps = 5, threads = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--elements") n = std::atoll(argv[i + 1]);
    else if (a == "--steps") steps = std::atoi(argv[i + 1]);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: bench_adamw [--elements N] [--steps K] [--threads T]\n");
      return 2;
    }
  }
  if (threads > 0) at::set_num_threads(threads);
  torch::manual_seed(1);
  const auto init = torch::randn({n}) * 0.02;
  const auto grads = torch::randn({n}) * 1e-3;
  studio::trainer::AdamWSettings s;
  s.weight_decay = 0.01;
  const double lr = 1e-4;

  // The engine's update.
  auto p = init.clone(), m = torch::zeros({n}), v = torch::zeros({n});
  double ours = 0;
  for (int k = 1; k <= steps; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    studio::trainer::adamw_update(p, m, v, grads, lr, s, s.weight_decay, k);
    ours += ms_since(t0);
  }
  // LibTorch's AdamW on the same values.
  auto q = init.clone().requires_grad_(true);
  q.mutable_grad() = grads.clone();
  torch::optim::AdamW opt({q}, torch::optim::AdamWOptions(lr).weight_decay(s.weight_decay)
                                   .betas({s.beta1, s.beta2}).eps(s.eps));
  double theirs = 0;
  for (int k = 1; k <= steps; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    opt.step();
    theirs += ms_since(t0);
  }
  const double diff = (p - q.detach()).abs().max().item<double>();
  std::printf("elements %lld, threads %d, steps %d\n", static_cast<long long>(n),
              at::get_num_threads(), steps);
  std::printf("studio adamw_update      %9.2f ms/step\n", ours / steps);
  std::printf("torch::optim::AdamW      %9.2f ms/step\n", theirs / steps);
  std::printf("ratio (torch / studio)   %9.2f\n", theirs / ours);
  std::printf("max |difference|         %9.3g\n", diff);
  return diff < 1e-6 ? 0 : 1;
}
