#include "studio/trainer/optim/zero.h"

#include <ATen/ThreadLocalState.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <future>
#include <map>
#include <regex>
#include <stdexcept>
#include <thread>
#include <utility>

#include "studio/config/deepspeed.h"
#include "studio/trainer/optim/adamw.h"
#include "studio/trainer/parallel/step_clock.h"
#include "studio/trainer/tensors/host_allocator.h"
#include "studio/trainer/tensors/safetensors.h"

namespace fs = std::filesystem;

namespace studio::trainer {

ZeroOptions ZeroOptions::from(const RunConfig& cfg) {
  std::optional<DeepSpeedRequest> ds;
  if (cfg.deepspeed) {
    std::string error;
    ds = read_deepspeed_json(*cfg.deepspeed, error);
    if (!ds) throw std::invalid_argument("deepspeed: " + error);
  }
  const ZeroRequest z = zero_request(cfg, ds);
  if (const std::string problem = zero_request_problem(z); !problem.empty())
    throw std::invalid_argument(problem);
  ZeroOptions o;  // unused and trained: set by the trainer for the model it trains
  o.stage = z.stage;
  o.offload_optimizer = z.offload_optimizer;
  o.offload_param = z.offload_param;
  o.pin_memory = z.pin_memory;
  return o;
}

AdamWSettings AdamWSettings::from(const RunConfig& cfg) {
  return {cfg.adam_beta1, cfg.adam_beta2, cfg.adam_epsilon, cfg.weight_decay};
}

std::string optimizer_file_name(int rank, int shards) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "optimizer-%05d-of-%05d.safetensors", rank, shards);
  return buf;
}

void adamw_update(torch::Tensor& param, torch::Tensor& exp_avg, torch::Tensor& exp_avg_sq,
                  const torch::Tensor& grad, double lr, const AdamWSettings& s, double decay,
                  int64_t step) {
  std::vector<torch::Tensor> p{param}, m{exp_avg}, v{exp_avg_sq}, g{grad};
  adamw_update_many(p, m, v, g, lr, s, decay, step);
}

void adamw_update_many(std::vector<torch::Tensor>& params, std::vector<torch::Tensor>& exp_avgs,
                       std::vector<torch::Tensor>& exp_avg_sqs, std::vector<torch::Tensor>& grads,
                       double lr, const AdamWSettings& s, double decay, int64_t step,
                       const torch::Tensor& grad_coef) {
  TORCH_CHECK(exp_avgs.size() == params.size() && exp_avg_sqs.size() == params.size() &&
                  grads.size() == params.size(),
              "adamw_update_many: ", params.size(), " parameters but ", exp_avgs.size(), ", ",
              exp_avg_sqs.size(), " and ", grads.size(), " states and gradients");
  if (params.empty()) return;
  torch::NoGradGuard no_grad;
  // The kernel wants the gradient where the parameter is, in its dtype (the engine's are fp32
  // on the same device already: no copy; offloaded states take device gradients to the host).
  std::vector<torch::Tensor> fg;
  fg.reserve(grads.size());
  for (size_t i = 0; i < params.size(); ++i)
    fg.push_back(grads[i].to(params[i].device(), params[i].scalar_type()));
  const torch::Device device = params.front().device();
  // torch.optim.AdamW(fused=True)'s kernel: one multi-tensor launch for the whole list, the same
  // formula in fp32. On the CPU too: PyTorch builds it for each instruction set and picks this
  // CPU's, 3.9x faster here than the engine's own at::vec loop was, compiled for baseline x86-64
  // (docs/PERFORMANCE.md, "CPU: AdamW"). It reads the step (after increment) from a tensor per
  // parameter; one tensor serves them all.
  const auto steps =
      torch::full({}, static_cast<double>(step),
                  torch::TensorOptions().dtype(torch::kFloat).device(device));
  const std::vector<torch::Tensor> state_steps(params.size(), steps);
  // Its grad_scale divides every gradient (AMP's unscaling): 1 / coef applies the clipping.
  std::optional<torch::Tensor> grad_scale;
  if (grad_coef.defined())
    grad_scale = grad_coef.to(device, torch::kFloat).reciprocal();
  at::_fused_adamw_(params, fg, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, state_steps, lr, s.beta1, s.beta2,
                    decay, s.eps, /*amsgrad=*/false, /*maximize=*/false, grad_scale);
}

namespace {

// A stage 3 weight between its layer's uses: the tensor keeps its shape, dtype and storage
// object, whose bytes are released (and later refilled in place, so that what autograd saved
// of it in the forward sees the weights again in the backward).
void release_storage(const torch::Tensor& p) {
  auto* s = p.unsafeGetTensorImpl()->storage().unsafeGetStorageImpl();
  s->set_data_ptr_noswap(at::DataPtr(nullptr, s->device()));
  s->set_nbytes(0);
}

void allocate_storage(const torch::Tensor& p) {
  auto* s = p.unsafeGetTensorImpl()->storage().unsafeGetStorageImpl();
  const size_t bytes = static_cast<size_t>(p.numel()) * p.element_size();
  if (s->nbytes() == bytes && s->data() != nullptr) return;
  s->set_data_ptr_noswap(s->allocator()->allocate(bytes));
  s->set_nbytes(bytes);
}

int64_t unit_of(const std::string& name, int64_t layers) {
  static const std::regex re(R"(^model\.layers\.(\d+)\.)");
  std::smatch m;
  if (std::regex_search(name, m, re)) return std::stoll(m[1].str());
  return layers;  // embeddings, final norm, LM head
}

}  // namespace

