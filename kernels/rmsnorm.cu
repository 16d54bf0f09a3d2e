// RMSNorm forward/backward kernels. Compiled by nvcc alone: no LibTorch here, callers hand in
// raw pointers and a stream (see rmsnorm.h; rmsnorm_torch.cpp adapts tensors).
//
// One thread block normalises one row at a time (grid-stride over rows). Threads stride over the
// columns, so each warp reads consecutive elements (coalesced), and per-row sums are reduced with
// warp shuffles plus one float per warp in shared memory. All arithmetic is fp32.
#include "studio/kernels/cuda_check.h"
#include "studio/kernels/rmsnorm.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace studio::kernels {
namespace {

constexpr int kWarpSize = 32;
constexpr int kMaxThreads = 512;
constexpr int kColsPerThread = 8;  // aim: each thread handles about this many columns of a row
constexpr std::int64_t kMaxForwardBlocks = std::int64_t{1} << 20;
constexpr int kReduceThreads = 256;

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float load(const float* p, std::int64_t i) {
  return p[i];
}
__device__ __forceinline__ float load(const bf16* p, std::int64_t i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ void store(float* p, std::int64_t i, float v) {
  p[i] = v;
}
__device__ __forceinline__ void store(bf16* p, std::int64_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

// Sum of v over the block, returned to every thread. blockDim.x must be a multiple of 32.
// The leading barrier keeps one call's writes to `scratch` from racing the previous call's
// reads, so the function can be called back to back (once or twice per row).
__device__ float block_sum(float v, float* scratch) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int warps = static_cast<int>(blockDim.x) / kWarpSize;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  // Every warp folds the per-warp sums itself: no third barrier, and all threads get the total.
  return warp_sum(lane < warps ? scratch[lane] : 0.0f);
}

template <typename T, typename W>
__global__ void rmsnorm_forward_kernel(RmsNormForwardParams p) {
  __shared__ float scratch[kWarpSize];
  const T* x_base = static_cast<const T*>(p.x);
  const W* w = static_cast<const W*>(p.weight);
  T* y_base = static_cast<T*>(p.y);
  const float inv_cols = 1.0f / static_cast<float>(p.cols);
  for (std::int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const T* x = x_base + row * p.x_row_stride;
    float sum_sq = 0.0f;
    for (std::int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) {
      const float v = load(x, c);
      sum_sq += v * v;
    }
    const float r = rsqrtf(block_sum(sum_sq, scratch) * inv_cols + p.eps);
    if (p.rstd != nullptr && threadIdx.x == 0) p.rstd[row] = r;
    // In place (y == x) is safe: every x of the row was read before block_sum's barriers, and
    // below each thread reads x[c] before it overwrites y[c].
    T* y = y_base + row * p.y_row_stride;
    for (std::int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) {
      store(y, c, load(x, c) * r * load(w, c));
    }
  }
}

// dx = r * (g - x * r^2 * sum(g * x) / cols) with g = dy * w, r = rsqrt(mean(x^2) + eps);
// dw = sum over rows of dy * x * r, written per block into partial_dw[blockIdx.x, :].
template <typename T, typename W>
__global__ void rmsnorm_backward_kernel(RmsNormBackwardParams p, float* partial_dw) {
  __shared__ float scratch[kWarpSize];
  const W* w = static_cast<const W*>(p.weight);
  const float inv_cols = 1.0f / static_cast<float>(p.cols);
  float* my_partial = partial_dw != nullptr ? partial_dw + blockIdx.x * p.cols : nullptr;
  for (std::int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const T* x = static_cast<const T*>(p.x) + row * p.x_row_stride;
    const T* dy = static_cast<const T*>(p.dy) + row * p.dy_row_stride;
    float sum_sq = 0.0f;
    float dot = 0.0f;
    for (std::int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) {
      const float xv = load(x, c);
      sum_sq += xv * xv;
      dot += load(dy, c) * load(w, c) * xv;
    }
    dot = block_sum(dot, scratch);
    const float r =
        p.rstd != nullptr ? p.rstd[row] : rsqrtf(block_sum(sum_sq, scratch) * inv_cols + p.eps);
    const float coef = r * r * r * dot * inv_cols;
    T* dx = static_cast<T*>(p.dx) + row * p.dx_row_stride;
    const bool first_row = row == blockIdx.x;  // overwrite, so the workspace needs no memset
    for (std::int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) {
      const float xv = load(x, c);
      const float dyv = load(dy, c);
      store(dx, c, r * dyv * load(w, c) - xv * coef);
      if (my_partial != nullptr) {
        const float contrib = dyv * xv * r;
        my_partial[c] = first_row ? contrib : my_partial[c] + contrib;
      }
    }
  }
}

// Adds the per-block rows of the workspace in block order (deterministic), one thread per column.
template <typename W>
__global__ void rmsnorm_dweight_reduce_kernel(const float* partial_dw, std::int64_t partials,
                                              std::int64_t cols, W* dweight) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t c = blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += step) {
    float sum = 0.0f;
    for (std::int64_t b = 0; b < partials; ++b) sum += partial_dw[b * cols + c];
    store(dweight, c, sum);
  }
}

