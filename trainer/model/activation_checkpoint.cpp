#include "studio/trainer/model/activation_checkpoint.h"

#include "studio/trainer/tensors/host_allocator.h"
#include "studio/trainer/tensors/torch_compat.h"

#if STUDIO_WITH_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace studio::trainer {

struct ActivationOffload::Impl {
  struct Entry {
    torch::Tensor host;      // the input in host memory
    torch::Tensor back;      // once fetched or prefetched: the input on its device again
    torch::Device device{torch::kCPU};
#if STUDIO_WITH_TORCH_CUDA
    std::shared_ptr<at::cuda::CUDAEvent> ready;  // the copy (out or back) has finished
#endif
  };
  std::mutex mutex;
  std::map<int64_t, Entry> entries;
#if STUDIO_WITH_TORCH_CUDA
  std::optional<c10::cuda::CUDAStream> copy_stream;
  c10::cuda::CUDAStream stream_for(const torch::Device& d) {
    if (!copy_stream) copy_stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, d.index());
    return *copy_stream;
  }
#endif

  void store(int64_t key, const torch::Tensor& x) {
    Entry e;
    e.device = x.device();
#if STUDIO_WITH_TORCH_CUDA
    if (x.is_cuda()) {
      const c10::cuda::CUDAGuard guard(x.device());
      auto compute = c10::cuda::getCurrentCUDAStream();
      auto copy = stream_for(x.device());
      at::cuda::CUDAEvent produced;
      produced.record(compute);
      produced.block(copy);
      e.host = torch::empty(x.sizes(), x.options().device(torch::kCPU).pinned_memory(true));
      {
        const c10::cuda::CUDAStreamGuard on_copy(copy);
        e.host.copy_(x, /*non_blocking=*/true);
      }
      // x may be freed by the caller now: its memory is not reused before the copy is done.
      c10::cuda::CUDACachingAllocator::recordStream(x.storage().data_ptr(), copy);
      e.ready = std::make_shared<at::cuda::CUDAEvent>();
      e.ready->record(copy);
      const std::lock_guard<std::mutex> lock(mutex);
      entries[key] = std::move(e);
      return;
    }
#endif
    {
      const OffloadScope host_memory;
      e.host = x.detach().clone(at::MemoryFormat::Contiguous);
    }
    const std::lock_guard<std::mutex> lock(mutex);
    entries[key] = std::move(e);
  }

  // Starts bringing entry `key` back to its device (no-op if absent or already back).
  void bring_back(Entry& e) {
    if (e.back.defined() || !e.host.defined()) return;
#if STUDIO_WITH_TORCH_CUDA
    if (e.device.is_cuda()) {
      const c10::cuda::CUDAGuard guard(e.device);
      auto compute = c10::cuda::getCurrentCUDAStream();
      auto copy = stream_for(e.device);
      // Allocated on the compute stream, whose pool it returns to (the loss and the next forward
      // reuse it); the copy stream writes it once the compute stream has reached this point.
      e.back = torch::empty(e.host.sizes(), e.host.options().device(e.device));
      at::cuda::CUDAEvent allocated;
      allocated.record(compute);
      allocated.block(copy);
      {
        const c10::cuda::CUDAStreamGuard on_copy(copy);
        e.back.copy_(e.host, /*non_blocking=*/true);  // after the copy out: same stream
      }
      c10::cuda::CUDACachingAllocator::recordStream(e.back.storage().data_ptr(), copy);
      e.ready = std::make_shared<at::cuda::CUDAEvent>();
      e.ready->record(copy);
      e.host = torch::Tensor();  // the pinned block is reused only after the copy's event
      return;
    }
#endif
    e.back = e.host.clone();  // outside any OffloadScope: "device" memory again
    e.host = torch::Tensor();
  }

  torch::Tensor fetch(int64_t key) {
    const std::lock_guard<std::mutex> lock(mutex);
    auto it = entries.find(key);
    TORCH_CHECK(it != entries.end(), "activation offload: no stored input for layer ", key,
                " (fetched twice, or the backward of a graph that was never stored)");
    bring_back(it->second);
    Entry e = std::move(it->second);
    entries.erase(it);
    if (it = entries.find(key - 1); it != entries.end()) bring_back(it->second);
#if STUDIO_WITH_TORCH_CUDA
    if (e.back.is_cuda()) {
      const c10::cuda::CUDAGuard guard(e.device);
      e.ready->block(c10::cuda::getCurrentCUDAStream());
    }
#endif
    return e.back;
  }
};

ActivationOffload::ActivationOffload() : impl_(std::make_unique<Impl>()) {}
ActivationOffload::~ActivationOffload() = default;
void ActivationOffload::store(int64_t key, const torch::Tensor& x) { impl_->store(key, x); }
torch::Tensor ActivationOffload::fetch(int64_t key) { return impl_->fetch(key); }

namespace {

// The autograd context stores IValues only; a capsule carries the function to the backward.
struct Recompute : torch::CustomClassHolder {
  Recompute(CheckpointedFn f, std::shared_ptr<ActivationOffload> o, int64_t k)
      : fn(std::move(f)), offload(std::move(o)), key(k) {}
  CheckpointedFn fn;
  std::shared_ptr<ActivationOffload> offload;
  int64_t key;
};

struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& input,
                               const c10::intrusive_ptr<Recompute>& recompute) {
    if (recompute->offload) recompute->offload->store(recompute->key, input);
    else ctx->save_for_backward({input});
    ctx->saved_data["recompute"] = c10::IValue::make_capsule(recompute);
    torch::NoGradGuard no_grad;
    return recompute->fn(input);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto recompute =
        c10::static_intrusive_pointer_cast<Recompute>(ctx->saved_data["recompute"].toCapsule());
    const torch::Tensor kept = recompute->offload ? recompute->offload->fetch(recompute->key)
                                                  : ctx->get_saved_variables()[0];
    const torch::Tensor x = kept.detach().requires_grad_(true);
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

torch::Tensor checkpoint(const CheckpointedFn& fn, const torch::Tensor& input,
                         std::shared_ptr<ActivationOffload> offload, int64_t key) {
  if (!torch::GradMode::is_enabled()) return fn(input);
  // Without an input that requires grad autograd would record no node at all, and the
  // parameters inside fn would get no gradient: give it one whose gradient goes nowhere.
  const torch::Tensor in = input.requires_grad() ? input : input.detach().requires_grad_(true);
  return CheckpointFunction::apply(in, c10::make_intrusive<Recompute>(fn, std::move(offload), key));
}

}  // namespace studio::trainer
