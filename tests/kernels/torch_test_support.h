#pragma once
// Shared by the tests of the kernels' LibTorch adapters: whether LibTorch sees a usable GPU, and
// the skip when it does not.
#include <QtTest>

#include <torch/torch.h>

namespace torch_test {

inline bool gpu_usable() { return torch::cuda::is_available() && torch::cuda::device_count() > 0; }

}  // namespace torch_test

#define REQUIRE_TORCH_GPU()                                                                  \
  do {                                                                                       \
    if (!torch_test::gpu_usable())                                                           \
      QSKIP("no usable CUDA device (torch::cuda::is_available() is false)");                 \
  } while (0)
