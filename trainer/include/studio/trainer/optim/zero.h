#pragma once
// Sharded model states (ZeRO, as DeepSpeed defines its stages) over the whole dp x sp world:
// who owns which piece of every parameter, its fp32 master, its gradient and its AdamW states,
// and which collectives move them. Unsharded training is stage 0 of the same code.
//
// Every parameter is flattened and cut into `shards` equal pieces (the last padded): rank r owns
// elements [r*k, (r+1)*k) of each (k = ceil(numel / shards)); shards = world size from stage 1
// on, 1 at stage 0. Per stage, on every rank:
//   stage 0  full weights (model dtype), full fp32 gradient, full fp32 master + AdamW states;
//            gradients all-reduced over the world
//   stage 1  full weights, full fp32 gradient (all-reduced), master + AdamW states of its piece;
//            after the update the pieces are all-gathered into the weights
//   stage 2  full weights; gradients reduce-scattered after every micro-batch's backward, one
//            decoder layer at a time, into an fp32 gradient piece; pieces all-gathered as stage 1
//   stage 3  only its piece of everything: a decoder layer's weights are all-gathered (model
//            dtype) just before its forward and again before its backward, freed after each, the
//            next layer's gather prefetched; embeddings, final norm and LM head are gathered for a
//            whole micro-batch (forward to backward)
// offload_optimizer keeps masters, AdamW states and gradient pieces in host memory (pinned
// under CUDA) and updates them there with a vectorised multi-threaded AdamW; offload_param
// (stage 3) keeps the weight pieces there too, which here are the fp32 masters, so it implies
// offload_optimizer. Gradients are summed over the world in fp32 (sum over SP, mean over DP: the
// loss is normalised by the global batch before backward).
//
// The decoder calls the LayerHooks around every layer (gather, release, reduce); the trainer
// calls begin_forward / end_backward / end_forward around each micro-batch, then step().
// Every collective depends only on the model's structure and the stage, never on data, so every
// rank runs the same ones in the same order.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "studio/config/run_config.h"
#include "studio/trainer/parallel/communicator.h"
#include "studio/trainer/model/decoder.h"
#include "studio/trainer/tensors/safetensors.h"

namespace studio::trainer {

struct ZeroOptions {
  int stage = 0;
  bool offload_optimizer = false;
  bool offload_param = false;  // stage 3; implies offload_optimizer (see above)
  bool pin_memory = true;      // offloaded memory pinned (CUDA runs)
  // Weights no loss reads (stage rm's untied LM head): their gradient stays zero, and they get no
  // weight decay either, so the update leaves them as they are, as torch's AdamW skips the
  // parameters that have no gradient.
  std::vector<std::string> unused;
  // Which parameters (by name: Hugging Face's, or an adapter's) are trained; null: all. The
  // others are frozen: no gradient (requires_grad off), no master, no AdamW state, no
  // reduction; stage 3 shards them like the trained ones (finetuning_type lora / freeze).
  std::function<bool(const std::string& name)> trained;
  // From the run config: zero_stage / offload_* keys or the deepspeed JSON (already checked).
  static ZeroOptions from(const RunConfig& cfg);
};

struct AdamWSettings {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  static AdamWSettings from(const RunConfig& cfg);
};

// One AdamW update (torch.optim.AdamW's formula) of n fp32 elements in place; `step` is the
// step number after increment (1 for the first). `decay` is the weight decay for these elements.
void adamw_update(torch::Tensor& param, torch::Tensor& exp_avg, torch::Tensor& exp_avg_sq,
                  const torch::Tensor& grad, double lr, const AdamWSettings& s, double decay,
                  int64_t step);

// AdamW on many tensors with one weight decay, on the host (CPU runs, offloaded states) or the
// device: all of them in one call of PyTorch's fused multi-tensor AdamW (at::_fused_adamw_, what
// torch.optim.AdamW(fused=True) runs; one launch on CUDA, one vectorised multi-threaded pass on
// the CPU), instead of ~10 single-op kernels per tensor. The gradients are read in place when they
// are where the parameters are, in their dtype, and are left scaled by grad_coef; others are
// copied there first.
// `grad_coef` (a 0-dim fp32 tensor where the gradients are; undefined: 1) multiplies every
// gradient inside the update, which is how clipping is applied without a pass of its own.
void adamw_update_many(std::vector<torch::Tensor>& params, std::vector<torch::Tensor>& exp_avgs,
                       std::vector<torch::Tensor>& exp_avg_sqs, std::vector<torch::Tensor>& grads,
                       double lr, const AdamWSettings& s, double decay, int64_t step,
                       const torch::Tensor& grad_coef = {});

// What a rank holds, in bytes, by kind (for the memory estimate's tests and the events).
struct ZeroBytes {
  int64_t weights = 0;     // resident weights in the model dtype (stage 3: none between layers)
  int64_t masters = 0;     // fp32 masters beyond the weights (0 when the weights are the masters)
  int64_t gradients = 0;   // fp32 gradient storage kept across micro-batches
  int64_t optimizer = 0;   // AdamW exp_avg + exp_avg_sq
  int64_t offloaded = 0;   // of the above, in host memory by offload
};

class ShardedState : public LayerHooks {
 public:
  // A model's full weights by Hugging Face name (any dtype, on the CPU: e.g. a checkpoint's
  // mapped tensors); every rank reads only its pieces from it.
  using WeightSource = std::function<torch::Tensor(const std::string& name)>;
  // Below stage 3 `model` holds its weights already (on `device`); at stage 3 it was built under
  // DeferredAllocation and holds none. The masters (stage 3: the pieces) come from `source`,
  // else from the model. With trainable = false (a frozen DPO reference) only the weights are
  // kept (sharded at stage 3) and nothing is trained; otherwise ZeroOptions::trained picks
  // what is. `world` null: one process.
  ShardedState(CausalLM model, torch::Device device, dist::Group* world, ZeroOptions opt,
               AdamWSettings adam, bool trainable = true, const WeightSource& source = {});
  ~ShardedState() override;

