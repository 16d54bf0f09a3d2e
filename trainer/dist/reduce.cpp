#include "studio/trainer/dist/reduce.h"

#include <mutex>
#include <stdexcept>

namespace studio::trainer::dist {
namespace {

// Writes a reduced bucket (the flattened gradients of `params`, in order) back into .grad.
void unpack_bucket(const torch::Tensor& flat, const std::vector<torch::Tensor*>& params) {
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (torch::Tensor* p : params) {
    auto slice = flat.narrow(0, offset, p->numel()).view(p->sizes());
    if (p->grad().defined()) p->mutable_grad().copy_(slice);
    else p->mutable_grad() = slice.clone();
    offset += p->numel();
  }
}

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
  for (auto& b : buckets) {
    b.pending.wait();
    std::vector<torch::Tensor*> ps;
    for (auto& p : b.params) ps.push_back(&p);
    unpack_bucket(b.flat, ps);
  }
}

struct GradientSync::State {
  Group* group = nullptr;
  std::vector<torch::Tensor> params;
  std::vector<std::vector<size_t>> buckets;  // indices into params, in launch order
  std::vector<size_t> bucket_of;             // param index -> bucket
  std::vector<torch::Tensor> total;          // per param: the step's whole gradient, once known
  std::vector<torch::Tensor> flat;           // per bucket, once started
  std::vector<Pending> pending;
  size_t next = 0;  // first bucket not started
  bool armed = false;
  std::mutex mutex;

  bool bucket_ready(size_t b) const {
    for (size_t i : buckets[b])
      if (!total[i].defined()) return false;
    return true;
  }
  void start(size_t b) {
    std::vector<torch::Tensor> parts;
    for (size_t i : buckets[b]) parts.push_back(total[i].reshape({-1}));
    flat[b] = torch::cat(parts).contiguous();
    pending[b] = group->all_reduce_sum_async(flat[b], "gradients (bucket " + std::to_string(b) + ")");
  }
  // Starts every bucket that is ready, in order, stopping at the first that is not.
  void start_ready() {
    while (next < buckets.size() && bucket_ready(next)) start(next++);
  }
  void on_grad(size_t i, const torch::Tensor& incoming) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!armed) return;
    if (bucket_of[i] < next)
      throw std::logic_error("GradientSync: a second gradient for a parameter whose bucket was "
                             "already reduced");
    torch::NoGradGuard no_grad;
    const auto& acc = params[i].grad();
    total[i] = total[i].defined() ? total[i] + incoming
                                  : (acc.defined() ? acc + incoming : incoming.clone());
    start_ready();
  }
};

GradientSync::GradientSync(std::vector<torch::Tensor> params, Group& group, double bucket_mib)
    : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.group = &group;
  s.params = std::move(params);
  s.bucket_of.resize(s.params.size());
  double mib = 0;
  for (size_t k = s.params.size(); k-- > 0;) {
    if (s.buckets.empty() || mib >= bucket_mib) {
      s.buckets.emplace_back();
      mib = 0;
    }
    s.buckets.back().push_back(k);
    s.bucket_of[k] = s.buckets.size() - 1;
    const auto& p = s.params[k];
    mib += static_cast<double>(p.numel() * p.element_size()) / (1024.0 * 1024.0);
  }
  s.total.resize(s.params.size());
  s.flat.resize(s.buckets.size());
  s.pending.resize(s.buckets.size());
  if (group.size() == 1) return;
  std::weak_ptr<State> weak = state_;
  for (size_t i = 0; i < s.params.size(); ++i)
    s.params[i].register_hook([weak, i](const torch::Tensor& g) {
      if (auto st = weak.lock()) st->on_grad(i, g);
    });
}

GradientSync::~GradientSync() = default;

void GradientSync::arm() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->armed = state_->group->size() > 1;
}

void GradientSync::finish() {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.armed) return;
  s.armed = false;
  torch::NoGradGuard no_grad;
  // Parameters that got no gradient in the last backward: what .grad holds (or zeros). Under
  // collective verification that is an error: the engine's rule is that every backward gives
  // every parameter a gradient on every rank (docs/SEQUENCE_PARALLEL.md, "Collective
  // discipline"), so bucket readiness never depends on a rank's data.
  for (size_t i = 0; i < s.params.size(); ++i) {
    if (s.total[i].defined()) continue;
    if (s.group->verifying())
      throw std::logic_error("rank " + std::to_string(s.group->global_rank(s.group->rank())) +
                             ": parameter #" + std::to_string(i) + " (" +
                             std::to_string(s.params[i].numel()) +
                             " elements) got no gradient in this backward: its gradient bucket "
                             "would start at a different point than on other ranks");
    s.total[i] = s.params[i].grad().defined() ? s.params[i].grad().clone()
                                              : torch::zeros_like(s.params[i]);
  }
  while (s.next < s.buckets.size()) s.start(s.next++);
  for (size_t b = 0; b < s.buckets.size(); ++b) {
    s.pending[b].wait();
    std::vector<torch::Tensor*> ps;
    for (size_t i : s.buckets[b]) ps.push_back(&s.params[i]);
    unpack_bucket(s.flat[b], ps);
  }
  for (auto& t : s.total) t = torch::Tensor();
  for (auto& f : s.flat) f = torch::Tensor();
  s.next = 0;
}

}  // namespace studio::trainer::dist
