#pragma once
// Reductions the training step needs on top of the process groups.
#include <string>
#include <vector>

#include <torch/torch.h>

#include "studio/trainer/parallel/communicator.h"

namespace studio::trainer::dist {

// Sums `t` over `group` in the forward pass; the backward passes the gradient through unchanged
// (identity). This is the SP reduction of partial sequence log-prob sums for DPO
// (docs/SEQUENCE_PARALLEL.md, "Losses and gradients"): every rank then computes the same loss
// from the global sums, and each rank's partial sum receives dL/dS, which is exactly the
// gradient of its own tokens.
torch::Tensor all_reduce_sum_identity_grad(const torch::Tensor& t, Group& group,
                                           const std::string& what);

}  // namespace studio::trainer::dist
