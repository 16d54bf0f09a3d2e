// Fused linear + cross-entropy (see fused_linear_ce.h). Compiled by nvcc alone: raw pointers, a
// stream and a cuBLAS handle come in; no LibTorch here.
//
// Per chunk of tokens:
//   1. cuBLAS: logits[c, V] = x_chunk[c, H] W[V, H]^T into the fp32 chunk buffer;
//   2. one block per row: online log-sum-exp (running max and rescaled sum, one pass over the
//      logits), log p(target), then dlogits = (softmax - onehot) * grad_scale written over the
//      logits (and as dtype into the second buffer for bf16, the GEMMs' common input type);
//   3. cuBLAS: grad_x[chunk] = dlogits W and grad_W (+)= dlogits^T x_chunk, fp32 accumulation.
// A last single-block kernel sums the per-token log-probs in a fixed order (deterministic).
//
// cuBLAS is column-major: a row-major [r, c] matrix is, to it, the column-major [c, r] matrix
// with leading dimension c. Every call below is written in those transposed terms.
#include "studio/kernels/cuda_check.h"
#include "studio/kernels/fused_linear_ce.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace studio::kernels {
namespace {

constexpr int kWarpSize = 32;
constexpr int kRowThreads = 256;
constexpr int kSumThreads = 512;
constexpr std::size_t kPartAlignment = 256;  // as fused_linear_ce_workspace_bytes lays it out

using bf16 = __nv_bfloat16;

[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* statement, const char* file,
                                     int line) {
  throw KernelError(statement, file, line, cublasGetStatusName(status),
                    cublasGetStatusString(status), static_cast<int>(status));
}

// The cuBLAS member of the STUDIO_CUDA_CHECK family: same KernelError, cuBLAS's status text.
#define STUDIO_CUBLAS_CHECK(call)                                         \
  do {                                                                    \
    const cublasStatus_t studio_blas_status_ = (call);                    \
    if (studio_blas_status_ != CUBLAS_STATUS_SUCCESS) {                   \
      throw_cublas_error(studio_blas_status_, #call, __FILE__, __LINE__); \
    }                                                                     \
  } while (0)

// A private handle when the caller has none (standalone use, tests).
class OwnedBlas {
 public:
  explicit OwnedBlas(BlasHandle given) : handle_(given) {
    if (handle_ == nullptr) {
      STUDIO_CUBLAS_CHECK(cublasCreate(&handle_));
      owned_ = true;
    }
  }
  ~OwnedBlas() {
    if (owned_) cublasDestroy(handle_);
  }
  OwnedBlas(const OwnedBlas&) = delete;
  OwnedBlas& operator=(const OwnedBlas&) = delete;
  cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
  bool owned_ = false;
};

__device__ __forceinline__ void store(float* p, std::int64_t i, float v) {
  p[i] = v;
}
__device__ __forceinline__ void store(bf16* p, std::int64_t i, float v) {
  p[i] = __float2bfloat16_rn(v);
}

// (max, sum of exp(l - max)) pairs combine associatively; -inf max means "empty". expf, not
// the __expf intrinsic: its error grows with |argument|, and the GEMMs dominate the time anyway.
struct MaxSum {
  float max;
  float sum;
};

__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.max, b.max);
  if (m == -INFINITY) return {m, 0.0f};
  return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
}

__device__ MaxSum block_max_sum(MaxSum v, MaxSum* scratch) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int warps = static_cast<int>(blockDim.x) / kWarpSize;
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const MaxSum other{__shfl_xor_sync(0xffffffffu, v.max, offset),
                       __shfl_xor_sync(0xffffffffu, v.sum, offset)};
    v = combine(v, other);
  }
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : MaxSum{-INFINITY, 0.0f};
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    const MaxSum other{__shfl_xor_sync(0xffffffffu, v.max, offset),
                       __shfl_xor_sync(0xffffffffu, v.sum, offset)};
    v = combine(v, other);
  }
  return v;
}

