#include "studio/trainer/loss.h"

#include "studio/trainer/data/batch.h"

namespace studio::trainer {
namespace {

// Rows of `hidden` whose target is valid, flattened: [N, H], their targets [N] and per-row weights
// [N]. A chunk without any valid target (all prompt, all padding: common under sequence
// parallelism) yields one row of weight 0 instead of none, so the LM head runs and receives a
// (zero) gradient on every rank: the autograd graph, and with it the gradient buckets and every
// collective, never depends on where a rank's targets happen to fall (docs/SEQUENCE_PARALLEL.md,
// "Collective discipline").
struct ValidRows {
  torch::Tensor hidden, targets, weights;
};
ValidRows valid_rows(const torch::Tensor& hidden, const torch::Tensor& targets) {
  auto h = hidden.reshape({-1, hidden.size(-1)});
  auto t = targets.reshape({-1});
  auto idx = (t != kIgnoreIndex).nonzero().squeeze(1);
  auto opts = torch::TensorOptions().dtype(torch::kFloat).device(hidden.device());
  if (idx.numel() == 0) {
    auto first = torch::zeros({1}, t.options());
    return {h.narrow(0, 0, 1), first, torch::zeros({1}, opts)};
  }
  return {h.index_select(0, idx), t.index_select(0, idx), torch::ones({idx.numel()}, opts)};
}

}  // namespace

torch::Tensor lm_cross_entropy_sum(const torch::Tensor& hidden, const torch::Tensor& weight,
                                   const torch::Tensor& targets, int64_t chunk_tokens) {
  auto [h, t, w] = valid_rows(hidden, targets);
  torch::Tensor total;
  const int64_t n = h.size(0);
  for (int64_t start = 0; start < n; start += chunk_tokens) {
    const int64_t len = std::min(chunk_tokens, n - start);
    auto logits = torch::matmul(h.narrow(0, start, len), weight.t()).to(torch::kFloat);
    auto ce = torch::nn::functional::cross_entropy(
        logits, t.narrow(0, start, len),
        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
    auto part = (ce * w.narrow(0, start, len)).sum();
    total = total.defined() ? total + part : part;
  }
  return total;
}

torch::Tensor lm_target_logprobs(const torch::Tensor& hidden, const torch::Tensor& weight,
                                 const torch::Tensor& targets, int64_t chunk_tokens) {
  auto h = hidden.reshape({-1, hidden.size(-1)});
  auto t = targets.reshape({-1});
  auto out = torch::zeros({t.size(0)}, hidden.options().dtype(torch::kFloat));
  for (int64_t start = 0; start < h.size(0); start += chunk_tokens) {
    const int64_t len = std::min(chunk_tokens, h.size(0) - start);
    auto logp = torch::log_softmax(torch::matmul(h.narrow(0, start, len), weight.t()).to(torch::kFloat), -1);
    auto tt = t.narrow(0, start, len);
    auto valid = tt != kIgnoreIndex;
    auto picked = logp.gather(1, tt.clamp_min(0).unsqueeze(1)).squeeze(1);
    out.narrow(0, start, len).copy_(torch::where(valid, picked, torch::zeros_like(picked)));
  }
  return out.reshape(targets.sizes());
}

}  // namespace studio::trainer
