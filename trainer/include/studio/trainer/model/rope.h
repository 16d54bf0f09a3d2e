#pragma once
// Rotary position embeddings exactly as Hugging Face transformers computes them
// (modeling_rope_utils.py and the models' rotate_half): the inverse frequencies and the cos/sin
// multiplier ("attention scaling") for each rope_scaling type, and their application to q and k.
//
// Positions are always explicit: under sequence parallelism a rank holds non-contiguous global
// positions (zigzag), so nothing here assumes arange.

#include <torch/torch.h>

#include <utility>
#include <vector>

#include "studio/model_facts/model_info.h"

namespace studio::trainer {

struct RopeFrequencies {
  torch::Tensor inv_freq;          // fp32 [head_dim / 2]
  double attention_scaling = 1.0;  // multiplies cos and sin (yarn's attention factor, else 1)
};

// HF's ROPE_INIT_FUNCTIONS[rope_type](config): default, linear, dynamic, llama3, yarn,
// longrope, over the rotary dimensions (head_dim x partial_rotary_factor).
// `seq_len` matters for dynamic and longrope only: the sequence length the frequencies are
// stretched to (dynamic: values up to max_position_embeddings give the default frequencies;
// longrope: the long factors beyond original_max_position_embeddings). Under SP it must be the
// global length, never a rank's local one. Throws std::invalid_argument for other types.
RopeFrequencies rope_frequencies(const studio::ModelInfo& info, int64_t seq_len = 0);
// Gemma 3's sliding layers: plain RoPE with rope_local_theta.
RopeFrequencies rope_local_frequencies(const studio::ModelInfo& info);
// dynamic and longrope: the frequencies follow the sequence length.
bool rope_depends_on_length(const studio::ModelInfo& info);

// cos, sin [B, S, head_dim] in fp32 for position_ids [B, S] (any integer dtype): the angles
// inv_freq * position in fp32, duplicated over both halves, times attention_scaling.
std::pair<torch::Tensor, torch::Tensor> rope_cos_sin(const RopeFrequencies& freqs,
                                                     const torch::Tensor& position_ids);

// [-x2, x1] for x = [x1, x2] split in halves of the last dimension.
torch::Tensor rotate_half(const torch::Tensor& x);

// [-x_odd, x_even] interleaved: each pair (x[2i], x[2i+1]) becomes (-x[2i+1], x[2i]) (GLM).
torch::Tensor rotate_pairs(const torch::Tensor& x);

// GLM's cos/sin: the first R/2 values, each repeated for its pair (once per forward).
torch::Tensor interleave_cos_sin(const torch::Tensor& cos_or_sin);

// x * cos + rotate(x) * sin for x [B, H, S, D] and cos/sin [B, S, R]: the first R <= D
// dimensions rotate, the rest pass unchanged (partial rotary). rotate is rotate_half, or
// rotate_pairs when interleaved (GLM; cos/sin then come through interleave_cos_sin). Like HF,
// cos and sin are first cast to x's dtype and the rotation is computed in that dtype.
torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& cos,
                         const torch::Tensor& sin, bool interleaved = false);

}  // namespace studio::trainer
