#include "studio/trainer/dist/reduce.h"

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

void all_reduce_gradients(const std::vector<torch::Tensor>& params, Group& group,
                          double bucket_mib) {
  if (group.size() == 1 || params.empty()) return;
  struct Bucket {
    std::vector<torch::Tensor> params;
    torch::Tensor flat;
    Pending pending;
  };
  std::vector<Bucket> buckets;
  Bucket current;
  double current_mib = 0;
  auto flush = [&] {
    if (current.params.empty()) return;
    std::vector<torch::Tensor> flats;
    for (const auto& p : current.params)
      flats.push_back(p.grad().defined() ? p.grad().reshape({-1})
                                         : torch::zeros({p.numel()}, p.options()));
    current.flat = torch::cat(flats).contiguous();
    current.pending = group.all_reduce_sum_async(current.flat, "gradients");
    buckets.push_back(std::move(current));
    current = Bucket{};
    current_mib = 0;
  };
  for (const auto& p : params) {
    // One dtype and device per bucket (masters are fp32; a mixed list would cast silently).
    if (!current.params.empty() && (current.params.front().scalar_type() != p.scalar_type() ||
                                    current.params.front().device() != p.device()))
      flush();
    current.params.push_back(p);
    current_mib += static_cast<double>(p.numel() * p.element_size()) / (1024.0 * 1024.0);
    if (current_mib >= bucket_mib) flush();
  }
  flush();
  torch::NoGradGuard no_grad;
  for (auto& b : buckets) {
    b.pending.wait();
    int64_t offset = 0;
    for (auto& p : b.params) {
      auto slice = b.flat.narrow(0, offset, p.numel()).view(p.sizes());
      if (p.grad().defined()) p.mutable_grad().copy_(slice);
      else p.mutable_grad() = slice.clone();
      offset += p.numel();
    }
  }
}

}  // namespace studio::trainer::dist
