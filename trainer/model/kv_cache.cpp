#include "studio/trainer/model/kv_cache.h"

#include <algorithm>

namespace studio::trainer {

KVCache::KVCache(int64_t layers) : keys_(static_cast<std::size_t>(layers)),
                                   values_(static_cast<std::size_t>(layers)) {}

namespace {

// Room for `need` positions along dim 2, keeping the first `keep`; grows by doubling.
void reserve(torch::Tensor& buffer, const torch::Tensor& like, int64_t need, int64_t keep) {
  const bool fits = buffer.defined() && buffer.size(2) >= need && buffer.size(0) == like.size(0) &&
                    buffer.size(1) == like.size(1) && buffer.size(3) == like.size(3) &&
                    buffer.scalar_type() == like.scalar_type() &&
                    buffer.device() == like.device();
  if (fits) return;
  int64_t capacity = std::max<int64_t>(need, 64);
  if (buffer.defined()) capacity = std::max(capacity, 2 * buffer.size(2));
  torch::Tensor grown =
      torch::empty({like.size(0), like.size(1), capacity, like.size(3)}, like.options());
  if (buffer.defined() && keep > 0) grown.narrow(2, 0, keep).copy_(buffer.narrow(2, 0, keep));
  buffer = grown;
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> KVCache::append(int64_t layer, const torch::Tensor& k,
                                                        const torch::Tensor& v) {
  TORCH_CHECK(layer >= 0 && layer < layers(), "KVCache: layer ", layer, " of ", layers());
  TORCH_CHECK(k.dim() == 4 && v.sizes() == k.sizes(), "KVCache: k ", k.sizes(), " and v ",
              v.sizes(), " must both be [B, Hkv, S, D]");
  auto& keys = keys_[static_cast<std::size_t>(layer)];
  auto& values = values_[static_cast<std::size_t>(layer)];
  const int64_t s = k.size(2), need = length_ + s;
  reserve(keys, k, need, length_);
  reserve(values, v, need, length_);
  keys.narrow(2, length_, s).copy_(k);
  values.narrow(2, length_, s).copy_(v);
  return {keys.narrow(2, 0, need), values.narrow(2, 0, need)};
}

void KVCache::advance(int64_t tokens) { length_ += tokens; }

void KVCache::clear() { length_ = 0; }

}  // namespace studio::trainer
