#include "studio/trainer/loss.h"

#include "studio/trainer/data/batch.h"

namespace studio::trainer {
namespace {

// Rows of `hidden` whose target is valid, flattened: [N, H] and their targets [N].
std::pair<torch::Tensor, torch::Tensor> valid_rows(const torch::Tensor& hidden,
                                                   const torch::Tensor& targets) {
  auto h = hidden.reshape({-1, hidden.size(-1)});
  auto t = targets.reshape({-1});
  auto idx = (t != kIgnoreIndex).nonzero().squeeze(1);
  return {h.index_select(0, idx), t.index_select(0, idx)};
}

}  // namespace

torch::Tensor lm_cross_entropy_sum(const torch::Tensor& hidden, const torch::Tensor& weight,
                                   const torch::Tensor& targets, int64_t chunk_tokens) {
  auto [h, t] = valid_rows(hidden, targets);
  // Starts from 0 * sum(hidden) rather than a constant: a sequence-parallel rank whose chunk has
  // no valid target (all prompt, all padding) must still run the backward through its attention,
  // which its SP peers wait for in the ring / all-to-all.
  auto total = (hidden.sum() * 0).to(torch::kFloat);
  const int64_t n = h.size(0);
  for (int64_t start = 0; start < n; start += chunk_tokens) {
    const int64_t len = std::min(chunk_tokens, n - start);
    auto logits = torch::matmul(h.narrow(0, start, len), weight.t()).to(torch::kFloat);
    total = total + torch::nn::functional::cross_entropy(
                        logits, t.narrow(0, start, len),
                        torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
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
