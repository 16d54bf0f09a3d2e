#pragma once
// AdamW as transformers' Trainer sets it up: decoupled weight decay on the weight matrices and
// embeddings, none on norms and biases.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "studio/config/run_config.h"
#include "studio/trainer/safetensors.h"

namespace studio::trainer {

// Norm weights and biases are not decayed (transformers' get_decay_parameter_names).
bool decays(const std::string& param_name);

// Two parameter groups (decayed, not decayed) with the config's betas, epsilon and decay.
std::unique_ptr<torch::optim::AdamW> make_adamw(const NamedTensors& params, const RunConfig& cfg);

void set_learning_rate(torch::optim::Optimizer& opt, double lr);

}  // namespace studio::trainer
