#pragma once
// LibTorch entry point for the 4-bit dequantization kernel (quant4.h). Exists only in builds
// with a CUDA LibTorch and nvcc (target studio_kernels_torch). Runs on the tensors' device and
// its current stream.

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace studio::kernels {

// The tensors of one quantized weight, all on one CUDA device, contiguous: packed uint8
// [(n + 1) / 2]; absmax fp32 [blocks], or (double quantization) qabsmax uint8 [blocks], absmax2
// fp32 [ceil(blocks / 256)] and dynamic fp32 [256] with `offset`.
struct Quant4Tensors {
  at::Tensor packed, absmax, qabsmax, absmax2, dynamic;
  double offset = 0;
  std::int64_t n = 0;
  std::int64_t blocksize = 64;
  int type = 0;  // Quant4Type
};

// The n values in `dtype` (float32 or bfloat16), flat. Throws c10::Error on a bad argument and
// KernelError when the launch fails.
at::Tensor dequantize4(const Quant4Tensors& q, at::ScalarType dtype);

}  // namespace studio::kernels
