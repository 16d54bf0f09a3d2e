#pragma once
// Mixed precision: the model computes in bf16 while the optimizer updates fp32 master copies.
// With an fp32 model the masters are the parameters themselves and every call is a no-op.
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "studio/trainer/safetensors.h"

namespace studio::trainer {

class MasterWeights {
 public:
  explicit MasterWeights(const NamedTensors& model_params);
  // What the optimizer updates and checkpoints save (fp32).
  const NamedTensors& params() const { return masters_; }
  // After EACH backward (every micro-batch): adds the model's grads to the master grads in fp32
  // and clears the model's, so gradient accumulation sums in fp32, never in a bf16 .grad.
  void accumulate_grads();
  // After the optimizer step: masters -> model parameters; clears the model's grads.
  void scatter_weights();
  bool separate() const { return separate_; }

 private:
  NamedTensors model_;
  NamedTensors masters_;
  bool separate_ = false;
};

}  // namespace studio::trainer