// One block per chunk row. logits: [rows, vocab] fp32, overwritten by dlogits when with_grads.
// dlogits_copy: the same values as DL (bf16) when the GEMMs need them in that type, else null.
template <typename DL>
__global__ void ce_rows_kernel(float* logits, DL* dlogits_copy, const std::int64_t* targets,
                               float* logprobs, std::int64_t vocab, std::int64_t ignore_index,
                               float grad_scale, bool with_grads) {
  __shared__ MaxSum scratch[kWarpSize];
  const std::int64_t row = blockIdx.x;
  float* l = logits + row * vocab;
  const std::int64_t target = targets[row];
  const bool ignored = target == ignore_index;
  if (ignored) {
    if (threadIdx.x == 0) logprobs[row] = 0.0f;
    if (!with_grads) return;
    for (std::int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
      l[v] = 0.0f;
      if (dlogits_copy != nullptr) store(dlogits_copy + row * vocab, v, 0.0f);
    }
    return;
  }
  // Online log-sum-exp: each thread keeps its running max and a sum rescaled when it grows.
  MaxSum mine{-INFINITY, 0.0f};
  for (std::int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
    const float z = l[v];
    if (z > mine.max) {
      mine.sum = mine.sum * expf(mine.max - z) + 1.0f;
      mine.max = z;
    } else {
      mine.sum += expf(z - mine.max);
    }
  }
  const MaxSum all = block_max_sum(mine, scratch);
  const float lse = all.max + logf(all.sum);
  const bool in_range = target >= 0 && target < vocab;
  if (threadIdx.x == 0) logprobs[row] = in_range ? l[target] - lse : NAN;
  // Thread 0 read l[target], a column another thread may own and overwrite below: barrier.
  __syncthreads();
  if (!with_grads) return;
  for (std::int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
    const float d = (expf(l[v] - lse) - (v == target ? 1.0f : 0.0f)) * grad_scale;
    l[v] = d;
    if (dlogits_copy != nullptr) store(dlogits_copy + row * vocab, v, d);
  }
}

// Sum of -logprob over non-ignored tokens and their count, one block, fixed order.
__global__ void ce_sum_kernel(const float* logprobs, const std::int64_t* targets,
                              std::int64_t tokens, std::int64_t ignore_index, float* loss_sum,
                              std::int64_t* target_count, float* logprobs_out) {
  __shared__ float sums[kSumThreads];
  __shared__ long long counts[kSumThreads];
  float s = 0.0f;
  long long n = 0;
  for (std::int64_t t = threadIdx.x; t < tokens; t += blockDim.x) {
    const float lp = logprobs[t];
    if (logprobs_out != nullptr) logprobs_out[t] = lp;
    if (targets[t] != ignore_index) {
      s -= lp;
      ++n;
    }
  }
  sums[threadIdx.x] = s;
  counts[threadIdx.x] = n;
  __syncthreads();
  for (int half = static_cast<int>(blockDim.x) / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) {
      sums[threadIdx.x] += sums[threadIdx.x + half];
      counts[threadIdx.x] += counts[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    *loss_sum = sums[0];
    if (target_count != nullptr) *target_count = counts[0];
  }
}

cudaDataType_t blas_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return CUDA_R_32F;
    case DType::kBFloat16:
      return CUDA_R_16BF;
  }
  throw std::invalid_argument("fused_linear_ce: unsupported dtype");
}

