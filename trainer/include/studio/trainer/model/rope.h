#pragma once
// Rotary position embeddings exactly as Hugging Face transformers computes them
// (modeling_rope_utils.py and the models' rotate_half): the inverse frequencies and the cos/sin
// multiplier ("attention scaling") for each rope_scaling type, and their application to q and k.
//
// Positions are always explicit: under sequence parallelism a rank holds non-contiguous global
// positions (zigzag), so nothing here assumes arange.

#include <torch/torch.h>

#include <utility>

#include "studio/config/model_info.h"

namespace studio::trainer {

struct RopeFrequencies {
  torch::Tensor inv_freq;          // fp32 [head_dim / 2]
  double attention_scaling = 1.0;  // multiplies cos and sin (yarn's attention factor, else 1)
};

// HF's ROPE_INIT_FUNCTIONS[rope_type](config): default, linear, dynamic, llama3, yarn.
// `seq_len` matters for dynamic only: the sequence length the frequencies are stretched to
// (values up to max_position_embeddings give the default frequencies). Under SP it must be the
// global length, never a rank's local one. Throws std::invalid_argument for other types.
RopeFrequencies rope_frequencies(const studio::ModelInfo& info, int64_t seq_len = 0);

// cos, sin [B, S, head_dim] in fp32 for position_ids [B, S] (any integer dtype): the angles
// inv_freq * position in fp32, duplicated over both halves, times attention_scaling.
std::pair<torch::Tensor, torch::Tensor> rope_cos_sin(const RopeFrequencies& freqs,
                                                     const torch::Tensor& position_ids);

// [-x2, x1] for x = [x1, x2] split in halves of the last dimension.
torch::Tensor rotate_half(const torch::Tensor& x);

// x * cos + rotate_half(x) * sin for x [B, H, S, D] and cos/sin [B, S, D]. Like HF, cos and sin
// are first cast to x's dtype and the rotation is computed in that dtype.
torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& cos,
                         const torch::Tensor& sin);

}  // namespace studio::trainer