struct ShardedState::Impl {
  struct Param {
    std::string name;
    torch::Tensor p;          // the model's parameter (full shape)
    int64_t n = 0, k = 0;     // elements; piece size
    int64_t lo = 0, len = 0;  // this rank's real elements [lo, lo + len)
    int64_t offset = 0;       // offset in its unit's reduction buffer (whole at stages 0-1)
    double decay = 0;
    torch::Tensor master;  // fp32: [n] at stage 0 (the parameter itself for fp32 models), else [k]
    torch::Tensor exp_avg, exp_avg_sq;
    torch::Tensor grad;    // fp32: [n] at stages 0-1; a view of the unit's accumulator at 2-3
    torch::Tensor frozen;  // frozen stage 3: the piece [k] in the model dtype
    bool trained = true;   // false: frozen (a reference, or the base of LoRA / freeze)
  };
  struct Unit {
    std::vector<size_t> params;   // all of its parameters (stage 3 gathers them all)
    std::vector<size_t> trained;  // those trained: reduced, updated, gathered after the update
    int64_t width = 0;            // its reduction buffer: the trained weights (stages 0-1) or
                                  // pieces (2-3)
    // stage 3 gathering
    enum { Released, InFlight, Gathered } state = Released;
    torch::Tensor gather_in, gather_out;
    dist::Pending gather;
    // gradient reduction of the current micro-batch
    bool reduced = false;
    torch::Tensor reduce_in, reduce_out;
    dist::Pending reduce;
    torch::Tensor grad_acc;  // stages 2-3: [width] fp32, where the pieces' gradients sum
  };

  CausalLM model;
  torch::Device device;
  dist::Group* world = nullptr;
  ZeroOptions opt;
  AdamWSettings adam;
  bool trainable = true;
  bool any_trained = false;  // some parameter is trained (a frozen reference: none)
  int shards = 1, rank = 0;
  torch::ScalarType dtype = torch::kFloat;
  std::vector<Param> params;
  std::vector<Unit> units;  // the decoder layers, then one per outer weight (see `layers`)
  bool last_micro = true;
  std::deque<size_t> in_flight;  // units whose reduction is pending, oldest first
  torch::Tensor clip_coef;       // from clip_gradients, for the next step's AdamW (undefined: none)

  Impl(CausalLM m, torch::Device d) : model(std::move(m)), device(d) {}

  bool distributed() const { return world && world->size() > 1; }
  size_t layers = 0;  // units [0, layers) are the decoder layers, the rest one outer weight each
  size_t outer() const { return layers; }
  bool stage3() const { return opt.stage >= 3; }
  torch::TensorOptions host_fp32() const {
    return torch::TensorOptions()
        .dtype(torch::kFloat)
        .pinned_memory(device.is_cuda() && opt.pin_memory);
  }
  // Where masters, AdamW states and gradient pieces live.
  torch::TensorOptions state_options() const {
    return opt.offload_optimizer ? host_fp32()
                                 : torch::TensorOptions().dtype(torch::kFloat).device(device);
  }
  // The collectives' device: Gloo groups take CPU tensors, NCCL ones the rank's device.
  torch::Device comm_device() const { return device; }

  // This rank's piece of a full flattened tensor, zero-padded to k, in `options`.
  torch::Tensor piece_of(const torch::Tensor& full_flat, const Param& q,
                         const torch::TensorOptions& options) const {
    auto out = torch::zeros({q.k}, options);
    if (q.len > 0) out.narrow(0, 0, q.len).copy_(full_flat.narrow(0, q.lo, q.len));
    return out;
  }

