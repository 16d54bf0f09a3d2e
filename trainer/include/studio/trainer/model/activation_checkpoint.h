#pragma once
// Activation checkpointing, which LibTorch's C++ frontend lacks: the forward runs `fn` without
// recording a graph and keeps only its input; the backward runs `fn` again with grad enabled
// from a detached copy of the input and back-propagates through it (a reentrant backward, like
// torch.utils.checkpoint's reentrant variant), so the parameters `fn` uses accumulate their
// gradients and the input's gradient flows on.
//
// `fn` must compute the same thing twice: no dropout or other randomness, no state it changes.
// It may capture tensors that need no gradient (cos/sin tables); tensors it captures that do
// need one receive it through the reentrant backward as well.

#include <torch/torch.h>

#include <functional>

namespace studio::trainer {

using CheckpointedFn = std::function<torch::Tensor(const torch::Tensor& input)>;

// fn(input); with grad mode off it is simply called.
torch::Tensor checkpoint(const CheckpointedFn& fn, const torch::Tensor& input);

}  // namespace studio::trainer
