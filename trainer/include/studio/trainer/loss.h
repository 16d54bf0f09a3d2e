#pragma once
// The language-model loss as sums, so that gradient accumulation, data parallelism and sequence
// parallelism can all normalise by the valid tokens of the whole global batch.
#include <cstdint>

#include <torch/torch.h>

namespace studio::trainer {

// Sum over valid targets of -log softmax(hidden @ weight^T)[target], in fp32. Only rows whose
// target is valid reach the LM head (masked prompt tokens cost nothing), and they are processed
// in chunks of `chunk_tokens` so no [tokens x vocab] fp32 tensor larger than a chunk is formed
// in the forward pass.
torch::Tensor lm_cross_entropy_sum(const torch::Tensor& hidden,   // [B, S, H]
                                   const torch::Tensor& weight,   // [V, H]
                                   const torch::Tensor& targets,  // [B, S], -100 ignored
                                   int64_t chunk_tokens = 2048);

// Per-token log-probabilities of the targets ([B, S], 0 where ignored), no gradient needed:
// what `studio-train logprobs` prints and DPO sums.
torch::Tensor lm_target_logprobs(const torch::Tensor& hidden, const torch::Tensor& weight,
                                 const torch::Tensor& targets, int64_t chunk_tokens = 2048);

}  // namespace studio::trainer