  // --- stage 3 gathering -------------------------------------------------------------------
  torch::Tensor gather_source(const Param& q) const {
    return (q.trained ? q.master : q.frozen).to(comm_device(), dtype);
  }
  // The parameters a gather of unit u moves: all of them at stage 3 (a layer about to run), the
  // trained ones after an update at stages 1-2 (the frozen ones are whole on every rank).
  const std::vector<size_t>& gathered(size_t u) const {
    return stage3() ? units[u].params : units[u].trained;
  }
  // Issues the all-gather of unit u's weights from every rank's pieces (in the model dtype).
  void launch_gather(size_t u) {
    RECORD_USER_SCOPE("zero::gather");
    const dist::TimeKindScope counted_as(dist::StepTime::GradComm);
    Unit& unit = units[u];
    std::vector<torch::Tensor> parts;
    int64_t width = 0;
    for (size_t i : gathered(u)) parts.push_back(gather_source(params[i])), width += params[i].k;
    unit.gather_in = torch::cat(parts).contiguous();
    unit.gather_out = torch::empty({width * shards}, unit.gather_in.options());
    if (world)
      unit.gather = world->all_gather_flat_async(unit.gather_out, unit.gather_in,
                                                 "weights (unit " + std::to_string(u) + ")");
    else
      unit.gather_out.copy_(unit.gather_in);
  }
  // Waits for it and writes the weights (stage 3: into storage allocated again).
  void land_gather(size_t u) {
    Unit& unit = units[u];
    unit.gather.wait();
    unit.gather = dist::Pending{};  // the work holds its buffers until dropped
    torch::NoGradGuard no_grad;
    const auto all = unit.gather_out.view({shards, -1});
    int64_t offset = 0;  // of each piece in a rank's row, in gathered(u)'s order
    for (size_t i : gathered(u)) {
      Param& q = params[i];
      allocate_storage(q.p);
      // Through variable_data(): a new version counter, so that the forward's saved tensors
      // do not count this refill as an in-place change.
      q.p.variable_data().view({-1}).copy_(
          all.narrow(1, offset, q.k).reshape({-1}).narrow(0, 0, q.n));
      offset += q.k;
    }
    unit.gather_in = unit.gather_out = torch::Tensor();
  }
  void start_gather(size_t u) {
    Unit& unit = units[u];
    if (!stage3() || unit.state != Unit::Released || unit.params.empty()) return;
    wait_update(u);
    launch_gather(u);
    unit.state = Unit::InFlight;
  }
  void finish_gather(size_t u) {
    Unit& unit = units[u];
    if (!stage3() || unit.params.empty()) return;
    start_gather(u);
    if (unit.state == Unit::Gathered) return;
    land_gather(u);
    unit.state = Unit::Gathered;
  }
  void release(size_t u) {
    Unit& unit = units[u];
    if (!stage3() || unit.state == Unit::Released) return;
    if (unit.state == Unit::InFlight) unit.gather.wait();
    unit.gather = dist::Pending{};
    for (size_t i : unit.params) release_storage(params[i].p);
    unit.gather_in = unit.gather_out = torch::Tensor();
    unit.state = Unit::Released;
  }

  // --- gradient reduction ------------------------------------------------------------------
  torch::Tensor take_grad(Param& q) {
    torch::Tensor g = q.p.grad();
    if (!g.defined()) {
      if (world && world->verifying())
        throw std::logic_error("rank " + std::to_string(world->global_rank(world->rank())) +
                               ": parameter " + q.name +
                               " got no gradient in this backward: "
                               "its reduction would differ from other ranks'");
      g = torch::zeros(q.p.sizes(), q.p.options().device(comm_device()));
    }
    q.p.mutable_grad() = torch::Tensor();
    return g.detach();
  }

  // Starts the reduction unit `u` owes for this micro-batch (stages 2-3: every micro-batch;
  // 0-1: the last one; earlier ones only accumulate in fp32).
  void reduce_unit(size_t u) {
    Unit& unit = units[u];
    if (unit.reduced || unit.trained.empty()) return;
    RECORD_USER_SCOPE("zero::reduce");
    const dist::TimeKindScope counted_as(dist::StepTime::GradComm);
    unit.reduced = true;
    torch::NoGradGuard no_grad;
    // Gradients arrive in the model dtype and are summed in fp32: each is converted on its way
    // into the fp32 buffer it ends in (add_ and copy_ convert inside their kernels), with no
    // fp32 temporary per parameter and no concatenation.
    const auto fp32_on_comm = torch::TensorOptions().dtype(torch::kFloat).device(comm_device());
    if (opt.stage <= 1) {
      if (!last_micro || !distributed()) {
        for (size_t i : unit.trained) {
          Param& q = params[i];
          auto g = take_grad(q).reshape({-1});
          q.grad = q.grad.defined() ? q.grad.add_(g) : g.to(torch::kFloat);
        }
        return;
      }
      Param& first = params[unit.trained.front()];
      if (unit.trained.size() == 1 && !first.grad.defined() &&
          first.p.scalar_type() == torch::kFloat) {
        unit.reduce_in = take_grad(first).reshape({-1}).contiguous();  // fp32 already: no copy
      } else {
        unit.reduce_in = torch::empty({unit.width}, fp32_on_comm);
        for (size_t i : unit.trained) {
          Param& q = params[i];
          auto g = take_grad(q).reshape({-1});
          auto slot = unit.reduce_in.narrow(0, q.offset, q.n);
          if (q.grad.defined())
            torch::add_out(slot, q.grad, g);
          else
            slot.copy_(g);
          q.grad = torch::Tensor();
        }
      }
      unit.reduce =
          world->all_reduce_sum_async(unit.reduce_in, "gradients (unit " + std::to_string(u) + ")");
    } else {
      const size_t only = unit.trained.front();
      if (unit.trained.size() == 1 && params[only].k * shards == params[only].n &&
          params[only].p.scalar_type() == torch::kFloat) {
        // One unpadded fp32 weight: its gradient is already the rank-major layout, no copy.
        unit.reduce_in = take_grad(params[only]).reshape({-1}).contiguous();
      } else {
        // Rank-major: rank r's pieces of the unit side by side in row r, each parameter's
        // elements [r*k, (r+1)*k) in its columns, the last piece's padding zero.
        unit.reduce_in = torch::empty({unit.width * shards}, fp32_on_comm);
        const auto rows = unit.reduce_in.view({shards, unit.width});
        for (size_t i : unit.trained) {
          Param& q = params[i];
          auto g = take_grad(q).reshape({-1});
          auto dst = rows.narrow(1, q.offset, q.k);  // [shards, k]
          const int64_t whole = q.n / q.k, rest = q.n - whole * q.k;
          if (whole > 0)
            dst.narrow(0, 0, whole).copy_(g.narrow(0, 0, whole * q.k).view({whole, q.k}));
          if (whole < shards) {
            auto tail = dst.narrow(0, whole, shards - whole);
            tail.zero_();
            if (rest > 0)
              tail.select(0, 0).narrow(0, 0, rest).copy_(g.narrow(0, whole * q.k, rest));
          }
        }
      }
      if (world) {
        // reduce_in is this reduction's own (a new buffer, or the gradient taken from the
        // parameter): the reduction may sum in it, and on Gloo it does, without a copy.
        unit.reduce = world->reduce_scatter_sum_consuming_async(
            unit.reduce_out, unit.reduce_in, "gradients (unit " + std::to_string(u) + ")");
      } else {
        // One process: the gradient is its own piece. No second buffer (for the embeddings
        // that was another 4 B per parameter at the end of the backward, beyond the estimate).
        unit.reduce_out = unit.reduce_in;
      }
    }
    in_flight.push_back(u);
    // At most two reductions in flight: their buffers are what the backward holds beyond
    // the model states.
    while (in_flight.size() > 2) complete(in_flight.front());
  }

