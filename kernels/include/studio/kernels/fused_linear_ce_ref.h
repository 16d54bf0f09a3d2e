#pragma once
// CPU reference for the fused linear + cross-entropy (fused_linear_ce.h): the same chunked
// algorithm in plain loops, accumulating in the element type, so the float version shows what
// fp32 accumulation costs and the double version serves as the accurate answer. Contiguous
// row-major data, no CUDA, no Torch.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "studio/kernels/fused_linear_ce.h"

namespace studio::kernels {

struct LinearCeRefOptions {
  std::int64_t ignore_index = kCrossEntropyIgnoreIndex;
  std::int64_t chunk_tokens = 0;  // 0: fused_linear_ce_chunk_tokens(shape)
  double grad_scale = 1.0;        // upstream gradient of the loss sum, folded into dlogits
  bool with_grads = true;         // false: loss, count and log-probs only (DPO's gathering)
};

template <typename T>
struct LinearCeRefResult {
  T loss_sum = 0;                         // sum over target tokens of -log p(target)
  std::int64_t target_count = 0;          // tokens whose target != ignore_index
  std::vector<T> target_logprobs;         // [tokens]: log p(target), 0 where ignored
  std::vector<T> grad_x;                  // [tokens, hidden]; empty without with_grads
  std::vector<T> grad_weight;             // [vocab, hidden]; empty without with_grads
  std::int64_t chunk_tokens = 0;          // the chunk used
  std::size_t chunk_buffer_elements = 0;  // the logits buffer it held: chunk * vocab, never T * V
};

// Throws std::invalid_argument for a bad shape or option (validate_linear_ce_shape), a null
// x/weight/targets when tokens > 0, or a target outside [0, vocab) that is not ignore_index
// (naming the token).
LinearCeRefResult<float> fused_linear_ce_ref(const float* x, const float* weight,
                                             const std::int64_t* targets, LinearCeShape shape,
                                             const LinearCeRefOptions& options);
LinearCeRefResult<double> fused_linear_ce_ref(const double* x, const double* weight,
                                              const std::int64_t* targets, LinearCeShape shape,
                                              const LinearCeRefOptions& options);

}  // namespace studio::kernels
