#pragma once
// The auxiliary load-balancing loss of the mixture-of-experts decoders (Qwen2-MoE, Qwen3-MoE):
// transformers' load_balancing_loss_func, which it adds as router_aux_loss_coef x aux when
// output_router_logits is set (LLaMA-Factory: moe_aux_loss_coef). Over one forward, with T the
// real (non-padding) tokens, L the MoE layers, E the experts and p_{l,t} a token's router
// probabilities in layer l:
//   f_e = (1 / (L T)) sum_{l,t} [e among the top k of p_{l,t}]      (no gradient)
//   P_e = (1 / (L T)) sum_{l,t} p_{l,t,e}
//   aux = E sum_e f_e P_e
// Under sequence parallelism T is the whole sequence's tokens: the SP ranks sum their counts
// once per forward (finish), so every rank's aux is that of the unsplit micro-batch.
//
// The gradient reaches each router inside its layer's backward, not through a loss graph: the
// probabilities pass through an identity (apply) whose backward adds
//   weight x d aux / d p_{l,t,e} = weight x E f_e / (L T)   for every real token t,
// with f_e known once the forward is done. So layers recomputed by gradient checkpointing get
// it too, and the trainer's one backward of its LM loss carries both.
#include <torch/torch.h>

#include <cstdint>
#include <functional>

#include "studio/model_facts/model_info.h"
#include "studio/trainer/model/layers.h"
#include "studio/trainer/model/mlp.h"

namespace studio::trainer {

class MoeAuxLoss {
 public:
  // Before the forward of a micro-batch whose aux loss counts: its real tokens, 1 (real) or 0
  // (padding) per token, in the order the layers see them ([B, S_local], any dtype).
  void begin(const torch::Tensor& token_mask);
  // Whether begin() was called and end() not yet: MoE layers then record and apply.
  bool active() const { return active_; }

  // Called by each MoE layer in its forward. `probs`: [T, E] fp32 router probabilities;
  // record also takes the picked experts [T, k]. Recorded only in the forward itself, not in a
  // checkpointed layer's recompute (begin() to finish()).
  torch::Tensor apply(const torch::Tensor& probs);
  void record(const torch::Tensor& probs, const torch::Tensor& top_k);

  // After the forward, on every rank whatever its tokens: `all_reduce` (may be empty: one
  // process) sums a double tensor over the ranks that share the micro-batch's sequences (the SP
  // group). Returns aux (a 0-dim double tensor, no gradient) and makes the backward add
  // weight x its gradient.
  torch::Tensor finish(double weight, const std::function<void(torch::Tensor&)>& all_reduce);
  // After the backward (or when no backward follows).
  void end();

  // The gradient the backward adds per real token: [E] fp32 (undefined before finish()).
  const torch::Tensor& gradient() const { return grad_; }
  const torch::Tensor& mask() const { return mask_; }

 private:
  bool active_ = false, collecting_ = false;
  int64_t layers_ = 0;
  torch::Tensor mask_;          // [T] fp32
  torch::Tensor counts_, sums_; // [E] fp64
  torch::Tensor grad_;          // [E] fp32
};

// A mixture-of-experts MLP (Qwen2-MoE, Qwen3-MoE; ModelInfo's MoE fields): the router `gate`
// picks num_experts_per_tok experts per token by fp32 softmax probability (renormalised over
// the picked ones with norm_topk_prob); the output is the picked experts' outputs weighted by
// those probabilities, plus, for Qwen2-MoE, sigmoid(shared_expert_gate(x)) x shared_expert(x).
// Tokens are routed independently of each other, so sequence parallelism changes nothing here.
// Each forward waits once for the device (the experts' token counts). Parameter names are the
// Hugging Face checkpoints': mlp.gate.weight, mlp.experts.{e}.{gate,up,down}_proj.weight,
// mlp.shared_expert.*, mlp.shared_expert_gate.weight.
class SparseMoeBlockImpl : public torch::nn::Module {
 public:
  SparseMoeBlockImpl(const studio::ModelInfo& info, const torch::TensorOptions& options);
  // `aux`: records the routing of this forward and routes the aux loss's gradient (when active).
  torch::Tensor forward(const torch::Tensor& x, MoeAuxLoss* aux = nullptr);

  Linear gate{nullptr};
  torch::nn::ModuleList experts{nullptr};
  MLP shared_expert{nullptr};        // Qwen2-MoE only
  Linear shared_expert_gate{nullptr};  // Qwen2-MoE only

 private:
  int64_t top_k_;
  bool norm_topk_;
};
TORCH_MODULE(SparseMoeBlock);

}  // namespace studio::trainer
