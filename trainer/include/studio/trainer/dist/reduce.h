#pragma once
// Reductions the training step needs on top of the process groups.
#include <string>
#include <vector>

#include <torch/torch.h>

#include "studio/trainer/dist/communicator.h"

namespace studio::trainer::dist {

// Sums `t` over `group` in the forward pass; the backward passes the gradient through unchanged
// (identity). This is the SP reduction of partial sequence log-prob sums for DPO
// (sequence-parallel.md): every rank then computes the same loss from the global sums, and each
// rank's partial sum receives dL/dS, which is exactly the gradient of its own tokens.
torch::Tensor all_reduce_sum_identity_grad(const torch::Tensor& t, Group& group,
                                           const std::string& what);

// Sums the gradients of `params` over `group` in place, in buckets of about `bucket_mib` MiB:
// each bucket's all-reduce is started as soon as it is packed, so packing the next one overlaps
// with the communication of the previous ones. Parameters without a gradient count as zero.
void all_reduce_gradients(const std::vector<torch::Tensor>& params, Group& group,
                          double bucket_mib = 25.0);

// Sums the gradients of `params` over `group` while the backward is still running. Parameters
// are cut into buckets of about `bucket_mib` MiB in reverse order (the backward produces the
// last layers' gradients first); as soon as every parameter of the NEXT bucket has its
// gradient, that bucket's all-reduce starts, so buckets start in the same order on every rank
// however its backward is scheduled (a parameter that gets no gradient on some rank only delays
// its bucket to finish()). LibTorch 1.13 has no post-accumulate hooks: a tensor hook sees the
// incoming gradient before it is added to .grad, so the bucket takes .grad + incoming.
// Only the backward after arm() is watched (the last micro-batch of a step); earlier ones just
// accumulate into .grad. The parameters must be the leaves the optimizer updates (fp32 training;
// with separate master weights use all_reduce_gradients after gathering).
class GradientSync {
 public:
  GradientSync(std::vector<torch::Tensor> params, Group& group, double bucket_mib = 25.0);
  ~GradientSync();
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  void arm();     // before the backward of the step's last micro-batch
  // After it: starts the buckets not started yet, waits for all, writes the sums into .grad.
  void finish();

 private:
  struct State;
  std::shared_ptr<State> state_;  // shared with the hooks, which may outlive this object
};

}  // namespace studio::trainer::dist
