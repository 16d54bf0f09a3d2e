// The dequantization kernel of bitsandbytes' blockwise 4-bit format (quant4.h): one thread per
// packed byte writes its two values; the block's absmax is read once per value from global
// memory (it is shared by blocksize / 2 neighbouring threads, so it stays in L1), undoing the
// double quantization on the way. The product is formed in fp32 and rounded once.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "studio/kernels/cuda_check.h"
#include "studio/kernels/quant4.h"

namespace studio::kernels {
namespace {

__constant__ float kCode4[2][16];

struct Device4 {
  const std::uint8_t* packed;
  const float* absmax;
  const std::uint8_t* qabsmax;
  const float* absmax2;
  const float* dynamic_code;
  float offset;
  std::int64_t n, blocksize, blocksize2;
  int type;
};

__device__ __forceinline__ float block_absmax(const Device4& d, std::int64_t block) {
  if (d.qabsmax == nullptr) return d.absmax[block];
  return d.dynamic_code[d.qabsmax[block]] * d.absmax2[block / d.blocksize2] + d.offset;
}

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

template <typename T>
__global__ void dequantize4_kernel(Device4 d, T* out) {
  const std::int64_t byte = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t first = 2 * byte;
  if (first >= d.n) return;
  const std::uint8_t v = d.packed[byte];
  const float* code = kCode4[d.type];
  out[first] = from_float<T>(code[v >> 4] * block_absmax(d, first / d.blocksize));
  if (first + 1 < d.n)
    out[first + 1] = from_float<T>(code[v & 0xF] * block_absmax(d, (first + 1) / d.blocksize));
}

void upload_codes() {
  static bool done = false;  // per process; the table is the same on every device it runs on
  if (done) return;
  float host[2][16];
  for (int t = 0; t < 2; ++t) {
    const auto& c = quant4_code(static_cast<Quant4Type>(t));
    for (int i = 0; i < 16; ++i) host[t][i] = c[static_cast<size_t>(i)];
  }
  STUDIO_CUDA_CHECK(cudaMemcpyToSymbol(kCode4, host, sizeof host));
  done = true;
}

}  // namespace

void dequantize4_cuda(const Dequant4Params& p, Stream stream) {
  check_dequant4_params(p);
  if (p.n == 0) return;
  upload_codes();
  const Device4 d{p.packed, p.absmax, p.qabsmax, p.absmax2, p.dynamic_code, p.offset,
                  p.n, p.blocksize, p.blocksize2, static_cast<int>(p.type)};
  const std::int64_t bytes = (p.n + 1) / 2;
  const int threads = 256;
  const auto blocks = static_cast<unsigned>((bytes + threads - 1) / threads);
  if (p.dtype == DType::kFloat32)
    dequantize4_kernel<float><<<blocks, threads, 0, stream>>>(d, static_cast<float*>(p.out));
  else
    dequantize4_kernel<__nv_bfloat16>
        <<<blocks, threads, 0, stream>>>(d, static_cast<__nv_bfloat16*>(p.out));
  STUDIO_CUDA_CHECK_LAUNCH();
}

}  // namespace studio::kernels
