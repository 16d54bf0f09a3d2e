// Host-side rules for the fused linear + cross-entropy: chunk size, workspace layout and
// parameter validation. Plain C++, shared by the CUDA launcher and the CPU reference, so the
// rules are compiled and tested on machines without nvcc.
#include "studio/kernels/fused_linear_ce.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <stdexcept>
#include <string>

namespace studio::kernels {
namespace {

constexpr std::size_t kPartAlignment = 256;  // cudaMalloc's own alignment, kept for every part

[[noreturn]] void fail(const std::string& what) {
  throw std::invalid_argument("fused_linear_ce: " + what);
}

std::int64_t next_power_of_two(std::int64_t n) {
  std::int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

std::size_t align_up(std::size_t n) {
  return (n + kPartAlignment - 1) / kPartAlignment * kPartAlignment;
}

void check_pointer(const char* name, const void* ptr, std::size_t alignment) {
  if (ptr == nullptr) fail(std::string(name) + " is null");
  if (reinterpret_cast<std::uintptr_t>(ptr) % alignment != 0) {
    fail(std::string(name) + " is not aligned to " + std::to_string(alignment) + " bytes");
  }
}

}  // namespace

std::int64_t fused_linear_ce_chunk_tokens(LinearCeShape s) {
  if (s.tokens <= 0) return 0;
  const std::int64_t vocab_per_hidden = (s.vocab + s.hidden - 1) / s.hidden;
  const std::int64_t want = (s.tokens + vocab_per_hidden - 1) / vocab_per_hidden;
  std::int64_t floor_rows = 1;
  while (floor_rows * 2 * s.vocab * 4 <= kChunkLogitsFloorBytes) floor_rows *= 2;
  return std::min(std::max(next_power_of_two(want), floor_rows), s.tokens);
}

void validate_linear_ce_shape(LinearCeShape s, std::int64_t chunk_tokens,
                              std::int64_t ignore_index) {
  if (s.tokens < 0) fail("tokens must be >= 0, got " + std::to_string(s.tokens));
  if (s.hidden <= 0) fail("hidden must be > 0, got " + std::to_string(s.hidden));
  if (s.vocab <= 0) fail("vocab must be > 0, got " + std::to_string(s.vocab));
  // cuBLAS takes int dimensions and leading dimensions.
  if (s.hidden > INT_MAX) fail("hidden " + std::to_string(s.hidden) + " exceeds INT_MAX");
  if (s.vocab > INT_MAX) fail("vocab " + std::to_string(s.vocab) + " exceeds INT_MAX");
  if (chunk_tokens < 0) {
    fail("chunk_tokens must be >= 0 (0 = automatic), got " + std::to_string(chunk_tokens));
  }
  if (chunk_tokens > INT_MAX) fail("chunk_tokens exceeds INT_MAX");
  if (ignore_index >= 0 && ignore_index < s.vocab) {
    fail("ignore_index " + std::to_string(ignore_index) + " is a valid class in [0, " +
         std::to_string(s.vocab) + "); use a negative value such as -100");
  }
}

std::int64_t effective_chunk_tokens(LinearCeShape s, std::int64_t chunk_tokens) {
  if (chunk_tokens > 0) return std::min(chunk_tokens, s.tokens);
  return fused_linear_ce_chunk_tokens(s);
}

std::size_t fused_linear_ce_workspace_bytes(LinearCeShape s, std::int64_t chunk_tokens, DType dtype,
                                            bool with_grads) {
  if (s.tokens <= 0 || s.vocab <= 0 || s.hidden <= 0) return 0;
  const auto chunk_elems = static_cast<std::size_t>(effective_chunk_tokens(s, chunk_tokens)) *
                           static_cast<std::size_t>(s.vocab);
  std::size_t bytes = align_up(chunk_elems * sizeof(float));
  if (with_grads && dtype != DType::kFloat32) bytes += align_up(chunk_elems * dtype_size(dtype));
  bytes += align_up(static_cast<std::size_t>(s.tokens) * sizeof(float));
  return bytes;
}

void validate(const FusedLinearCeParams& p) {
  validate_linear_ce_shape(p.shape, p.chunk_tokens, p.ignore_index);
  if (p.dtype != DType::kFloat32 && p.dtype != DType::kBFloat16) {
    fail("unknown dtype " + std::to_string(static_cast<int>(p.dtype)) + " (float32 or bfloat16)");
  }
  const std::size_t es = dtype_size(p.dtype);
  if (!std::isfinite(p.grad_scale)) fail("grad_scale must be finite");
  check_pointer("loss_sum", p.loss_sum, sizeof(float));
  if (p.target_count != nullptr) check_pointer("target_count", p.target_count, 8);
  if (p.shape.tokens == 0) return;  // only the zero sum and count are written
  check_pointer("x", p.x, es);
  check_pointer("weight", p.weight, es);
  check_pointer("targets", p.targets, sizeof(std::int64_t));
  if (p.target_logprobs != nullptr) check_pointer("target_logprobs", p.target_logprobs, 4);
  if (p.grad_x != nullptr) check_pointer("grad_x", p.grad_x, es);
  if (p.grad_weight != nullptr) check_pointer("grad_weight", p.grad_weight, sizeof(float));
  check_pointer("workspace", p.workspace, kPartAlignment);
  const bool grads = p.grad_x != nullptr || p.grad_weight != nullptr;
  const std::size_t need = fused_linear_ce_workspace_bytes(p.shape, p.chunk_tokens, p.dtype, grads);
  if (p.workspace_bytes < need) {
    fail("workspace_bytes " + std::to_string(p.workspace_bytes) + " < required " +
         std::to_string(need));
  }
}

}  // namespace studio::kernels
