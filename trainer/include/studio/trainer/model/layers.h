#pragma once
// The decoder's leaf modules. Their parameters are created uninitialised, directly in the
// model's dtype and on its device (a 7B model is built on the GPU in bf16 without an fp32 CPU
// copy and without a random init that the checkpoint overwrites anyway): call
// CausalLM::init_weights or load_hf_state before use.

#include <torch/torch.h>

namespace studio::trainer {

// While one of these lives on a thread, the parameters created there have their full shape but
// no bytes yet (an empty storage): sharded training (ZeRO-3) fills them one layer at a time, so
// that no rank ever holds the whole model.
class DeferredAllocation {
 public:
  DeferredAllocation();
  ~DeferredAllocation();
  DeferredAllocation(const DeferredAllocation&) = delete;
  DeferredAllocation& operator=(const DeferredAllocation&) = delete;

 private:
  bool previous_;
};

// A parameter tensor of `sizes`: uninitialised bytes, or none under DeferredAllocation.
torch::Tensor new_parameter(at::IntArrayRef sizes, const torch::TensorOptions& options);

// y = x W^T (+ b); parameters "weight" [out, in] and "bias" [out].
class LinearImpl : public torch::nn::Module {
 public:
  LinearImpl(int64_t in_features, int64_t out_features, bool bias,
             const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor weight;
  torch::Tensor bias;  // undefined without bias
};
TORCH_MODULE(Linear);

// Token embedding; parameter "weight" [vocab, hidden]. Like nn.Embedding(padding_idx), the row
// of padding_idx (when >= 0) receives no gradient.
class EmbeddingImpl : public torch::nn::Module {
 public:
  EmbeddingImpl(int64_t vocab, int64_t hidden, int64_t padding_idx,
                const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& ids);

  torch::Tensor weight;
  int64_t padding_idx = -1;
};
TORCH_MODULE(Embedding);

// HF LlamaRMSNorm: weight * (x.float() * rsqrt(mean(x^2) + eps)).to(x.dtype). The normalisation
// runs in fp32 (fp64 for double inputs, which HF would round to fp32; the gradient checks need
// it), the weight multiplies in the promoted dtype of weight and x. Parameter "weight" [dim].
// For the backward it keeps only its input and the fp32 1/rms of each row (its own autograd
// function); on CUDA, fp32 and bf16 run the fused kernels of kernels/ (rmsnorm.h), which
// multiply by the weight before rounding to x's dtype.
// With unit_offset (Gemma's RMSNorm): ((x.float() * rsqrt(mean(x^2) + eps)) * (1 + w.float()))
// .to(x.dtype), through autograd's own ops; its weight starts at 0 (init_weights).
class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t dim, double eps, const torch::TensorOptions& options,
              bool unit_offset = false);
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor weight;
  double eps;
  bool unit_offset;
};
TORCH_MODULE(RMSNorm);

}  // namespace studio::trainer
