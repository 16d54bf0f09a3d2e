#pragma once
// Shared by the CUDA kernel tests: whether a device can run them, and the skip when none can.
#include <QString>
#include <QtTest>

#include <cuda_runtime.h>

namespace cuda_test {

inline bool device_usable(QString* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    *why = QString("no usable CUDA device: ") + cudaGetErrorString(err);
    cudaGetLastError();  // clear it, so later checks do not see it
    return false;
  }
  if (count == 0) *why = "no CUDA device";
  return count > 0;
}

}  // namespace cuda_test

#define REQUIRE_DEVICE()                                           \
  do {                                                             \
    QString why_;                                                  \
    if (!cuda_test::device_usable(&why_)) QSKIP(qPrintable(why_)); \
  } while (0)
