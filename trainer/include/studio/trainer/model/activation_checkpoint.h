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
//
// With an ActivationOffload the kept input lives in host memory between the forward and the
// backward (offload_activations; docs/LONG_CONTEXT.md).

#include <torch/torch.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>

namespace studio::trainer {

using CheckpointedFn = std::function<torch::Tensor(const torch::Tensor& input)>;

// The checkpointed inputs of one forward pass, in host memory, keyed by layer. On CUDA: pinned
// memory, copied out on a copy stream after the compute stream has produced the input, and
// copied back on it, the compute stream waiting for that copy only. On the CPU the same steps
// with plain host buffers, allocated under an OffloadScope (host_allocator.h), so that a CPU
// run counts them apart from its "device" bytes as a GPU run would.
// fetch(k) also starts bringing back the input of layer k - 1, whose backward comes next, so
// that its copy overlaps layer k's recompute: at most two inputs are back at a time.
class ActivationOffload {
 public:
  ActivationOffload();
  ~ActivationOffload();
  void store(int64_t key, const torch::Tensor& x);
  torch::Tensor fetch(int64_t key);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// fn(input); with grad mode off it is simply called. With `offload`, the input is stored there
// under `key` instead of being kept on its device.
torch::Tensor checkpoint(const CheckpointedFn& fn, const torch::Tensor& input,
                         std::shared_ptr<ActivationOffload> offload = nullptr, int64_t key = 0);

}  // namespace studio::trainer
