#include "studio/kernels/fused_linear_ce_ref.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace studio::kernels {
namespace {

template <typename T>
LinearCeRefResult<T> run(const T* x, const T* w, const std::int64_t* targets, LinearCeShape s,
                         const LinearCeRefOptions& o) {
  validate_linear_ce_shape(s, o.chunk_tokens, o.ignore_index);
  if (!std::isfinite(o.grad_scale)) {
    throw std::invalid_argument("fused_linear_ce_ref: grad_scale must be finite");
  }
  if (s.tokens > 0 && (x == nullptr || w == nullptr || targets == nullptr)) {
    throw std::invalid_argument("fused_linear_ce_ref: x, weight and targets must not be null");
  }
  for (std::int64_t t = 0; t < s.tokens; ++t) {
    if (targets[t] != o.ignore_index && (targets[t] < 0 || targets[t] >= s.vocab)) {
      throw std::invalid_argument("fused_linear_ce_ref: targets[" + std::to_string(t) +
                                  "] = " + std::to_string(targets[t]) + " is outside [0, " +
                                  std::to_string(s.vocab) + ") and is not the ignore_index");
    }
  }
  const std::int64_t H = s.hidden, V = s.vocab;
  LinearCeRefResult<T> r;
  r.chunk_tokens = effective_chunk_tokens(s, o.chunk_tokens);
  r.target_logprobs.assign(static_cast<std::size_t>(s.tokens), T(0));
  if (o.with_grads) {
    r.grad_x.assign(static_cast<std::size_t>(s.tokens * H), T(0));
    r.grad_weight.assign(static_cast<std::size_t>(V * H), T(0));
  }
  if (s.tokens == 0) return r;
  const auto scale = static_cast<T>(o.grad_scale);
  // The only vocab-sized storage: one chunk of logits, turned into dlogits in place.
  std::vector<T> chunk(static_cast<std::size_t>(r.chunk_tokens * V));
  r.chunk_buffer_elements = chunk.size();

  for (std::int64_t start = 0; start < s.tokens; start += r.chunk_tokens) {
    const std::int64_t len = std::min(r.chunk_tokens, s.tokens - start);
    for (std::int64_t i = 0; i < len; ++i) {
      const T* xr = x + (start + i) * H;
      T* row = chunk.data() + i * V;
      for (std::int64_t v = 0; v < V; ++v) {
        T dot = 0;
        for (std::int64_t h = 0; h < H; ++h) dot += xr[h] * w[v * H + h];
        row[v] = dot;
      }
    }
    for (std::int64_t i = 0; i < len; ++i) {
      const std::int64_t t = start + i;
      T* row = chunk.data() + i * V;
      const std::int64_t target = targets[t];
      if (target == o.ignore_index) {
        std::fill(row, row + V, T(0));  // no loss, no gradient
        continue;
      }
      // Log-sum-exp shifted by the row maximum, so exp never overflows.
      const T m = *std::max_element(row, row + V);
      T sum = 0;
      for (std::int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - m);
      const T lse = m + std::log(sum);
      const T logprob = row[target] - lse;
      r.target_logprobs[static_cast<std::size_t>(t)] = logprob;
      r.loss_sum -= logprob;
      ++r.target_count;
      for (std::int64_t v = 0; v < V; ++v) {
        row[v] = (std::exp(row[v] - lse) - (v == target ? T(1) : T(0))) * scale;
      }
    }
    if (!o.with_grads) continue;
    // grad_x[t] = dlogits[t] W;  grad_W += dlogits^T x_chunk.
    for (std::int64_t i = 0; i < len; ++i) {
      const T* d = chunk.data() + i * V;
      const T* xr = x + (start + i) * H;
      T* gx = r.grad_x.data() + (start + i) * H;
      for (std::int64_t v = 0; v < V; ++v) {
        if (d[v] == T(0)) continue;  // ignored rows: skipping exact zeros changes nothing
        for (std::int64_t h = 0; h < H; ++h) {
          gx[h] += d[v] * w[v * H + h];
          r.grad_weight[static_cast<std::size_t>(v * H + h)] += d[v] * xr[h];
        }
      }
    }
  }
  return r;
}

}  // namespace

LinearCeRefResult<float> fused_linear_ce_ref(const float* x, const float* weight,
                                             const std::int64_t* targets, LinearCeShape shape,
                                             const LinearCeRefOptions& options) {
  return run(x, weight, targets, shape, options);
}

LinearCeRefResult<double> fused_linear_ce_ref(const double* x, const double* weight,
                                              const std::int64_t* targets, LinearCeShape shape,
                                              const LinearCeRefOptions& options) {
  return run(x, weight, targets, shape, options);
}

}  // namespace studio::kernels