  void complete(size_t u) {
    Unit& unit = units[u];
    in_flight.erase(std::find(in_flight.begin(), in_flight.end(), u));
    unit.reduce.wait();
    unit.reduce = dist::Pending{};  // the work holds its buffers until dropped
    torch::NoGradGuard no_grad;
    if (opt.stage <= 1) {
      for (size_t i : unit.trained) {
        Param& q = params[i];
        q.grad = unit.reduce_in.narrow(0, q.offset, q.n);
      }
    } else {
      unit.grad_acc.add_(unit.reduce_out.to(unit.grad_acc.device()));
    }
    unit.reduce_in = unit.reduce_out = torch::Tensor();
  }

  // --- the update ----------------------------------------------------------------------------
  // Units in the order their weights are needed next: the outer weights (gathered first by
  // begin_forward), then the layers.
  std::vector<size_t> update_order() const {
    std::vector<size_t> order;
    for (size_t u = layers; u < units.size(); ++u) order.push_back(u);
    for (size_t u = 0; u < layers; ++u) order.push_back(u);
    return order;
  }

  // AdamW on unit u's pieces, then its gradients cleared (stages 0-1 drop them, 2-3 zero the
  // accumulator).
  void update_unit(size_t u, double lr, int64_t step, const torch::Tensor& coef) {
    RECORD_USER_SCOPE("zero::adamw");
    torch::NoGradGuard no_grad;
    // One multi-tensor update per weight decay (decayed weights; biases and norms).
    struct Group {
      double decay = 0;
      std::vector<torch::Tensor> p, m, v, g;
    };
    std::vector<Group> groups;
    for (size_t i : units[u].trained) {
      Param& q = params[i];
      if (q.len == 0) continue;
      auto it = std::find_if(groups.begin(), groups.end(),
                             [&](const Group& g) { return g.decay == q.decay; });
      if (it == groups.end()) it = groups.insert(groups.end(), Group{q.decay, {}, {}, {}, {}});
      const int64_t n = opt.stage == 0 ? q.n : q.len;
      it->p.push_back(q.master.narrow(0, 0, n));
      it->m.push_back(q.exp_avg.narrow(0, 0, n));
      it->v.push_back(q.exp_avg_sq.narrow(0, 0, n));
      it->g.push_back(owned_grad(q));
    }
    for (Group& g : groups)
      adamw_update_many(g.p, g.m, g.v, g.g, lr, adam, g.decay, step, coef);
    clear_gradients(u);
  }

  // Stages 0-1 drop unit u's gradients, 2-3 zero its accumulator.
  void clear_gradients(size_t u) {
    if (opt.stage <= 1)
      for (size_t i : units[u].trained) params[i].grad = torch::Tensor();
    if (units[u].grad_acc.defined()) units[u].grad_acc.zero_();
  }

