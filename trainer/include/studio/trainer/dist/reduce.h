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

}  // namespace studio::trainer::dist
