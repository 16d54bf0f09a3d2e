#pragma once
// The language-model loss as sums, so that gradient accumulation, data parallelism and sequence
// parallelism can all normalise by the valid tokens of the whole global batch.
//
// Both functions fuse the LM head with its loss (docs/LONG_CONTEXT.md, "Fused linear +
// cross-entropy"): the tokens go through the head `chunk_tokens` at a time (0: the kernels'
// rule, about as many logits per chunk as the hidden states have values), and no [tokens x
// vocab] tensor ever exists, in the forward or the backward. On CUDA, fp32 and bf16 run the
// fused kernel of kernels/ (fused_linear_ce.h) through its LibTorch adapter; elsewhere the same
// algorithm runs as ATen calls. With a soft cap (Gemma 2's final_logit_softcapping) the logits
// are c * tanh(logits / c) before the softmax; that runs as ATen calls everywhere.
#include <cstdint>

#include <torch/torch.h>

namespace studio::trainer {

// LLaMA-Factory's SFT loss variants: each target token's cross-entropy times a weight computed
// without gradient. dft (use_dft_loss): the target's probability p. eaft (use_eaft_loss): the
// entropy of the softmax over the token's 20 largest logits, divided by 3, to the power
// eaft_alpha. Only the ATen path computes them (the CUDA kernel is skipped).
struct TokenWeighting {
  bool dft = false;
  bool eaft = false;
  double eaft_alpha = 1.0;
  bool any() const { return dft || eaft; }
};

// LLaMA-Factory's ASFT (use_asft_loss): the DFT loss plus, on every valid target token,
// alpha x KL(q || p), q the softmax of a frozen reference model's logits at that token and p
// the policy's. The reference's final hidden states come in as `hidden` ([B, S, H], the same
// shape as the policy's) with its LM head `weight` (soft-capped by `softcap` like the policy's);
// the reference logits are formed chunk by chunk next to the policy's and need no gradient.
struct KlReference {
  torch::Tensor hidden;  // undefined: no KL term
  torch::Tensor weight;
  double alpha = 0.1;
  double softcap = 0.0;
  bool any() const { return hidden.defined(); }
};

// Sum over valid targets of -log softmax(hidden @ weight^T)[target], in fp32 (fp64 for double
// inputs). Only rows whose target is valid reach the LM head (masked prompt tokens cost
// nothing). With gradients wanted, the forward forms them as well, chunk by chunk: the
// gradient of the hidden states [valid rows x H] in their dtype and the head's [V x H] in fp32
// are kept until the backward, which only scales them by the upstream gradient.
// `targets` may be on the host while `hidden` is on a device (what the train loop passes): the
// valid rows are then found on the host, with no wait for the device.
torch::Tensor lm_cross_entropy_sum(const torch::Tensor& hidden,   // [B, S, H]
                                   const torch::Tensor& weight,   // [V, H]
                                   const torch::Tensor& targets,  // [B, S], -100 ignored
                                   int64_t chunk_tokens = 0,
                                   double softcap = 0.0,  // Gemma 2: c * tanh(logits / c)
                                   const TokenWeighting& weighting = {},
                                   const KlReference& kl = {});

// Per-token log-probabilities of the targets ([B, S] fp32 (fp64 for double inputs), 0 where
// ignored): what `studio-train
// logprobs` prints and DPO sums. Differentiable: the upstream gradient differs per token (it
// comes from the preference loss of each sequence's sum, known only after the log-probs of the
// whole batch, and under SP only after their all-reduce), so the backward runs the head again
// chunk by chunk and forms both gradients there; the forward keeps only its inputs.
torch::Tensor lm_target_logprobs(const torch::Tensor& hidden, const torch::Tensor& weight,
                                 const torch::Tensor& targets, int64_t chunk_tokens = 0,
                                 double softcap = 0.0);

// The chunk the two functions above use for `tokens` rows (tokens > 0). With a KL reference
// (`kl`) the loss holds three [chunk x vocab] buffers instead of one (the policy's logits, the
// reference's, its probabilities), so its chunk is a third as long: the same memory.
int64_t lm_loss_chunk_tokens(int64_t tokens, int64_t hidden, int64_t vocab,
                             int64_t chunk_tokens = 0, bool kl = false);

}  // namespace studio::trainer