  // The offloaded update on a worker thread; each unit's future is ready once it is updated.
  std::vector<std::shared_future<void>> updated;
  std::thread updater;
  void start_updates(double lr, int64_t step, torch::Tensor coef) {
    auto promises = std::make_shared<std::vector<std::promise<void>>>(units.size());
    updated.assign(units.size(), {});
    for (size_t u = 0; u < units.size(); ++u) updated[u] = (*promises)[u].get_future().share();
    // The caller's thread-local state (as the autograd engine hands its workers): with it the
    // profiler, when on, records this thread's zero::adamw ranges too.
    updater = std::thread([this, promises, lr, step, coef, tls = at::ThreadLocalState()] {
      const at::ThreadLocalStateGuard guard(tls);
      size_t done = 0;
      const auto order = update_order();
      try {
        for (size_t u : order) {
          update_unit(u, lr, step, coef);
          (*promises)[u].set_value();
          ++done;
        }
      } catch (...) {
        for (size_t k = done; k < order.size(); ++k)
          (*promises)[order[k]].set_exception(std::current_exception());
      }
    });
  }
  void wait_update(size_t u) {
    if (u < updated.size() && updated[u].valid()) {
      auto f = std::move(updated[u]);
      updated[u] = {};
      f.get();  // rethrows the worker's error
    }
  }
  // Every pending update done (before anything reads the masters or gradients as a whole).
  void wait_updates() {
    if (updater.joinable()) updater.join();
    for (size_t u = 0; u < updated.size(); ++u) wait_update(u);
  }

  // The gradient of q this rank updates with: its owned elements (len of them).
  torch::Tensor owned_grad(const Param& q) const {
    if (opt.stage >= 2) return q.grad.narrow(0, 0, q.len);
    if (opt.stage == 1) return q.grad.narrow(0, q.lo, q.len);
    return q.grad;
  }
};

bool ShardedState::trained(size_t i) const {
  return impl_->params[i].trained;
}

ShardedState::ShardedState(CausalLM model, torch::Device device, dist::Group* world,
                           ZeroOptions opt, AdamWSettings adam, bool trainable,
                           const WeightSource& source) {
  impl_ = std::make_unique<Impl>(model, device);
  Impl& s = *impl_;
  s.world = world;
  s.opt = opt;
  s.adam = adam;
  s.trainable = trainable;
  s.shards = (opt.stage >= 1 && world) ? world->size() : 1;
  s.rank = (opt.stage >= 1 && world) ? world->rank() : 0;
  const int64_t layers = model->info().num_layers;
  s.layers = static_cast<size_t>(layers);
  s.units.resize(s.layers);
  torch::NoGradGuard no_grad;
  // What this constructor allocates beyond the weights is offloaded state when asked (CPU runs
  // count it apart: host_allocator.h).
  std::optional<OffloadScope> offload;
  if (opt.offload_optimizer) offload.emplace();
  // The base model's parameters, then the LoRA adapters' (each in its layer's unit).
  auto state = model->hf_state();
  for (auto& item : model->adapter_state()) state.push_back(std::move(item));
  bool any_trained = false;
  for (auto& [name, p] : state) {
    Impl::Param q;
    q.name = name;
    q.p = p;
    q.trained = trainable && (!opt.trained || opt.trained(name));
    any_trained = any_trained || q.trained;
    // A frozen weight gets no gradient: autograd computes none for it.
    p.set_requires_grad(q.trained);
    q.n = p.numel();
    q.k = (q.n + s.shards - 1) / s.shards;
    q.lo = std::min(q.n, s.rank * q.k);
    q.len = std::min(q.n, q.lo + q.k) - q.lo;
    const bool unused = std::find(opt.unused.begin(), opt.unused.end(), name) != opt.unused.end();
    q.decay = decays(name) && !unused ? adam.weight_decay : 0.0;
    s.dtype = p.scalar_type();
    // A decoder layer's weights form one unit; every other weight (embeddings, final norm, LM
    // head) is a unit of its own, so that the largest (the embeddings) is reduced alone.
    auto u = static_cast<size_t>(unit_of(name, layers));
    if (u >= s.layers) {
      u = s.units.size();
      s.units.emplace_back();
    }
    if (q.trained) {
      q.offset = s.units[u].width;
      s.units[u].width += opt.stage <= 1 ? q.n : q.k;
      s.units[u].trained.push_back(s.params.size());
    }
    s.units[u].params.push_back(s.params.size());
    names_.push_back(name);
    if (opt.stage >= 3 && !source)
      throw std::invalid_argument("ShardedState: stage 3 needs a weight source");
    // The full value, only ever read piece by piece (a mapped checkpoint costs nothing).
    const torch::Tensor full = (source ? source(name) : p.detach()).reshape({-1});
    if (full.numel() != q.n)
      throw std::runtime_error(name + ": the weights have " + std::to_string(full.numel()) +
                               " elements, the model expects " + std::to_string(q.n));
    if (q.trained) {
      if (opt.stage == 0 && p.scalar_type() == torch::kFloat) {
        q.master = p.detach().view({-1});  // the weights are the masters
        if (source) q.master.copy_(full);
      } else if (opt.stage == 0) {
        q.master = full.to(s.state_options().device(device)).clone();
      } else {
        q.master = s.piece_of(full, q, s.state_options());
      }
      q.exp_avg = torch::zeros_like(q.master);
      q.exp_avg_sq = torch::zeros_like(q.master);
    } else if (opt.stage >= 3) {
      auto where = opt.offload_param ? torch::TensorOptions().dtype(s.dtype).pinned_memory(
                                           device.is_cuda() && opt.pin_memory)
                                     : torch::TensorOptions().dtype(s.dtype).device(device);
      q.frozen = s.piece_of(full, q, where);
    }
    s.params.push_back(std::move(q));
  }
  for (auto& unit : s.units)
    if (opt.stage >= 2 && !unit.trained.empty()) {
      unit.grad_acc = torch::zeros({unit.width}, s.state_options());
      for (size_t i : unit.trained) {
        auto& q = s.params[i];
        q.grad = unit.grad_acc.narrow(0, q.offset, q.k);
      }
    }
  // Stage 3: a layer's weights exist only while it runs.
  if (opt.stage >= 3)
    for (auto& q : s.params) release_storage(q.p);
  s.any_trained = any_trained;
  model->set_layer_hooks(any_trained || opt.stage >= 3 ? this : nullptr);
}

