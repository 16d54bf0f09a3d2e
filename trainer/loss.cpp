#include "studio/trainer/loss.h"

#include "studio/kernels/fused_linear_ce.h"
#include "studio/trainer/batching/batch.h"

#if STUDIO_TRAINER_FUSED_KERNELS
#include "studio/kernels/fused_linear_ce_torch.h"
#endif

namespace studio::trainer {
namespace {

// Rows of `hidden` whose target is valid, flattened: [N, H], their targets [N] and, to put
// per-row results back, their row indices [N]. A chunk without any valid target (all prompt,
// all padding: common under sequence parallelism) yields row 0 with an ignored target instead
// of none, so the LM head runs and receives a (zero) gradient on every rank: the autograd graph,
// and with it every collective of the backward, never depends on where a rank's targets
// happen to fall (docs/SEQUENCE_PARALLEL.md, "Collective discipline").
// Targets on the host with hidden states on a device (what the train loop passes): the rows
// are found on the host and only their indices and targets travel, from pinned memory without
// waiting: no .item() or nonzero() on the device, whose results the host would have to wait
// for behind the whole forward.
struct ValidRows {
  torch::Tensor hidden, targets, index;
};
ValidRows valid_rows(const torch::Tensor& hidden, const torch::Tensor& targets) {
  auto h = hidden.reshape({-1, hidden.size(-1)});
  auto t = targets.reshape({-1}).to(torch::kLong);
  TORCH_CHECK(((t >= 0) | (t == kIgnoreIndex)).all().item<bool>(),
              "the loss: a target is negative but not ", kIgnoreIndex, " (the ignore index)");
  auto idx = (t != kIgnoreIndex).nonzero().squeeze(1);
  if (idx.numel() == 0) idx = torch::zeros({1}, t.options());
  auto picked = t.index_select(0, idx);
  if (t.device() != h.device()) {
    const bool pin = !t.is_cuda() && h.is_cuda();
    auto move = [&](const torch::Tensor& x) {
      return (pin ? x.pin_memory() : x).to(h.device(), /*non_blocking=*/pin);
    };
    idx = move(idx);
    picked = move(picked);
  }
  return {h.index_select(0, idx), picked, idx};
}

torch::ScalarType accumulation_dtype(const torch::Tensor& x) {
  return x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

// What one pass of the LM head over x's rows produced.
struct HeadPass {
  torch::Tensor loss_sum;  // [] sum of -log p(target) over valid rows (accumulation dtype)
  torch::Tensor logprobs;  // [T] log p(target), 0 where ignored (when asked)
  torch::Tensor grad_x;    // [T, H] in x's dtype (when asked)
  torch::Tensor grad_w;    // [V, H] in the accumulation dtype (when asked)
};

struct HeadPassWants {
  double softcap = 0.0;  // Gemma 2: the logits are c * tanh(logits / c)
  // Each row's -log p counts w times, w without gradient (TokenWeighting): the loss sum is
  // -sum w log p and each row's dL/dlogp is scaled by w.
  TokenWeighting weighting;
  // ASFT: the reference's rows [T, H] (undefined: none), its head, alpha and soft cap.
  torch::Tensor ref_x, ref_w;
  double kl_alpha = 0.0, ref_softcap = 0.0;
  bool logprobs = false;
  bool grad_x = false, grad_w = false;
  // [T] dL/d log p(target) of every row (ignored rows get none); undefined: no gradients.
  torch::Tensor dlogp;
};

// The fused algorithm in ATen calls, `chunk` rows at a time: logits in the accumulation dtype,
// their log-sum-exp and target log-probs; with gradients, the logits become dL/dlogits in place
// (dlogp x (onehot - softmax)) and both GEMMs run at once, so nothing of [T x V] is ever held.
HeadPass head_pass(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& t,
                   int64_t chunk, const HeadPassWants& want) {
  const auto acc = accumulation_dtype(x);
  const int64_t n = x.size(0);
  const bool grads = want.dlogp.defined() && (want.grad_x || want.grad_w);
  HeadPass out;
  out.loss_sum = torch::zeros({}, x.options().dtype(acc));
  if (want.logprobs) out.logprobs = torch::zeros({n}, x.options().dtype(acc));
  if (grads && want.grad_x) out.grad_x = torch::empty_like(x, at::MemoryFormat::Contiguous);
  // The first chunk's GEMM writes the head's gradient, the others add to it: no zero fill of
  // the [V, H] buffer (545 MB for Qwen2.5's vocabulary in fp32) and no read of it by that GEMM.
  if (grads && want.grad_w)
    out.grad_w = n > 0 ? torch::empty(w.sizes(), w.options().dtype(acc))
                       : torch::zeros(w.sizes(), w.options().dtype(acc));
  const auto wt = w.t();
  for (int64_t start = 0; start < n; start += chunk) {
    const int64_t len = std::min(chunk, n - start);
    const auto xc = x.narrow(0, start, len);
    const auto tc = t.narrow(0, start, len);
    // fp32 logits straight from the GEMM where LibTorch has that (CUDA bf16), as the kernel
    // computes them; elsewhere the GEMM's own dtype, converted (no copy when x is fp32).
    auto logits = x.is_cuda() && x.scalar_type() == torch::kBFloat16
                      ? at::mm(xc, wt, torch::kFloat)
                      : torch::mm(xc, wt).to(acc);
    torch::Tensor tanh;  // soft-capped: tanh(logits / c), for the gradient
    if (want.softcap > 0) {
      tanh = torch::tanh(logits / want.softcap);
      logits = tanh * want.softcap;
    }
    const auto valid = (tc != kIgnoreIndex).to(acc);
    const auto safe = tc.clamp_min(0).unsqueeze(1);
    torch::Tensor weight;  // per row, TokenWeighting's (undefined: 1)
    if (want.weighting.eaft) {
      // The entropy of the softmax over the 20 largest logits, / 3, to the power alpha.
      const auto top = std::get<0>(logits.topk(std::min<int64_t>(20, logits.size(1)), 1));
      const auto logq = top - top.logsumexp(1, /*keepdim=*/true);
      const auto entropy = -(logq.exp() * logq).sum(1);
      weight = (entropy / 3.0).pow(want.weighting.eaft_alpha) * valid;
    }
    // ASFT: d = r - z, the reference's (capped) logits minus the policy's, while z is still the
    // logits. KL(q || p) is then formed from d alone (below), so that it stays exact as the two
    // models agree: from log-sum-exps it would be the difference of two numbers near log(vocab),
    // off by more than the KL itself.
    torch::Tensor q, diff;
    if (want.ref_x.defined()) {
      const auto rc = want.ref_x.narrow(0, start, len);
      diff = rc.is_cuda() && rc.scalar_type() == torch::kBFloat16
                 ? at::mm(rc, want.ref_w.t(), torch::kFloat)
                 : torch::mm(rc, want.ref_w.t()).to(acc);
      if (want.ref_softcap > 0) diff.div_(want.ref_softcap).tanh_().mul_(want.ref_softcap);
      diff.sub_(logits);
    }
    // The log-sum-exp in place (at::logsumexp would take a chunk-sized temporary): the logits
    // become exp(logits - max), whose row sums give the log-sum-exp and, divided by them, the
    // softmax that the gradient needs.
    const auto picked = logits.gather(1, safe).squeeze(1);
    const auto max = std::get<0>(logits.max(1, /*keepdim=*/true));
    logits.sub_(max).exp_();
    const auto sums = logits.sum(1, /*keepdim=*/true);
    const auto logp = (picked - max.squeeze(1) - sums.log().squeeze(1)) * valid;
    if (want.weighting.dft) weight = logp.exp() * valid;  // the target's probability
    out.loss_sum.sub_(weight.defined() ? (logp * weight).sum() : logp.sum());
    if (want.logprobs) out.logprobs.narrow(0, start, len).copy_(logp);
    if (diff.defined()) {
      // With p = softmax(z) and q = softmax(z + d): log q - log p = d - log sum_v p e^d, and
      // sum_v p e^d = e^s (1 + c), c = sum_v p expm1(d - s), s = max(0, max d - 20) (no overflow).
      // So q = p e^(d - s) / (1 + c) and KL(q || p) = sum_v q d - s - log1p(c).
      const auto shift = (std::get<0>(diff.max(1, /*keepdim=*/true)) - 20).clamp_min_(0);
      q = (diff - shift).expm1_().mul_(logits);  // exp(z - max) expm1(d - s)
      const auto c = q.sum(1, /*keepdim=*/true).div_(sums);
      q.add_(logits).div_(sums * (1 + c));
      const auto kl = diff.mul_(q).sum(1) - shift.squeeze(1) - c.squeeze(1).log1p();
      out.loss_sum.add_((kl * valid).sum().mul_(want.kl_alpha));
    }
    if (!grads) continue;
    // softmax - onehot, scaled per row by -dL/dlogp: the gradient of the loss w.r.t. the logits.
    logits.div_(sums);
    // ASFT: alpha (p - q) more, scaled like the loss (dlogp = -1: the loss sum's own gradient).
    if (q.defined())
      q.sub_(logits).mul_((want.dlogp.narrow(0, start, len).to(acc) * valid * want.kl_alpha)
                              .unsqueeze(1));
    logits.scatter_add_(1, safe, torch::full({len, 1}, -1.0, logits.options()));
    logits.mul_((want.dlogp.narrow(0, start, len).to(acc) * (weight.defined() ? weight : valid))
                    .neg_()
                    .unsqueeze(1));
    if (q.defined()) logits.add_(q);
    if (tanh.defined()) logits.mul_(1 - tanh.square_());  // through the soft cap
    if (want.grad_x) {
      auto gx = out.grad_x.narrow(0, start, len);
      torch::mm_out(gx, logits.to(x.scalar_type()), w);
    }
    // beta 0 on the first chunk: the GEMM writes the uninitialised buffer without reading it.
    if (want.grad_w) out.grad_w.addmm_(logits.t(), xc.to(acc), /*beta=*/start == 0 ? 0 : 1);
  }
  return out;
}

#if STUDIO_TRAINER_FUSED_KERNELS
bool kernel_applies(const torch::Tensor& x, const torch::Tensor& w) {
  const auto dt = x.scalar_type();
  return x.is_cuda() && (dt == torch::kFloat || dt == torch::kBFloat16) && w.scalar_type() == dt &&
         w.is_cuda();
}
#endif

// The loss sum of x's rows and, with gradients, those of the sum (dlogp = -1 on every row).
HeadPass loss_with_grads(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& t,
                         int64_t chunk, bool grad_x, bool grad_w, double softcap,
                         const TokenWeighting& weighting, const torch::Tensor& ref_x = {},
                         const torch::Tensor& ref_w = {}, double kl_alpha = 0,
                         double ref_softcap = 0) {
#if STUDIO_TRAINER_FUSED_KERNELS
  // The kernel has no soft cap, no token weights and no KL term.
  if (softcap <= 0 && !weighting.any() && !ref_x.defined() && kernel_applies(x, w)) {
    auto r = kernels::fused_linear_ce(x.contiguous(), w.contiguous(), t.contiguous(),
                                      {grad_x, grad_w, /*logprobs=*/false}, chunk);
    return {r.loss_sum, torch::Tensor(), grad_x ? r.grad_x : torch::Tensor(),
            grad_w ? r.grad_weight : torch::Tensor()};
  }
#endif
  HeadPassWants want;
  want.softcap = softcap;
  want.weighting = weighting;
  want.ref_x = ref_x;
  want.ref_w = ref_w;
  want.kl_alpha = kl_alpha;
  want.ref_softcap = ref_softcap;
  want.grad_x = grad_x;
  want.grad_w = grad_w;
  if (grad_x || grad_w) want.dlogp = torch::full({x.size(0)}, -1.0, x.options().dtype(accumulation_dtype(x)));
  return head_pass(x, w, t, chunk, want);
}

torch::Tensor logprobs_only(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& t,
                            int64_t chunk, double softcap) {
#if STUDIO_TRAINER_FUSED_KERNELS
  if (softcap <= 0 && kernel_applies(x, w))
    return kernels::fused_linear_ce(x.contiguous(), w.contiguous(), t.contiguous(),
                                    {false, false, /*logprobs=*/true}, chunk)
        .target_logprobs;
#endif
  HeadPassWants want;
  want.softcap = softcap;
  want.logprobs = true;
  return head_pass(x, w, t, chunk, want).logprobs;
}

// Saved tensors of the two functions below are moved out in their backward: autograd keeps a
// node's saved_data until the whole graph goes, and these are the largest things it holds.
// (A second backward through the same graph finds them gone and says so.)
torch::Tensor take(torch::autograd::AutogradContext* ctx, const std::string& key) {
  auto it = ctx->saved_data.find(key);
  TORCH_CHECK(it != ctx->saved_data.end(),
              "the fused loss's backward ran twice: its gradients were formed once, in the "
              "forward (retain_graph is not supported)");
  torch::Tensor t = it->second.isNone() ? torch::Tensor() : it->second.toTensor();
  ctx->saved_data.erase(it);
  return t;
}

// x *= g (a scalar tensor) in fp32, a chunk of rows at a time, for x in a lower precision:
// g = 1 / the batch's tokens, rounded to bf16, would be off by up to 0.4%.
void scale_rows(torch::Tensor& x, const torch::Tensor& g, int64_t chunk) {
  if (x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kDouble) {
    x.mul_(g.to(x.scalar_type()));
    return;
  }
  const torch::Tensor g32 = g.to(torch::kFloat);
  for (int64_t start = 0; start < x.size(0); start += chunk) {
    auto rows = x.narrow(0, start, std::min(chunk, x.size(0) - start));
    rows.copy_(rows.to(torch::kFloat).mul_(g32));
  }
}

// The backward's result: gradients in their input's dtype (the head's fp32 sum rounds once, as
// a bf16 autograd graph's GEMM would), none for the non-tensor arguments.
// `others`: how many non-tensor arguments follow x and w.
torch::autograd::variable_list input_grads(const torch::Tensor& gx, const torch::Tensor& gw,
                                           torch::ScalarType x_dtype, torch::ScalarType w_dtype,
                                           size_t others = 5) {
  torch::autograd::variable_list out{gx.defined() ? gx.to(x_dtype) : gx,
                                     gw.defined() ? gw.to(w_dtype) : gw};
  out.resize(2 + others);
  return out;
}

// SFT: the forward forms the gradients of the loss sum; the backward scales them.
struct FusedCrossEntropy : torch::autograd::Function<FusedCrossEntropy> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& w, const torch::Tensor& t, int64_t chunk,
                               bool grad_x, bool grad_w, double softcap, bool dft, bool eaft,
                               double eaft_alpha, const torch::Tensor& ref_x,
                               const torch::Tensor& ref_w, double kl_alpha, double ref_softcap) {
    // No reference comes as empty tensors (autograd's functions take no undefined ones).
    auto given = [](const torch::Tensor& r) { return r.numel() > 0 ? r : torch::Tensor(); };
    HeadPass r = loss_with_grads(x, w, t, chunk, grad_x, grad_w, softcap, {dft, eaft, eaft_alpha},
                                 given(ref_x), given(ref_w), kl_alpha, ref_softcap);
    ctx->saved_data["grad_x"] = r.grad_x.defined() ? c10::IValue(r.grad_x) : c10::IValue();
    ctx->saved_data["grad_w"] = r.grad_w.defined() ? c10::IValue(r.grad_w) : c10::IValue();
    ctx->saved_data["chunk"] = chunk;
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["w_dtype"] = static_cast<int64_t>(w.scalar_type());
    return r.loss_sum;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::Tensor g = grads[0];
    torch::Tensor gx = take(ctx, "grad_x"), gw = take(ctx, "grad_w");
    // In place: the backward runs once (take() refuses a second).
    if (gx.defined()) scale_rows(gx, g, ctx->saved_data["chunk"].toInt());
    if (gw.defined()) gw.mul_(g.to(gw.scalar_type()));  // fp32 (fp64)
    return input_grads(gx, gw, static_cast<torch::ScalarType>(ctx->saved_data["x_dtype"].toInt()),
                       static_cast<torch::ScalarType>(ctx->saved_data["w_dtype"].toInt()),
                       /*others=*/12);
  }
};

// DPO: the forward keeps its inputs; the backward runs the head again with the per-row
// upstream gradient and forms both gradients.
struct FusedLogprobs : torch::autograd::Function<FusedLogprobs> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& w, const torch::Tensor& t, int64_t chunk,
                               bool grad_x, bool grad_w, double softcap) {
    ctx->save_for_backward({x, w, t});
    ctx->saved_data["chunk"] = chunk;
    ctx->saved_data["softcap"] = softcap;
    ctx->saved_data["grad_x"] = grad_x;
    ctx->saved_data["grad_w"] = grad_w;
    return logprobs_only(x, w, t, chunk, softcap);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w = saved[1], &t = saved[2];
    HeadPassWants want;
    want.grad_x = ctx->saved_data["grad_x"].toBool();
    want.grad_w = ctx->saved_data["grad_w"].toBool();
    want.dlogp = grads[0];
    want.softcap = ctx->saved_data["softcap"].toDouble();
    HeadPass r = head_pass(x, w, t, ctx->saved_data["chunk"].toInt(), want);
    return input_grads(r.grad_x, r.grad_w, x.scalar_type(), w.scalar_type());
  }
};

