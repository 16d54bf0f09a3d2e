#pragma once
// Checks for CUDA runtime calls and kernel launches. Include this only from CUDA code (.cu files,
// or C++ that already talks to the CUDA runtime): it pulls in cuda_runtime_api.h.
//
//   STUDIO_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream));
//   my_kernel<<<grid, block, 0, stream>>>(args);
//   STUDIO_CUDA_CHECK_LAUNCH();
//
// Both throw studio::kernels::KernelError carrying the statement, file:line and the CUDA message.

#include <cuda_runtime_api.h>

#include "studio/kernels/kernel_error.h"

namespace studio::kernels::detail {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* statement, const char* file,
                                          int line) {
  throw KernelError(statement, file, line, cudaGetErrorName(err), cudaGetErrorString(err),
                    static_cast<int>(err));
}

}  // namespace studio::kernels::detail

#define STUDIO_CUDA_CHECK(call)                                                                 \
  do {                                                                                          \
    const cudaError_t studio_cuda_err_ = (call);                                                \
    if (studio_cuda_err_ != cudaSuccess) {                                                      \
      ::studio::kernels::detail::throw_cuda_error(studio_cuda_err_, #call, __FILE__, __LINE__); \
    }                                                                                           \
  } while (0)

// A launch reports bad configurations (grid, shared memory, missing sm_XX image) only through
// cudaGetLastError, so every launch is followed by this. Faults inside the kernel surface later,
// at the next synchronising call.
#define STUDIO_CUDA_CHECK_LAUNCH()                                                             \
  do {                                                                                         \
    const cudaError_t studio_cuda_err_ = cudaGetLastError();                                   \
    if (studio_cuda_err_ != cudaSuccess) {                                                     \
      ::studio::kernels::detail::throw_cuda_error(studio_cuda_err_, "kernel launch", __FILE__, \
                                                  __LINE__);                                   \
    }                                                                                          \
  } while (0)