  const ZeroOptions& options() const;
  int shards() const;

  // Around every forward: stage 3 gathers the embeddings, final norm and LM head (no-op below).
  void begin_forward();
  // After a forward without backward (evaluation, reference log-probs): releases them again.
  void end_forward();
  // The collectives of one forward without computing it (stage 3: every unit gathered and
  // released in forward order; nothing below): a rank with fewer evaluation batches than
  // another runs these so that every rank runs the same collectives.
  void idle_forward();
  // Waits for the offloaded update of the last step (a no-op without offload); rethrows its error.
  void finish_updates();
  // Before each training micro-batch's forward (`last`: the step's last, whose backward completes
  // the gradients: stages 0-1 reduce only then), then begin_forward().
  void begin_micro_batch(bool last);
  // After its backward: finishes the gradient reductions this micro-batch owes and releases
  // stage 3's outer weights.
  void end_backward();
  // Between begin_micro_batch and end_backward.
  bool in_micro_batch() const { return in_micro_batch_; }
  // Global 2-norm of the gradients (over every rank's pieces), clipped to max_norm (infinite:
  // no clipping) like torch.nn.utils.clip_grad_norm_. A device tensor: no host wait.
  // The scale is applied by the next step() inside its AdamW (no pass over the gradients of its
  // own; skip_step() drops it with the gradients).
  torch::Tensor clip_gradients(double max_norm);
  // AdamW on this rank's pieces, then the weights updated everywhere (stages 1-2 all-gather);
  // clears the gradients.
  void step(double lr);
  // Clears the gradients without updating anything (a step whose gradients are not finite):
  // masters, AdamW states and their step count stay as they were.
  void skip_step();
  int64_t step_count() const { return step_; }

  // Checkpoints. Names and shapes of the parameters (Hugging Face names, state-dict order; then
  // the LoRA adapters', decoder.h's adapter_state()).
  const std::vector<std::string>& names() const { return names_; }
  bool trained(size_t i) const;
  std::vector<int64_t> shape(size_t i) const;
  // The full fp32 value of parameter i (the master), gathered from every rank: a collective,
  // every rank must call it in the same order; the result is full on every rank, in host memory
  // of its own (never a view of the training state, so it can be written while training goes on).
  torch::Tensor gather_full(size_t i);
  // This rank's optimizer file in `dir` (every rank from stage 1 on; rank 0 alone at stage 0).
  void save_optimizer(const std::string& dir) const;
  // What save_optimizer writes, its tensors copied to host memory so that training can go on
  // while the file is written (write it with write_safetensors): an empty `name` when this
  // rank writes none.
  struct OptimizerFile {
    std::string name;
    NamedTensors tensors;
    std::map<std::string, std::string> metadata;
  };
  OptimizerFile optimizer_snapshot() const;
  // The name of this rank's optimizer file ("" when it writes none) and its tensors' bytes.
  std::string optimizer_file_name_here() const;
  int64_t optimizer_bytes() const;
  // Takes the masters from the checkpoint's fp32 weights and the AdamW states from its optimizer
  // files, whatever world size saved them. Throws std::runtime_error naming the file.
  void load(const std::string& checkpoint_dir, bool with_optimizer);

  ZeroBytes bytes() const;

  // LayerHooks (called by the decoder).
  void before_forward(int64_t layer) override;
  void after_forward(int64_t layer) override;
  void before_backward(int64_t layer) override;
  void after_backward(int64_t layer) override;

 private:
  OptimizerFile optimizer_file(bool copy) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int64_t step_ = 0;
  bool in_micro_batch_ = false;
  std::vector<std::string> names_;
};

// "optimizer-RANK-of-SHARDS.safetensors"
std::string optimizer_file_name(int rank, int shards);

}  // namespace studio::trainer