ShardedState::~ShardedState() {
  if (!impl_) return;
  if (impl_->updater.joinable()) impl_->updater.join();
  impl_->model->set_layer_hooks(nullptr);
}

std::vector<int64_t> ShardedState::shape(size_t i) const {
  return impl_->params[i].p.sizes().vec();
}

void ShardedState::begin_forward() {
  Impl& s = *impl_;
  for (size_t u = s.outer(); u < s.units.size(); ++u) s.start_gather(u);
  for (size_t u = s.outer(); u < s.units.size(); ++u) s.finish_gather(u);
}

void ShardedState::idle_forward() {
  Impl& s = *impl_;
  if (!s.stage3()) return;
  begin_forward();
  for (size_t u = 0; u < s.layers; ++u) {
    before_forward(static_cast<int64_t>(u));
    after_forward(static_cast<int64_t>(u));
  }
  end_forward();
}

void ShardedState::finish_updates() {
  impl_->wait_updates();
}

void ShardedState::end_forward() {
  Impl& s = *impl_;
  for (size_t u = 0; u < s.units.size(); ++u) s.release(u);
}

void ShardedState::begin_micro_batch(bool last) {
  Impl& s = *impl_;
  s.last_micro = last;
  in_micro_batch_ = true;
  for (auto& unit : s.units) unit.reduced = false;
  begin_forward();
}

void ShardedState::end_backward() {
  Impl& s = *impl_;
  in_micro_batch_ = false;
  // Units whose hook did not run (none in a normal backward) and the outer unit, in the same
  // order on every rank; then everything in flight completes.
  for (size_t u = s.units.size(); u-- > 0;) {
    s.release(u);  // a reduction needs the gradients, not the weights: stage 3 frees them first
    s.reduce_unit(u);
  }
  while (!s.in_flight.empty()) s.complete(s.in_flight.front());
}

torch::Tensor ShardedState::clip_gradients(double max_norm) {
  RECORD_USER_SCOPE("zero::clip");
  const dist::TimeKindScope counted_as(dist::StepTime::GradComm);
  Impl& s = *impl_;
  s.wait_updates();
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (auto& q : s.params)
    if (q.grad.defined()) grads.push_back(q.grad);
  if (grads.empty()) return torch::zeros({}, torch::kDouble);
  // clip_grad_norm_'s kernel: every gradient's norm in one multi-tensor launch (on the CPU, the
  // same per-tensor ops).
  const torch::Tensor norms = torch::stack(at::_foreach_norm(grads, 2)).to(torch::kDouble);
  torch::Tensor total;
  if (s.opt.stage >= 2 && s.distributed()) {
    // Each rank holds its pieces: the squares are summed over the world.
    auto sq = norms.pow(2).sum().reshape({1}).to(s.comm_device());
    s.world->all_reduce_sum(sq, "gradient norm");
    total = sq.sqrt().reshape({});
  } else {
    total = norms.norm(2);  // full gradients, the same on every rank
  }
  // clip_grad_norm_'s coefficient, applied by the step's AdamW as it reads each gradient.
  if (std::isfinite(max_norm))
    s.clip_coef =
        torch::clamp_max(max_norm / (total + 1e-6), 1.0).to(grads.front().device(), torch::kFloat);
  return total;
}

