#include "studio/trainer/model/moe.h"

#include <stdexcept>

namespace studio::trainer {

namespace {

// Identity forward; the backward adds mask_t x gradient_e to the incoming gradient.
struct AuxGradient : torch::autograd::Function<AuxGradient> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& probs,
                               int64_t aux) {
    ctx->saved_data["aux"] = aux;
    return probs.view_as(probs);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto* aux = reinterpret_cast<const MoeAuxLoss*>(ctx->saved_data["aux"].toInt());
    torch::Tensor g = grads[0];
    if (aux->active() && aux->gradient().defined()) {
      const torch::Tensor& m = aux->mask();
      g = g + m.to(g.device(), g.scalar_type()).unsqueeze(1) *
                  aux->gradient().to(g.device(), g.scalar_type()).unsqueeze(0);
    }
    return {g, torch::Tensor()};
  }
};

}  // namespace

void MoeAuxLoss::begin(const torch::Tensor& token_mask) {
  mask_ = token_mask.reshape({-1}).to(torch::kFloat);
  counts_ = sums_ = grad_ = torch::Tensor();
  layers_ = 0;
  active_ = collecting_ = true;
}

torch::Tensor MoeAuxLoss::apply(const torch::Tensor& probs) {
  if (!active_ || !torch::GradMode::is_enabled() || !probs.requires_grad()) return probs;
  return AuxGradient::apply(probs, static_cast<int64_t>(reinterpret_cast<intptr_t>(this)));
}

void MoeAuxLoss::record(const torch::Tensor& probs, const torch::Tensor& top_k) {
  if (!active_ || !collecting_) return;
  if (probs.size(0) != mask_.size(0))
    throw std::logic_error("MoeAuxLoss: a layer routed " + std::to_string(probs.size(0)) +
                           " tokens, the micro-batch has " + std::to_string(mask_.size(0)));
  torch::NoGradGuard no_grad;
  const torch::Tensor m = mask_.to(probs.device());
  const int64_t experts = probs.size(1);
  const torch::Tensor c =
      torch::zeros({experts}, probs.options().dtype(torch::kDouble))
          .scatter_add_(0, top_k.reshape({-1}),
                        m.to(torch::kDouble).repeat_interleave(top_k.size(1)));
  const torch::Tensor s = (probs.to(torch::kDouble) * m.to(torch::kDouble).unsqueeze(1)).sum(0);
  counts_ = counts_.defined() ? counts_ + c : c;
  sums_ = sums_.defined() ? sums_ + s : s;
  ++layers_;
}

torch::Tensor MoeAuxLoss::finish(double weight,
                                 const std::function<void(torch::Tensor&)>& all_reduce) {
  if (!active_) throw std::logic_error("MoeAuxLoss::finish without begin");
  collecting_ = false;
  if (layers_ == 0) throw std::logic_error("MoeAuxLoss::finish: no MoE layer ran");
  torch::NoGradGuard no_grad;
  const int64_t experts = counts_.size(0);
  torch::Tensor packed =
      torch::cat({counts_, sums_, mask_.to(counts_.device(), torch::kDouble).sum().reshape({1})});
  if (all_reduce) all_reduce(packed);
  const torch::Tensor rows =
      packed.narrow(0, 2 * experts, 1).clamp_min(1.0) * static_cast<double>(layers_);
  const torch::Tensor f = packed.narrow(0, 0, experts) / rows;
  const torch::Tensor p = packed.narrow(0, experts, experts) / rows;
  grad_ = (f * (weight * static_cast<double>(experts)) / rows).to(torch::kFloat);
  return (f * p).sum() * static_cast<double>(experts);
}

void MoeAuxLoss::end() {
  active_ = collecting_ = false;
  mask_ = counts_ = sums_ = grad_ = torch::Tensor();
  layers_ = 0;
}

// --- the MoE layer --------------------------------------------------------------------------

SparseMoeBlockImpl::SparseMoeBlockImpl(const studio::ModelInfo& info,
                                       const torch::TensorOptions& options)
    : top_k_(info.num_experts_per_tok), norm_topk_(info.norm_topk_prob) {
  // Registered in the order of the Hugging Face checkpoints: gate, experts, shared expert.
  gate = register_module("gate", Linear(info.hidden_size, info.num_experts, false, options));
  experts = register_module("experts", torch::nn::ModuleList());
  for (int64_t e = 0; e < info.num_experts; ++e)
    experts->push_back(MLP(info, options, info.moe_intermediate_size));
  if (info.shared_expert_intermediate_size > 0) {
    shared_expert =
        register_module("shared_expert", MLP(info, options, info.shared_expert_intermediate_size));
    shared_expert_gate =
        register_module("shared_expert_gate", Linear(info.hidden_size, 1, false, options));
  }
}

torch::Tensor SparseMoeBlockImpl::forward(const torch::Tensor& x, MoeAuxLoss* aux) {
  const int64_t h = x.size(-1), rows = h > 0 ? x.numel() / h : 0;
  const auto n_experts = static_cast<int64_t>(experts->size());
  const torch::Tensor flat = x.reshape({rows, h});
  // Router: fp32 softmax over the logits (computed in the weights' dtype), the top k picked,
  // renormalised with norm_topk_prob, then in the activations' dtype (as transformers; fp64
  // models, which only tests run, keep fp64).
  torch::Tensor probs = torch::softmax(
      gate(flat), -1, x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat);
  const bool with_aux = aux && aux->active();
  if (with_aux) probs = aux->apply(probs);
  auto [top, picked] = probs.topk(top_k_, -1);
  if (with_aux) aux->record(probs.detach(), picked);
  if (norm_topk_) top = top / top.sum(-1, /*keepdim=*/true);
  const torch::Tensor weights = top.to(x.scalar_type());

  // The (token, slot) pairs sorted by expert, so each expert runs once on its rows. Every expert
  // runs, with no rows if none picked it: its weights then get a zero gradient, as on every
  // other rank (the gradient reduction covers every parameter alike).
  const torch::Tensor slots = picked.reshape({-1});
  const torch::Tensor order =
      std::get<1>(slots.sort(/*stable=*/std::optional<bool>(true), /*dim=*/0, /*descending=*/false));
  const torch::Tensor token = order.div(top_k_, "floor");
  const torch::Tensor counts = torch::bincount(slots, {}, n_experts).to(torch::kCPU);
  const torch::Tensor xs = flat.index_select(0, token);
  const torch::Tensor ws = weights.reshape({-1}).index_select(0, order).unsqueeze(1);
  std::vector<torch::Tensor> outs;
  outs.reserve(static_cast<size_t>(n_experts));
  int64_t at = 0;
  const auto* count = counts.data_ptr<int64_t>();
  for (int64_t e = 0; e < n_experts; ++e) {
    const int64_t n = count[e];
    outs.push_back(experts->ptr<MLPImpl>(static_cast<size_t>(e))->untiled(xs.narrow(0, at, n)) *
                   ws.narrow(0, at, n));
    at += n;
  }
  // Back to (token, slot) order and summed over each token's k slots. (An index_add would keep
  // the whole [rows k, hidden] source for its backward; index_select keeps only the order.)
  const torch::Tensor unsort =
      torch::empty_like(order).scatter_(0, order, torch::arange(order.numel(), order.options()));
  torch::Tensor out = torch::cat(outs).index_select(0, unsort).view({rows, top_k_, h}).sum(1);
  if (shared_expert)
    out = out + torch::sigmoid(shared_expert_gate(flat)) * shared_expert->untiled(flat);
  return out.reshape(x.sizes());
}

}  // namespace studio::trainer