bool recording(const torch::Tensor& x, const torch::Tensor& w) {
  return torch::GradMode::is_enabled() && (x.requires_grad() || w.requires_grad());
}

}  // namespace

int64_t lm_loss_chunk_tokens(int64_t tokens, int64_t hidden, int64_t vocab, int64_t chunk_tokens,
                             bool kl) {
  const int64_t chunk = kernels::effective_chunk_tokens({tokens, hidden, vocab}, chunk_tokens);
  return std::max<int64_t>(1, kl && chunk_tokens <= 0 ? chunk / 3 : chunk);
}

torch::Tensor lm_cross_entropy_sum(const torch::Tensor& hidden, const torch::Tensor& weight,
                                   const torch::Tensor& targets, int64_t chunk_tokens,
                                   double softcap, const TokenWeighting& weighting,
                                   const KlReference& kl) {
  auto rows = valid_rows(hidden, targets);
  const int64_t chunk = lm_loss_chunk_tokens(rows.hidden.size(0), weight.size(1), weight.size(0),
                                             chunk_tokens, kl.any());
  torch::Tensor ref_x;  // the reference's rows at the policy's valid targets
  if (kl.any()) {
    TORCH_CHECK(kl.hidden.sizes() == hidden.sizes() && kl.weight.sizes() == weight.sizes(),
                "the ASFT loss: the reference model's hidden states or LM head ",
                kl.hidden.sizes(), " ", kl.weight.sizes(), " differ in shape from the policy's ",
                hidden.sizes(), " ", weight.sizes());
    ref_x = kl.hidden.reshape({-1, kl.hidden.size(-1)}).index_select(0, rows.index).detach();
  }
  const torch::Tensor ref_w = kl.any() ? kl.weight.detach() : torch::Tensor();
  if (!recording(rows.hidden, weight))
    return loss_with_grads(rows.hidden, weight, rows.targets, chunk, false, false, softcap,
                           weighting, ref_x, ref_w, kl.alpha, kl.softcap)
        .loss_sum;
  const auto none = torch::empty({0}, rows.hidden.options());
  return FusedCrossEntropy::apply(rows.hidden, weight, rows.targets, chunk,
                                  rows.hidden.requires_grad(), weight.requires_grad(), softcap,
                                  weighting.dft, weighting.eaft, weighting.eaft_alpha,
                                  kl.any() ? ref_x : none, kl.any() ? ref_w : none, kl.alpha,
                                  kl.softcap);
}

torch::Tensor lm_target_logprobs(const torch::Tensor& hidden, const torch::Tensor& weight,
                                 const torch::Tensor& targets, int64_t chunk_tokens,
                                 double softcap) {
  auto rows = valid_rows(hidden, targets);
  const int64_t chunk =
      lm_loss_chunk_tokens(rows.hidden.size(0), weight.size(1), weight.size(0), chunk_tokens);
  torch::Tensor picked =
      recording(rows.hidden, weight)
          ? FusedLogprobs::apply(rows.hidden, weight, rows.targets, chunk,
                                 rows.hidden.requires_grad(), weight.requires_grad(), softcap)
          : logprobs_only(rows.hidden, weight, rows.targets, chunk, softcap);
  auto out = torch::zeros({targets.numel()}, picked.options());
  return out.index_copy(0, rows.index, picked).reshape(targets.sizes());
}

}  // namespace studio::trainer
