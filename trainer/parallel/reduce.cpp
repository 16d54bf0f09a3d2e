#include "studio/trainer/parallel/reduce.h"

#include <stdexcept>

namespace studio::trainer::dist {
namespace {

struct AllReduceIdentityGrad : torch::autograd::Function<AllReduceIdentityGrad> {
  static torch::Tensor forward(torch::autograd::AutogradContext* /*ctx*/, const torch::Tensor& t,
                               Group* group, std::string what) {
    auto out = t.detach().clone().contiguous();
    group->all_reduce_sum(out, what);
    return out;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* /*ctx*/,
                                                 torch::autograd::variable_list grads) {
    return {grads[0], torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor all_reduce_sum_identity_grad(const torch::Tensor& t, Group& group,
                                           const std::string& what) {
  if (group.size() == 1) return t;
  return AllReduceIdentityGrad::apply(t, &group, what);
}

}  // namespace studio::trainer::dist