void ShardedState::step(double lr) {
  Impl& s = *impl_;
  s.wait_updates();
  ++step_;
  torch::NoGradGuard no_grad;
  const int64_t step = step_;
  // Offloaded states are updated on the CPU by a worker thread, unit by unit in the order the
  // weights are needed next (stages 1-2: this step's all-gather below; stage 3: the next
  // forward's gathers), so the update of one unit overlaps the transfers of the ones before.
  // Elsewhere the update runs here (on CUDA its kernels are queued, not waited for).
  const torch::Tensor coef = std::exchange(s.clip_coef, torch::Tensor());
  if (s.opt.offload_optimizer) {
    s.start_updates(lr, step, coef);
  } else {
    for (size_t u : s.update_order()) s.update_unit(u, lr, step, coef);
  }
  // The weights: stage 0 copies bf16 weights from the masters; stages 1-2 all-gather every
  // rank's updated pieces; stage 3 gathers when a layer runs.
  if (s.opt.stage == 0) {
    for (auto& q : s.params)
      if (q.trained && q.master.data_ptr() != q.p.data_ptr())
        q.p.variable_data().view({-1}).copy_(q.master);
    return;
  }
  if (s.opt.stage >= 3) return;
  // At most two units' gathers in flight: their buffers are what the step holds beyond the
  // model states.
  std::deque<size_t> gathering;
  for (size_t u : s.update_order()) {
    if (s.units[u].trained.empty()) continue;
    s.wait_update(u);
    s.launch_gather(u);
    gathering.push_back(u);
    if (gathering.size() > 2) s.land_gather(gathering.front()), gathering.pop_front();
  }
  for (size_t u : gathering) s.land_gather(u);
}

void ShardedState::skip_step() {
  Impl& s = *impl_;
  s.wait_updates();
  s.clip_coef = torch::Tensor();
  torch::NoGradGuard no_grad;
  for (size_t u = 0; u < s.units.size(); ++u) s.clear_gradients(u);
}

torch::Tensor ShardedState::gather_full(size_t i) {
  Impl& s = *impl_;
  s.wait_updates();
  auto& q = s.params[i];
  torch::NoGradGuard no_grad;
  torch::Tensor source = q.trained ? q.master : q.frozen;
  // What is not gathered is a view of the live weights: copied, so that the result is the
  // caller's alone (a checkpoint is written from it while training goes on).
  if (!source.defined())  // frozen, unsharded
    return q.p.detach().to(torch::kCPU, torch::kFloat, /*non_blocking=*/false, /*copy=*/true);
  if (s.shards == 1)
    return source.narrow(0, 0, q.n).view(q.p.sizes()).to(torch::kCPU, torch::kFloat, false, true);
  auto in = source.to(s.comm_device(), torch::kFloat).contiguous();
  auto out = torch::empty({q.k * s.shards}, in.options());
  s.world->all_gather_flat_async(out, in, "save " + q.name).wait();
  // The gathered buffer is new: on the CPU it is the result itself (no second copy; Gloo may
  // drop its own reference to it a little later, which then frees nothing); on a GPU, its one
  // copy to host memory.
  return out.narrow(0, 0, q.n).view(q.p.sizes()).to(torch::kCPU);
}

ShardedState::OptimizerFile ShardedState::optimizer_file(bool copy) const {
  const Impl& s = *impl_;
  const int64_t step = step_;
  OptimizerFile out;
  if (!s.any_trained) return out;
  if (s.shards == 1 && s.world && s.world->rank() != 0) return out;  // identical on every rank
  out.name = optimizer_file_name(s.rank, s.shards);
  auto host = [copy](const torch::Tensor& t) {
    return copy ? t.to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true) : t;
  };
  for (const auto& q : s.params) {
    if (q.len == 0 || !q.trained) continue;
    const int64_t len = s.shards == 1 ? q.n : q.len;
    out.tensors.emplace_back(q.name + ".exp_avg", host(q.exp_avg.narrow(0, 0, len)));
    out.tensors.emplace_back(q.name + ".exp_avg_sq", host(q.exp_avg_sq.narrow(0, 0, len)));
  }
  out.metadata = {{"step", std::to_string(step)},
                  {"shards", std::to_string(s.shards)},
                  {"rank", std::to_string(s.rank)},
                  {"zero_stage", std::to_string(s.opt.stage)}};
  return out;
}

void ShardedState::save_optimizer(const std::string& dir) const {
  impl_->wait_updates();
  const OptimizerFile f = optimizer_file(/*copy=*/false);
  if (f.name.empty()) return;
  write_safetensors((fs::path(dir) / f.name).string(), f.tensors, f.metadata);
}

std::string ShardedState::optimizer_file_name_here() const {
  return optimizer_file(false).name;
}

int64_t ShardedState::optimizer_bytes() const {
  int64_t n = 0;
  for (const auto& [name, t] : optimizer_file(false).tensors) n += t.numel() * t.element_size();
  return n;
}

ShardedState::OptimizerFile ShardedState::optimizer_snapshot() const {
  impl_->wait_updates();
  return optimizer_file(/*copy=*/true);
}

