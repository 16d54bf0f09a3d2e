#pragma once
// The key/value cache of incremental decoding (generate.h): what each layer's attention appends
// to and attends over when LayerContext::kv_cache is set.
#include <torch/torch.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace studio::trainer {

// Keys and values of every layer for the tokens decoded so far, [B, Hkv, length, D] each, in
// buffers that grow by doubling so that a step does not copy the whole cache.
class KVCache {
 public:
  explicit KVCache(int64_t layers);
  int64_t layers() const { return static_cast<int64_t>(keys_.size()); }
  int64_t length() const { return length_; }
  // Stores layer's k/v [B, Hkv, S, D] after the cached ones; returns the keys and values of all
  // length() + S positions. Every layer appends the same S before advance(S).
  std::pair<torch::Tensor, torch::Tensor> append(int64_t layer, const torch::Tensor& k,
                                                 const torch::Tensor& v);
  void advance(int64_t tokens);
  void clear();  // length 0; the buffers are kept for the next sequence

 private:
  std::vector<torch::Tensor> keys_, values_;
  int64_t length_ = 0;
};

}  // namespace studio::trainer
