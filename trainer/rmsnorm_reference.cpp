#include "studio/trainer/rmsnorm_reference.h"

#include <torch/torch.h>

namespace studio::trainer {

at::Tensor rms_norm_reference(const at::Tensor& x, const at::Tensor& weight, double eps) {
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) > 0, "rms_norm_reference: x needs a non-empty last dim");
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == x.size(-1),
              "rms_norm_reference: weight must be [", x.size(-1), "], got ", weight.sizes());
  TORCH_CHECK(eps >= 0.0, "rms_norm_reference: eps must be >= 0");
  // Low-precision inputs are widened first so the mean of squares is accumulated in fp32.
  const auto compute = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor xc = x.to(compute);
  const at::Tensor rstd = torch::rsqrt(xc.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return (xc * rstd * weight.to(compute)).to(x.scalar_type());
}

}  // namespace studio::trainer