int threads_for(std::int64_t cols) {
  const std::int64_t want = (cols + kColsPerThread - 1) / kColsPerThread;
  const std::int64_t rounded = (want + kWarpSize - 1) / kWarpSize * kWarpSize;
  return static_cast<int>(std::clamp<std::int64_t>(rounded, kWarpSize, kMaxThreads));
}

template <typename T>
struct Tag {
  using type = T;
};

// Calls fn(Tag<element>, Tag<weight element>) for the runtime dtype pair.
template <typename Fn>
void dispatch(DType dtype, DType weight_dtype, Fn&& fn) {
  auto with_weight = [&](auto element) {
    switch (weight_dtype) {
      case DType::kFloat32:
        return fn(element, Tag<float>{});
      case DType::kBFloat16:
        return fn(element, Tag<bf16>{});
    }
    throw std::invalid_argument("rmsnorm: unsupported weight dtype");
  };
  switch (dtype) {
    case DType::kFloat32:
      return with_weight(Tag<float>{});
    case DType::kBFloat16:
      return with_weight(Tag<bf16>{});
  }
  throw std::invalid_argument("rmsnorm: unsupported dtype");
}

cudaStream_t to_cuda(Stream stream) {
  return stream;
}

}  // namespace

void rmsnorm_forward(const RmsNormForwardParams& p, Stream stream) {
  validate(p);
  if (p.rows == 0) return;
  const auto blocks = static_cast<unsigned>(std::min(p.rows, kMaxForwardBlocks));
  const int threads = threads_for(p.cols);
  dispatch(p.dtype, p.weight_dtype, [&](auto element, auto weight) {
    using T = typename decltype(element)::type;
    using W = typename decltype(weight)::type;
    rmsnorm_forward_kernel<T, W><<<blocks, threads, 0, to_cuda(stream)>>>(p);
    STUDIO_CUDA_CHECK_LAUNCH();
  });
}

void rmsnorm_backward(const RmsNormBackwardParams& p, Stream stream) {
  validate(p);
  if (p.rows == 0) return;
  const std::int64_t partials = rmsnorm_backward_partials(p.rows);
  float* partial_dw = p.dweight != nullptr ? static_cast<float*>(p.workspace) : nullptr;
  const int threads = threads_for(p.cols);
  dispatch(p.dtype, p.weight_dtype, [&](auto element, auto weight) {
    using T = typename decltype(element)::type;
    using W = typename decltype(weight)::type;
    rmsnorm_backward_kernel<T, W>
        <<<static_cast<unsigned>(partials), threads, 0, to_cuda(stream)>>>(p, partial_dw);
    STUDIO_CUDA_CHECK_LAUNCH();
    if (partial_dw == nullptr) return;
    const auto reduce_blocks =
        static_cast<unsigned>((p.cols + kReduceThreads - 1) / kReduceThreads);
    rmsnorm_dweight_reduce_kernel<W><<<reduce_blocks, kReduceThreads, 0, to_cuda(stream)>>>(
        partial_dw, partials, p.cols, static_cast<W*>(p.dweight));
    STUDIO_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace studio::kernels