// C (column-major m x n, ldc) = alpha * op(A) op(B) + beta * C, fp32 compute.
struct Gemm {
  cublasHandle_t handle;
  void operator()(cublasOperation_t ta, cublasOperation_t tb, std::int64_t m, std::int64_t n,
                  std::int64_t k, const void* a, cudaDataType_t at, std::int64_t lda, const void* b,
                  cudaDataType_t bt, std::int64_t ldb, float beta, void* c, cudaDataType_t ct,
                  std::int64_t ldc) const {
    const float alpha = 1.0f;
    STUDIO_CUBLAS_CHECK(cublasGemmEx(handle, ta, tb, static_cast<int>(m), static_cast<int>(n),
                                     static_cast<int>(k), &alpha, a, at, static_cast<int>(lda), b,
                                     bt, static_cast<int>(ldb), &beta, c, ct, static_cast<int>(ldc),
                                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
};

std::size_t align_up(std::size_t n) {
  return (n + kPartAlignment - 1) / kPartAlignment * kPartAlignment;
}

}  // namespace

void fused_linear_ce(const FusedLinearCeParams& p, BlasHandle blas, Stream stream) {
  validate(p);
  const cudaStream_t s = stream;
  const std::int64_t T = p.shape.tokens, H = p.shape.hidden, V = p.shape.vocab;
  if (T == 0) {
    STUDIO_CUDA_CHECK(cudaMemsetAsync(p.loss_sum, 0, sizeof(float), s));
    if (p.target_count != nullptr) {
      STUDIO_CUDA_CHECK(cudaMemsetAsync(p.target_count, 0, sizeof(std::int64_t), s));
    }
    return;
  }
  const OwnedBlas owned(blas);
  const cublasHandle_t handle = owned.get();
  // cublasSetStream also resets the handle's workspace to cuBLAS's default pool: LibTorch's
  // handle comes bound to the current stream with a workspace from the caching allocator, which
  // is kept unless the caller asked for another stream.
  cudaStream_t bound = nullptr;
  STUDIO_CUBLAS_CHECK(cublasGetStream(handle, &bound));
  if (bound != s) STUDIO_CUBLAS_CHECK(cublasSetStream(handle, s));
  const Gemm gemm{handle};

  const bool grads = p.grad_x != nullptr || p.grad_weight != nullptr;
  const std::int64_t chunk = effective_chunk_tokens(p.shape, p.chunk_tokens);
  const std::size_t chunk_elems = static_cast<std::size_t>(chunk) * static_cast<std::size_t>(V);
  auto* base = static_cast<unsigned char*>(p.workspace);
  auto* logits = reinterpret_cast<float*>(base);
  std::size_t offset = align_up(chunk_elems * sizeof(float));
  void* dlogits_copy = nullptr;
  if (grads && p.dtype != DType::kFloat32) {
    dlogits_copy = base + offset;
    offset += align_up(chunk_elems * dtype_size(p.dtype));
  }
  auto* logprobs = reinterpret_cast<float*>(base + offset);

  const cudaDataType_t in_type = blas_type(p.dtype);
  // The GEMMs' dlogits operand: the fp32 buffer itself, or its copy in the input type.
  const void* d_operand = dlogits_copy != nullptr ? dlogits_copy : logits;
  const std::size_t es = dtype_size(p.dtype);

  for (std::int64_t start = 0; start < T; start += chunk) {
    const std::int64_t len = std::min(chunk, T - start);
    const auto* x_chunk = static_cast<const unsigned char*>(p.x) + start * H * es;
    // logits^T [V, len] = W^T(as [H, V])^T * x_chunk^T [H, len]
    gemm(CUBLAS_OP_T, CUBLAS_OP_N, V, len, H, p.weight, in_type, H, x_chunk, in_type, H, 0.0f,
         logits, CUDA_R_32F, V);

    const auto blocks = static_cast<unsigned>(len);
    if (dlogits_copy != nullptr) {
      ce_rows_kernel<bf16><<<blocks, kRowThreads, 0, s>>>(logits, static_cast<bf16*>(dlogits_copy),
                                                          p.targets + start, logprobs + start, V,
                                                          p.ignore_index, p.grad_scale, grads);
    } else {
      ce_rows_kernel<float><<<blocks, kRowThreads, 0, s>>>(logits, nullptr, p.targets + start,
                                                           logprobs + start, V, p.ignore_index,
                                                           p.grad_scale, grads);
    }
    STUDIO_CUDA_CHECK_LAUNCH();
    if (!grads) continue;

    if (p.grad_x != nullptr) {
      // grad_x_chunk^T [H, len] = W^T [H, V] * dlogits^T [V, len]
      auto* gx = static_cast<unsigned char*>(p.grad_x) + start * H * es;
      gemm(CUBLAS_OP_N, CUBLAS_OP_N, H, len, V, p.weight, in_type, H, d_operand, in_type, V, 0.0f,
           gx, in_type, H);
    }
    if (p.grad_weight != nullptr) {
      // grad_W^T [H, V] (+)= x_chunk^T [H, len] * dlogits [len, V]; the first chunk overwrites.
      gemm(CUBLAS_OP_N, CUBLAS_OP_T, H, V, len, x_chunk, in_type, H, d_operand, in_type, V,
           start == 0 ? 0.0f : 1.0f, p.grad_weight, CUDA_R_32F, H);
    }
  }

  ce_sum_kernel<<<1, kSumThreads, 0, s>>>(logprobs, p.targets, T, p.ignore_index, p.loss_sum,
                                          p.target_count, p.target_logprobs);
  STUDIO_CUDA_CHECK_LAUNCH();
}

}  // namespace studio::kernels