void ShardedState::load(const std::string& checkpoint_dir, bool with_optimizer) {
  Impl& s = *impl_;
  s.wait_updates();
  if (!s.any_trained || !with_optimizer) return;
  // The optimizer files present and how many ranks wrote them.
  static const std::regex re(R"(optimizer-(\d{5})-of-(\d{5})\.safetensors)");
  std::map<int, std::string> files;
  int saved_shards = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(checkpoint_dir, ec)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (!std::regex_match(name, m, re)) continue;
    const int n = std::stoi(m[2].str());
    if (saved_shards != 0 && n != saved_shards)
      throw std::runtime_error(checkpoint_dir + ": optimizer files of two world sizes (" +
                               std::to_string(saved_shards) + " and " + std::to_string(n) +
                               "): remove the stray ones");
    saved_shards = n;
    files[std::stoi(m[1].str())] = e.path().string();
  }
  if (files.empty())
    throw std::runtime_error(checkpoint_dir +
                             " has no optimizer-*-of-*.safetensors: it was "
                             "saved with save_only_model (or by an older studio-train) and "
                             "cannot continue the run exactly");
  std::vector<SafetensorsFile> opened;
  for (int r = 0; r < saved_shards; ++r) {
    auto it = files.find(r);
    if (it == files.end())
      throw std::runtime_error(checkpoint_dir + ": " + optimizer_file_name(r, saved_shards) +
                               " is missing (the checkpoint is incomplete)");
    opened.push_back(SafetensorsFile::open(it->second));
  }
  const auto& meta = opened.front().metadata();
  const auto step_it = meta.find("step");
  if (step_it == meta.end())
    throw std::runtime_error(opened.front().path() + ": no \"step\" in its metadata");
  step_ = std::stoll(step_it->second);
  torch::NoGradGuard no_grad;
  // Each state element [lo, lo + len) of this rank, from whichever saved pieces hold it.
  for (auto& q : s.params) {
    if (!q.trained) continue;
    const int64_t want_lo = s.shards == 1 ? 0 : q.lo;
    const int64_t want_len = s.shards == 1 ? q.n : q.len;
    const int64_t k_saved = (q.n + saved_shards - 1) / saved_shards;
    for (const char* which : {".exp_avg", ".exp_avg_sq"}) {
      auto dst =
          (std::string(which) == ".exp_avg" ? q.exp_avg : q.exp_avg_sq).narrow(0, 0, want_len);
      for (int r = 0; r < saved_shards; ++r) {
        const int64_t lo = std::min(q.n, r * k_saved), hi = std::min(q.n, lo + k_saved);
        const int64_t a = std::max(lo, want_lo), b = std::min(hi, want_lo + want_len);
        if (a >= b) continue;
        const auto& f = opened[static_cast<size_t>(r)];
        if (!f.has(q.name + which))
          throw std::runtime_error(f.path() + ": no tensor " + q.name + which +
                                   " (the checkpoint does not match this model)");
        auto t = f.tensor(q.name + which).reshape({-1});
        if (t.numel() != hi - lo)
          throw std::runtime_error(f.path() + ": " + q.name + which + " has " +
                                   std::to_string(t.numel()) + " elements, expected " +
                                   std::to_string(hi - lo));
        dst.narrow(0, a - want_lo, b - a).copy_(t.narrow(0, a - lo, b - a));
      }
    }
  }
}

const ZeroOptions& ShardedState::options() const {
  return impl_->opt;
}
int ShardedState::shards() const {
  return impl_->shards;
}

ZeroBytes ShardedState::bytes() const {
  const Impl& s = *impl_;
  ZeroBytes b;
  auto size = [](const torch::Tensor& t) {
    return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : int64_t{0};
  };
  const bool states_offloaded = s.opt.offload_optimizer;
  for (const auto& q : s.params) {
    if (!s.stage3()) b.weights += size(q.p);
    if (q.frozen.defined()) {
      b.weights += size(q.frozen);
      if (s.opt.offload_param) b.offloaded += size(q.frozen);
    }
    const bool own_master = q.master.defined() && q.master.data_ptr() != q.p.data_ptr();
    const int64_t states = (own_master ? size(q.master) : 0) + size(q.exp_avg) + size(q.exp_avg_sq);
    if (own_master) b.masters += size(q.master);
    b.optimizer += size(q.exp_avg) + size(q.exp_avg_sq);
    if (s.opt.stage <= 1) b.gradients += size(q.grad);
    if (states_offloaded) b.offloaded += states;
  }
  for (const auto& unit : s.units) {
    b.gradients += size(unit.grad_acc);
    if (states_offloaded) b.offloaded += size(unit.grad_acc);
  }
  return b;
}

void ShardedState::before_forward(int64_t layer) {
  Impl& s = *impl_;
  const auto u = static_cast<size_t>(layer);
  s.finish_gather(u);
  if (u + 1 < s.outer()) s.start_gather(u + 1);  // prefetch the next layer
}

void ShardedState::after_forward(int64_t layer) {
  impl_->release(static_cast<size_t>(layer));
}

void ShardedState::before_backward(int64_t layer) {
  Impl& s = *impl_;
  const auto u = static_cast<size_t>(layer);
  s.finish_gather(u);
  if (u > 0) s.start_gather(u - 1);
}

void ShardedState::after_backward(int64_t layer) {
  Impl& s = *impl_;
  const auto u = static_cast<size_t>(layer);
  s.release(u);
  s.reduce_unit(u);
}

}  // namespace studio::trainer
