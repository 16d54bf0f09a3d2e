#include "studio/trainer/model/mlp.h"

#include <stdexcept>

namespace studio::trainer {

MLPImpl::MLPImpl(const studio::ModelInfo& info, const torch::TensorOptions& options,
                 int64_t intermediate)
    : gelu_(info.hidden_act == "gelu_pytorch_tanh") {
  const int64_t h = info.hidden_size, i = intermediate > 0 ? intermediate : info.intermediate_size;
  if (info.fused_gate_up) {
    gate_up_proj = register_module("gate_up_proj", Linear(h, 2 * i, info.mlp_bias, options));
  } else {
    gate_proj = register_module("gate_proj", Linear(h, i, info.mlp_bias, options));
    up_proj = register_module("up_proj", Linear(h, i, info.mlp_bias, options));
  }
  down_proj = register_module("down_proj", Linear(i, h, info.mlp_bias, options));
}

torch::Tensor MLPImpl::untiled(const torch::Tensor& x) {
  torch::Tensor gate, up;
  if (gate_up_proj) {
    const torch::Tensor both = gate_up_proj(x);
    const int64_t i = both.size(-1) / 2;
    gate = both.narrow(-1, 0, i), up = both.narrow(-1, i, i);
  } else {
    gate = gate_proj(x), up = up_proj(x);
  }
  return down_proj((gelu_ ? torch::gelu(gate, "tanh") : torch::silu(gate)) * up);
}

namespace {

// The MLP over row tiles: the forward keeps only its input; the backward recomputes one tile
// at a time with grad and back-propagates through it (reentrant, as activation_checkpoint.cpp),
// so the weights accumulate their gradients tile by tile.
struct TiledMlp : torch::autograd::Function<TiledMlp> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               int64_t mlp, int64_t tile) {
    ctx->save_for_backward({x});
    ctx->saved_data["mlp"] = mlp;
    ctx->saved_data["tile"] = tile;
    torch::NoGradGuard no_grad;
    return reinterpret_cast<MLPImpl*>(mlp)->forward(x, tile);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::Tensor x = ctx->get_saved_variables()[0];
    auto* mlp = reinterpret_cast<MLPImpl*>(ctx->saved_data["mlp"].toInt());
    const int64_t tile = ctx->saved_data["tile"].toInt(), rows = x.size(0);
    torch::Tensor gx = torch::empty_like(x, at::MemoryFormat::Contiguous);
    for (int64_t start = 0; start < rows; start += tile) {
      const int64_t len = std::min(tile, rows - start);
      const torch::Tensor xt = x.narrow(0, start, len).detach().requires_grad_(true);
      torch::Tensor y;
      {
        torch::AutoGradMode grad_on(true);
        y = mlp->untiled(xt);
      }
      torch::autograd::backward({y}, {grads[0].narrow(0, start, len)});
      gx.narrow(0, start, len).copy_(xt.grad());
    }
    return {gx, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor MLPImpl::forward(const torch::Tensor& x, int64_t tile_tokens) {
  const int64_t h = x.size(-1), rows = h > 0 ? x.numel() / h : 0;
  if (tile_tokens <= 0 || rows <= tile_tokens) return untiled(x);
  const torch::Tensor flat = x.reshape({rows, h});
  if (torch::GradMode::is_enabled() && (flat.requires_grad() || down_proj->weight.requires_grad())) {
    const torch::Tensor in = flat.requires_grad() ? flat : flat.detach().requires_grad_(true);
    return TiledMlp::apply(in, static_cast<int64_t>(reinterpret_cast<intptr_t>(this)), tile_tokens)
        .reshape(x.sizes());
  }
  // No graph to record (evaluation, or the forward of a checkpointed layer): tile by tile.
  torch::Tensor out = torch::empty({rows, h}, x.options());
  for (int64_t start = 0; start < rows; start += tile_tokens) {
    const int64_t len = std::min(tile_tokens, rows - start);
    out.narrow(0, start, len).copy_(untiled(flat.narrow(0, start, len)));
  }
  return out.reshape(x.sizes());
}

}  // namespace studio::trainer
