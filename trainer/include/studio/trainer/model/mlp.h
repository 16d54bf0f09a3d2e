#pragma once
// The decoder's feed-forward block, on its own so that the mixture-of-experts block (moe.h) builds
// its experts from it without the whole decoder.
#include <torch/torch.h>

#include <cstdint>

#include "studio/model_facts/model_info.h"
#include "studio/trainer/model/layers.h"

namespace studio::trainer {

// down(act(gate(x)) * up(x)), act silu or GELU-tanh, gate and up fused in gate_up_proj for
// Phi-3/GLM. With tile_tokens > 0 and more rows than that, the rows go through in tiles of
// tile_tokens, forward and (recomputing each tile) backward, so no [rows x intermediate]
// tensor exists whole; the result and gradients are those of the untiled MLP.
class MLPImpl : public torch::nn::Module {
 public:
  // `intermediate`: 0 for info.intermediate_size (MoE experts and shared experts pass theirs).
  MLPImpl(const studio::ModelInfo& info, const torch::TensorOptions& options,
          int64_t intermediate = 0);
  torch::Tensor forward(const torch::Tensor& x, int64_t tile_tokens = 0);
  torch::Tensor untiled(const torch::Tensor& x);

  Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
  Linear gate_up_proj{nullptr};  // Phi-3, GLM (then gate_proj and up_proj are null)

 private:
  bool gelu_;
};
TORCH_MODULE(MLP);

}  // namespace studio::trainer
