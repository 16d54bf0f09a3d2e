#include "studio/trainer/model/activation_checkpoint.h"

namespace studio::trainer {
namespace {

// The autograd context stores IValues only; a capsule carries the function to the backward.
struct Recompute : torch::CustomClassHolder {
  explicit Recompute(CheckpointedFn f) : fn(std::move(f)) {}
  CheckpointedFn fn;
};

struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input,
                               const c10::intrusive_ptr<Recompute>& recompute) {
    ctx->save_for_backward({input});
    ctx->saved_data["recompute"] = c10::IValue::make_capsule(recompute);
    torch::NoGradGuard no_grad;
    return recompute->fn(input);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    const auto recompute =
        c10::static_intrusive_pointer_cast<Recompute>(ctx->saved_data["recompute"].toCapsule());
    torch::Tensor y;
    {
      torch::AutoGradMode grad_on(true);
      y = recompute->fn(x);
    }
    torch::autograd::backward({y}, {grads[0]});
    return {x.grad(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor checkpoint(const CheckpointedFn& fn, const torch::Tensor& input) {
  if (!torch::GradMode::is_enabled()) return fn(input);
  // Without an input that requires grad autograd would record no node at all, and the
  // parameters inside fn would get no gradient: give it one whose gradient goes nowhere.
  const torch::Tensor in = input.requires_grad() ? input : input.detach().requires_grad_(true);
  return CheckpointFunction::apply(in, c10::make_intrusive<Recompute>(fn));
}

}  // namespace studio::trainer
