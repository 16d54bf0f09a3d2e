#pragma once
// Which parameters AdamW decays, as transformers' Trainer decides: the weight matrices and
// embeddings, not norms and biases (the update itself: optim/zero.h).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "studio/config/run_config.h"
#include "studio/trainer/tensors/safetensors.h"

namespace studio::trainer {

// Norm weights and biases are not decayed (transformers' get_decay_parameter_names).
bool decays(const std::string& param_name);

}  // namespace studio::trainer
