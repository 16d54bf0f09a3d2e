#pragma once
// The decoder's leaf modules. Their parameters are created uninitialised, directly in the
// model's dtype and on its device (a 7B model is built on the GPU in bf16 without an fp32 CPU
// copy and without a random init that the checkpoint overwrites anyway): call
// CausalLM::init_weights or load_hf_state before use.

#include <torch/torch.h>

#include "studio/trainer/model/quant4_weight.h"

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
// Gives every parameter of `module` that has no bytes (made under DeferredAllocation) its bytes,
// uninitialised; the others are left as they are. Returns how many it allocated.
int64_t allocate_deferred(torch::nn::Module& module);

// While one of these lives on a thread, the LoRA adapters of every Linear are switched off: the
// forward is the base model's (PEFT's disable_adapter()), which is how a LoRA run's DPO/KTO
// reference is computed without a second copy of the weights.
class AdaptersDisabled {
 public:
  AdaptersDisabled();
  ~AdaptersDisabled();
  AdaptersDisabled(const AdaptersDisabled&) = delete;
  AdaptersDisabled& operator=(const AdaptersDisabled&) = delete;

 private:
  bool previous_;
};
bool adapters_disabled();

// y = x W^T (+ b); parameters "weight" [out, in] and "bias" [out].
// With a LoRA adapter (attach_lora, lora.h), PEFT's LoRA layer: submodules lora_A [r, in] and
// lora_B [out, r] (so the parameters are named ...q_proj.lora_A.weight as in PEFT's files) and
// y = x W^T + b + scaling * B(A(dropout(x))); with DoRA a parameter lora_magnitude_vector [out]
// m and y = x W^T + b + (m / |W + s BA|_row - 1) * base + (m / |W + s BA|_row) * s B(A(x')),
// base = x' W^T (x' = dropout(x)), the row norms detached (PEFT's DoRA, dora.py).
class LinearImpl : public torch::nn::Module {
 public:
  LinearImpl(int64_t in_features, int64_t out_features, bool bias,
             const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& x);

  torch::Tensor weight;
  torch::Tensor bias;  // undefined without bias
  // The adapter (attach_lora); null without.
  std::shared_ptr<LinearImpl> lora_A, lora_B;
  torch::Tensor lora_magnitude_vector;  // DoRA only
  double lora_scaling = 0;
  double lora_dropout = 0;  // applied in forwards that record gradients (training)

  // QLoRA: replaces the weight by the 4-bit form of `source` (its values as loaded: the
  // checkpoint's, not the compute dtype's; quant4_weight.h), kept where the weight was; `weight` is
  // then no longer a parameter (undefined) and the forward dequantizes it where it runs. The bias
  // stays.
  void quantize_weight(const Quant4Options& opt, const torch::Tensor& source);
  // The same with a 4-bit weight already made (a checkpoint saved quantized); its shape must be
  // the weight's.
  void set_quantized_weight(c10::intrusive_ptr<Quant4Weight> q);
  c10::intrusive_ptr<Quant4Weight> quant;
  // The weight's [out, in] and its dtype and device, whether it is held whole or in 4 bits.
  int64_t out_features() const { return out_features_; }
  int64_t in_features() const { return in_features_; }
  const torch::TensorOptions& weight_options() const { return options_; }

 private:
  int64_t in_features_ = 0, out_features_ = 0;
  torch::TensorOptions options_;
  // x W^T without the bias, W the weight or its dequantized 4-bit form.
  torch::Tensor base_product(const torch::Tensor& x);
  torch::Tensor adapter_forward(const torch::Tensor& x, const torch::Tensor& y);
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
