#include "studio/trainer/train_loop.h"

#include <array>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <limits>
#include <set>
#include <stdexcept>
#include <thread>

#include "studio/model_facts/model_flops.h"
#include "studio/trainer/checkpoint.h"
#include "studio/trainer/batching/sampler.h"
#include "studio/trainer/parallel/reduce.h"
#include "studio/trainer/parallel/step_clock.h"
#include "studio/trainer/fault_injection.h"
#include "studio/trainer/hf_checkpoint.h"
#include "studio/trainer/tensors/host_allocator.h"
#include "studio/trainer/loss.h"
#include "studio/trainer/metrics/gpu_activity.h"
#include "studio/trainer/metrics/profile_capture.h"
#include "studio/trainer/metrics/run_reporter.h"
#include "studio/trainer/model/decoder.h"
#include "studio/trainer/model_folder.h"
#include "studio/trainer/optim/lr_schedule.h"
#include "studio/trainer/optim/zero.h"
#include "studio/trainer/runtime_info.h"
#include "studio/trainer/sp/layout.h"
#include "studio/trainer/sp/sp_attention.h"
#include "studio/config/adapters.h"
#include "studio/config/deepspeed.h"
#include "studio/config/memory_estimate.h"
#include "studio/trainer/model/lora.h"
#include "studio/trainer/peft_adapter.h"
#include "adapter_setup.h"
#include "objective.h"
#include "parallel_layout.h"

namespace fs = std::filesystem;

namespace studio::trainer {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kMiB = 1024.0 * 1024.0;


torch::Dtype compute_dtype(const RunConfig& cfg) {
  if (cfg.fp16)
    throw std::invalid_argument("fp16: fp16 training needs loss scaling, which studio-train does "
                                "not implement; use bf16: true");
  if (cfg.pure_bf16)
    throw std::invalid_argument("pure_bf16: studio-train does not train with bf16 weights and "
                                "optimizer states (it keeps fp32 masters); use bf16: true");
  return cfg.bf16 ? torch::kBFloat16 : torch::kFloat;
}

// "the loss is nan and the gradient norm is inf" for the values that are not finite.
std::string nonfinite_text(double loss, double grad_norm) {
  std::vector<std::string> parts;
  auto text = [](double v) { return std::isnan(v) ? std::string("nan") : v > 0 ? "inf" : "-inf"; };
  if (!std::isfinite(loss)) parts.push_back("the loss is " + text(loss));
  if (!std::isfinite(grad_norm)) parts.push_back("the gradient norm is " + text(grad_norm));
  if (parts.empty()) return "the values are finite";
  return parts.size() == 1 ? parts[0] : parts[0] + " and " + parts[1];
}

}  // namespace

struct Trainer::Impl {
  TrainInputs in;
  const RunConfig& cfg;
  Parallel par;
  // The models, their sharding and the forwards the objective runs (objective.h); the names
  // below are its members.
  StepModels m{cfg, in, par};
  torch::Device& device = m.device;
  CausalLM& model = m.model;
  CausalLM& ref_model = m.ref_model;  // a reference with a forward per step (DPO, ASFT)
  std::unique_ptr<ShardedState>& zero = m.zero;
  std::unique_ptr<ShardedState>& ref_zero = m.ref_zero;
  double& aux_weight = m.aux_weight;
  ZeroOptions zero_options;
  std::unique_ptr<EpochPlanner> planner;
  LrSchedule schedule;
  TrainerState state;
  RunReporter reporter;
  std::string resume_dir;
  std::string last_saved_dir;  // the newest checkpoint this run can go back to ("" when none)
  // The checkpoint being written in the background (at most one): its files are written by
  // `written` on every rank; once every rank's is done, rank 0 commits it (finish_save).
  struct PendingSave {
    int64_t step = 0;
    std::string staging;
    TrainerState state;
    std::future<std::string> written;  // "" or this rank's error
    double staged_s = 0;                   // the step's wait: gathers and copies to host memory
    double copies_mib = 0;                 // the host memory the copies hold (measured)
    std::shared_ptr<double> written_s;     // the background write's time (set when written)
  };
  std::optional<PendingSave> pending_save;
  std::string batching_note;  // dynamic batching: what it made of the first epoch (logged at start)
  // MoE models: the auxiliary loss's coefficient (0: off; studio::moe_aux_coefficient).
  double aux_coef = 0;
  // What the stage optimises (objective.h).
  std::unique_ptr<Objective> objective;
  // finetuning_type lora: the adapter the policy trains and where its weights come from.
  std::optional<AdapterPlan> adapters;
  // What building the models found worth saying (trained parameters, adapters, QLoRA), logged
  // once the run's event file is open.
  std::vector<std::string> start_notes;
  std::vector<std::string> start_warnings;  // the same, as warnings
  const pid_t parent_at_start = ::getppid();  // studio-train's launcher, when STUDIO_LAUNCHED

  explicit Impl(TrainInputs inputs)
      : in(std::move(inputs)),
        cfg(in.config),
        reporter(in.config.output_dir,
                 /*enabled=*/in.comm == nullptr || in.comm->rank() == 0,
                 in.terminal) {
    par.comm = in.comm;
    par.layout = sp_layout(cfg, in.comm);
    objective = make_objective(m, reporter);
    // Neat packing isolates samples; so do the objectives that pack sequences themselves.
    // Stage pt's blocks are cut from concatenated texts: one segment each, nothing to isolate.
    par.neat_packing = (cfg.neat_packing && cfg.stage != Stage::Pt) ||
                       objective->isolates_packed_sequences();
  }

  static sp::SpLayout sp_layout(const RunConfig& cfg, dist::Communicator* comm) {
    if (!comm) return sp::make_sp_layout(cfg.sequence_parallel_mode, 1, 0);
    return sp::make_sp_layout(cfg.sequence_parallel_mode, comm->sp(), comm->sp_rank(),
                              comm->ulysses_group().size(), comm->ring_group().size());
  }

  // Runs `step`, a part of resuming from resume_dir: its error names the checkpoint and says how
  // to go back to the one before it.
  template <class F>
  void resuming(F&& step) {
    if (resume_dir.empty()) return step();
    try {
      step();
    } catch (const dist::CollectiveError&) {
      throw;  // a peer's failure: the launcher reports the first one
    } catch (const std::exception& e) {
      std::string earlier;  // the newest checkpoint of output_dir older than the one resumed
      for (const std::string& dir : list_checkpoints(cfg.output_dir))
        if (checkpoint_step(dir) < checkpoint_step(resume_dir)) earlier = dir;
      throw std::runtime_error(
          "cannot resume from " + resume_dir + ": " + e.what() +
          (earlier.empty() ? std::string("; there is no earlier checkpoint: set "
                                         "overwrite_output_dir: true to start over")
                           : "; to go back to the checkpoint before it, set "
                             "resume_from_checkpoint: " + earlier));
    }
  }

  void find_resume_point() {
    if (cfg.resume_from_checkpoint) {
      resume_dir = *cfg.resume_from_checkpoint;
      // Checked file by file against its manifest (build_model's resuming() names the way back).
      resuming([&] {
        const std::string problem = verify_checkpoint(resume_dir);
        if (!problem.empty()) throw std::runtime_error(problem);
      });
    } else if (!cfg.overwrite_output_dir) {
      // As LLaMA-Factory: an output_dir holding checkpoints continues from the last one; here,
      // the last whose files match its manifest, saying why the newer ones were passed over.
      std::vector<std::string> skipped;
      if (auto last = last_good_checkpoint(cfg.output_dir, &skipped)) resume_dir = *last;
      for (const std::string& why : skipped)
        start_warnings.push_back("not resuming from " + why + "; " +
                                 (resume_dir.empty() ? std::string("starting over")
                                                     : "taking " + resume_dir + " instead"));
    }
  }

  // The model of `weights_dir` on this rank's device. At ZeRO stage 3 its parameters get no bytes
  // (the ShardedState fills them a layer at a time from the folder); their shapes are checked.
  // `weights` gets the folder's weights by name (the masters' source); a policy of stage rm gets
  // a value head, read from the folder or initialised from cfg.seed.
  // The adapter's settings in this run's forwards: LLaMA-Factory's DPO and KTO trainers turn
  // every dropout off (disable_dropout), lora_dropout included.
  LoraSettings lora_settings() const {
    LoraSettings s = adapters->adapter.lora;
    if (cfg.stage == Stage::Dpo || cfg.stage == Stage::Kto) s.dropout = 0;
    return s;
  }

  // finetuning_type lora: the base weights of model_name_or_path with the adapters to merge
  // merged (a policy's, and a separate reference's).
  WeightGetter base_weights(CausalLM& m, std::string* head_note) {
    return merged_base(*adapters, *m, model_weights(in.model_dir, m, static_cast<uint64_t>(cfg.seed),
                                                    head_note));
  }

  void quantize_base(CausalLM& m, const WeightGetter& weights, bool policy) {
    Quant4Options opt;
    opt.type = cfg.quantization_type == "fp4" ? kernels::Quant4Type::kFp4 : kernels::Quant4Type::kNf4;
    opt.double_quant = cfg.double_quantization;
    int64_t count = 0, before = 0, after = 0;
    for (const auto& item : m->named_modules()) {
      const std::string& name = item.key();
      if (name.rfind("model.layers.", 0) != 0 || name.find(".lora_") != std::string::npos) continue;
      auto* lin = item.value()->as<LinearImpl>();
      if (!lin || lin->quant) continue;
      before += lin->weight.numel() * static_cast<int64_t>(lin->weight.element_size());
      lin->quantize_weight(opt, weights(name + ".weight"));
      after += lin->quant->bytes();
      ++count;
    }
    char line[200];
    std::snprintf(line, sizeof line,
                  "QLoRA: %lld linear weights of the %s in %s%s: %.1f MiB instead of %.1f MiB",
                  static_cast<long long>(count), policy ? "policy" : "reference",
                  cfg.quantization_type.c_str(), cfg.double_quantization ? " (double quantization)" : "",
                  static_cast<double>(after) / kMiB, static_cast<double>(before) / kMiB);
    start_notes.push_back(line);
  }

  // A base bitsandbytes saved in 4 bits: its stored bytes are the 4-bit weights.
  void load_disk_4bit(CausalLM& m, bool policy) {
    int64_t bytes = 0;
    const int64_t count = load_bnb_4bit_weights(m, in.model_dir, &bytes);
    const DiskQuantization& q = in.model.quantization;
    char line[240];
    std::snprintf(line, sizeof line,
                  "QLoRA: %lld linear weights of the %s read in 4 bits from %s (%s%s, quantized "
                  "by bitsandbytes): %.1f MiB",
                  static_cast<long long>(count), policy ? "policy" : "reference",
                  in.model_dir.c_str(), q.quant_type.c_str(),
                  q.double_quant ? ", double quantization" : "", static_cast<double>(bytes) / kMiB);
    start_notes.push_back(line);
  }

  CausalLM make_model(const std::string& weights_dir, bool policy, WeightGetter& weights) {
    ModelOptions opt;
    opt.dtype = compute_dtype(cfg);
    opt.device = device;
    opt.value_head = policy && cfg.stage == Stage::Rm;
    opt.warn = [this](const std::string& note) { reporter.log("warning", note); };
    const bool deferred = zero_options.stage >= 3;
    // The policy of a LoRA run gets its adapters; a LoRA run's separate reference is the base.
    const bool adapted = policy && adapters;
    const bool base_only = !policy && adapters && !cfg.ref_model;
    // QLoRA: the base's linear weights in 4 bits, from a folder bitsandbytes saved in 4 bits or
    // quantized here from the values the folder holds. They never get full-size bytes: the model
    // is built without bytes, the 4-bit weights made one at a time, the rest allocated after.
    const bool disk_4bit = in.model.bnb_4bit_on_disk() && (adapted || base_only);
    const bool quantize_here = !disk_4bit && cfg.quantized() && (adapted || base_only);
    std::optional<DeferredAllocation> no_bytes;
    if (deferred || disk_4bit || quantize_here) no_bytes.emplace();
    CausalLM m(in.model, opt);
    // The policy of a LoRA run gets its adapters here: at stage 3 without bytes too.
    if (adapted) attach_lora(*m, lora_settings());
    no_bytes.reset();
    m->set_gradient_checkpointing(cfg.gradient_checkpointing);
    LongContextOptions long_context;
    long_context.offload_activations = cfg.offload_activations;
    long_context.tiled_mlp = cfg.tiled_mlp;
    long_context.tiled_mlp_budget_bytes = double(cfg.tiled_mlp_budget_mib) * 1024.0 * 1024.0;
    m->set_long_context(long_context);
    if (par.sequence_parallel()) m->set_attention(sp::make_sp_attention(par.layout, *par.comm));
    if (disk_4bit) load_disk_4bit(m, policy);
    // Mapped, read piece by piece; every name and shape checked.
    std::string head_note;
    if (adapted) {
      // The base from model_name_or_path (earlier adapters merged); the adapter (and the
      // additional_target weights) from a resumed checkpoint, else the continued adapter, else
      // PEFT's initialisation.
      weights = with_adapter(*adapters, *m, base_weights(m, &head_note),
                             weights_dir != in.model_dir ? weights_dir : adapters->continued,
                             static_cast<uint64_t>(cfg.seed));
    } else if (base_only) {
      weights = base_weights(m, &head_note);
    } else {
      weights = model_weights(weights_dir, m, static_cast<uint64_t>(cfg.seed), &head_note);
    }
    if (quantize_here) quantize_base(m, weights, policy);
    if (!deferred) {
      allocate_deferred(*m);
      m->load_hf_state(weights);
      torch::NoGradGuard no_grad;
      for (auto& [name, p] : m->adapter_state()) p.copy_(weights(name));
    }
    if (!head_note.empty()) reporter.log("info", head_note);
    return m;
  }

  void select_device() {
    // select_cuda_device also makes it the current device (streams, NCCL, the allocator's stats).
    // flash_attn: disabled is the eager (math) path; auto, sdpa and fa2 pick ATen's kernels.
    set_attention_kernel(cfg.flash_attn == FlashAttn::Disabled ? AttentionKernel::Math
                                                               : AttentionKernel::Auto);
    if (const auto d = select_cuda_device(in.local_rank, in.share_gpus))
      device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(*d));
  }

  void build_model() {
    if (par.sequence_parallel()) {
      sp::check_sp_heads(par.layout, in.model.num_heads, in.model.num_kv_heads);
      if (in.model.attention_dropout > 0)
        reporter.log("warning", "attention_dropout is set to 0 under sequence parallelism");
    }
    zero_options = ZeroOptions::from(cfg);
    // Stage rm reads the value head, not the LM head: an untied one is left as it is.
    if (cfg.stage == Stage::Rm && !in.model.tie_word_embeddings)
      zero_options.unused.push_back("lm_head.weight");
    objective->check();
    if (cfg.finetuning_type == FinetuningType::Lora) {
      adapters = plan_adapters(cfg, in.model);
      for (const auto& note : adapters->notes) start_notes.push_back(note);
    }
    aux_coef = studio::moe_aux_coefficient(cfg, in.model);
    if (aux_coef > 0)
      reporter.log("info", "MoE auxiliary load-balancing loss on, coefficient " +
                               c10::str(aux_coef) + " (the loss reported includes it)");
    // A checkpoint holds the fp32 masters: the masters are taken as saved, not through bf16.
    const std::string weights = resume_dir.empty() ? in.model_dir : resume_dir;
    WeightGetter source;
    model = make_model(weights, /*policy=*/true, source);
    select_trained();
    zero = std::make_unique<ShardedState>(model, device, par.world_group(), zero_options,
                                          AdamWSettings::from(cfg), /*trainable=*/true, source);
    if (objective->needs_reference()) build_reference();
  }

  // finetuning_type lora / freeze: which of the policy's parameters train (the others get no
  // gradient and no optimizer state), said in LLaMA-Factory's words.
  void select_trained() {
    if (cfg.finetuning_type == FinetuningType::Full) return;
    std::set<std::string> trained;
    if (adapters) {
      for (const auto& [name, shape] : adapter_file_shapes(*model, adapters->adapter))
        trained.insert(name);
    } else {
      for (const auto& [name, p] : model->hf_state())
        if (base_parameter_trained(cfg, in.model, name)) trained.insert(name);
    }
    int64_t count = 0, all = 0;
    auto state = model->hf_state();
    for (auto& item : model->adapter_state()) state.push_back(item);
    for (const auto& [name, p] : state) {
      all += p.numel();
      if (trained.count(name)) count += p.numel();
    }
    // QLoRA's 4-bit weights are no parameters any more, but part of the model.
    for (const auto& item : model->named_modules())
      if (auto* lin = item.value()->as<LinearImpl>(); lin && lin->quant) {
        int64_t n = 1;
        for (int64_t d : lin->quant->shape()) n *= d;
        all += n;
      }
    char line[160];
    std::snprintf(line, sizeof line, "trainable params: %lld || all params: %lld || trainable%%: %.4f",
                  static_cast<long long>(count), static_cast<long long>(all),
                  all > 0 ? 100.0 * static_cast<double>(count) / static_cast<double>(all) : 0.0);
    start_notes.push_back(line);
    zero_options.trained = [trained = std::move(trained)](const std::string& name) {
      return trained.count(name) > 0;
    };
  }

  // The objective's frozen reference: `ref_model`, else the initial policy (never a resumed
  // checkpoint). Kept for the steps, or dropped once the objective has what it needs of it.
  void build_reference() {
    // LoRA without ref_model: the policy with its adapters off, no second copy of the weights --
    // unless additional_target trains base weights in place, whose initial values PEFT's
    // disable_adapter() would bring back: then a frozen copy of the base, as for full training.
    if (adapters && !cfg.ref_model && adapters->adapter.modules_to_save.empty()) {
      m.reference_is_base = true;
      ref_model = model;
      bool keep = false;
      {
        const auto base = m.reference_scope();
        keep = objective->keep_reference(ref_model);
      }
      if (!keep) {
        ref_model = CausalLM(nullptr);
        m.reference_is_base = false;
      }
      return;
    }
    if (adapters && !cfg.ref_model)
      reporter.log("info", "the reference is a frozen copy of the base model: additional_target "
                           "trains base weights in place, so switching the adapter off would not "
                           "give the base back");
    const std::string dir = cfg.ref_model.value_or(in.model_dir);
    WeightGetter source;
    CausalLM ref = make_model(dir, /*policy=*/false, source);
    for (auto& p : ref->parameters()) p.set_requires_grad(false);
    ref->eval();
    ref_zero = std::make_unique<ShardedState>(ref, device, par.world_group(), zero_options,
                                              AdamWSettings::from(cfg), /*trainable=*/false,
                                              source);
    if (objective->keep_reference(ref)) {
      ref_model = ref;
      return;
    }
    ref_zero.reset();  // the reference model goes with it
  }

  void plan_run() {
    SamplerOptions s;
    s.seed = static_cast<uint64_t>(cfg.seed);
    s.micro_batch = cfg.per_device_train_batch_size;
    s.accumulation = cfg.gradient_accumulation_steps;
    s.dp_rank = par.dp_rank();
    s.dp_size = par.dp_size();
    // 360-LLaMA-Factory: under SP, shuffle_for_sequence_parallel: false keeps dataset order.
    s.shuffle = !(par.sequence_parallel() && !cfg.shuffle_for_sequence_parallel);
    if (objective->batch_lengths(s.lengths)) {
      // LLaMA-Factory v1's budget: micro_batch_size rows of cutoff_len tokens.
      s.token_budget = std::max<int64_t>(1, cfg.cutoff_len) * std::max<int64_t>(1, cfg.per_device_train_batch_size);
      s.unpadded = cfg.batching_strategy == Batching::DynamicPaddingFree;
    }
    planner = std::make_unique<EpochPlanner>(objective->train_size(), s);
    const int64_t per_epoch = planner->steps_per_epoch();
    int64_t total = 0;
    if (cfg.max_steps > 0) {
      total = cfg.max_steps;
    } else if (!s.lengths.empty()) {
      // Dynamic batching: each epoch's own steps, and the fraction of the last one.
      const auto whole = static_cast<int64_t>(std::floor(cfg.num_train_epochs));
      for (int64_t e = 0; e < whole; ++e) total += planner->steps_in_epoch(e);
      const double rest = cfg.num_train_epochs - static_cast<double>(whole);
      if (rest > 0)
        total += static_cast<int64_t>(std::ceil(rest * static_cast<double>(planner->steps_in_epoch(whole))));
    } else {
      total = static_cast<int64_t>(std::ceil(cfg.num_train_epochs * static_cast<double>(per_epoch)));
    }
    if (!s.lengths.empty()) {
      const auto micro = planner->dynamic_micro_batches(0);
      batching_note = std::string(to_string(cfg.batching_strategy)) + ": " +
                      std::to_string(objective->train_size()) + " samples in " + std::to_string(micro.size()) +
                      " micro-batches of at most " + std::to_string(s.token_budget) + " tokens" +
                      (s.unpadded ? " (packed)" : " (padded)") + " in the first epoch, " +
                      std::to_string(per_epoch) + " steps";
    }
    std::string error;
    schedule = make_lr_schedule(cfg, total, error);
    if (!error.empty()) throw std::invalid_argument(error);
    state.total_steps = schedule.total_steps;
    state.steps_per_epoch = per_epoch;
    state.seed = static_cast<uint64_t>(cfg.seed);
    if (resume_dir.empty()) return;
    state = load_trainer_state(resume_dir);
    zero->load(resume_dir, /*with_optimizer=*/true);
    const int64_t then_per_epoch = planner->steps_in_epoch(state.data_epoch);
    if (state.steps_per_epoch != then_per_epoch)
      reporter.log("warning", "the data changed since " + resume_dir + " (" +
                                  std::to_string(state.steps_per_epoch) + " steps per epoch then, " +
                                  std::to_string(then_per_epoch) + " now): the run does not continue "
                                  "exactly");
    state.steps_per_epoch = then_per_epoch;
    state.total_steps = schedule.total_steps;
  }

  // Where the step is, for an out-of-memory error: set by train_step.
  std::string phase = "the step's setup";

  // Out of memory in a step: which rank, step and phase, torch's own words, and what the memory
  // estimate says of this run and suggests.
  std::string out_of_memory(const std::string& torch_message, int64_t step) {
    std::string text = "out of memory on rank " + std::to_string(par.rank()) + " at step " +
                       std::to_string(step) + ", in " + phase + ": " +
                       torch_message.substr(0, torch_message.find('\n'));
    EstimateOptions eo;
    eo.nproc_per_node = par.world();
    eo.cpu = !device.is_cuda();
    if (cfg.deepspeed) {
      std::string error;
      eo.deepspeed = read_deepspeed_json(*cfg.deepspeed, error);
    }
    if (device.is_cuda())
      for (const auto& d : query_runtime_info().devices)
        if (d.index == device.index()) eo.gpu_capacity_bytes = double(d.total_memory_bytes);
    const MemoryEstimate est = estimate_memory(cfg, in.model, eo);
    char line[160];
    std::snprintf(line, sizeof line, ". The memory estimate for this run is %.1f GiB per rank",
                  est.bytes.total() / (1024.0 * 1024.0 * 1024.0));
    text += line;
    if (eo.gpu_capacity_bytes > 0) {
      std::snprintf(line, sizeof line, " of the GPU's %.1f GiB",
                    eo.gpu_capacity_bytes / (1024.0 * 1024.0 * 1024.0));
      text += line;
    }
    std::vector<std::string> options;
    if (const auto sp = smallest_fitting_sp(cfg, in.model, eo); sp && *sp > cfg.sequence_parallel_size)
      options.push_back("sequence_parallel_size: " + std::to_string(*sp));
    if (const auto cutoff = longest_fitting_cutoff(cfg, in.model, eo); cutoff && *cutoff < cfg.cutoff_len)
      options.push_back("cutoff_len: " + std::to_string(*cutoff));
    if (!cfg.gradient_checkpointing) options.push_back("gradient_checkpointing: true");
    if (zero_options.stage < 3) options.push_back("ZeRO stage 3 (zero_stage: 3)");
    if (!cfg.offload_optimizer) options.push_back("offload_optimizer: true");
    if (!cfg.tiled_mlp) options.push_back("tiled_mlp: true");
    if (cfg.per_device_train_batch_size > 1)
      options.push_back("per_device_train_batch_size: 1 with more gradient_accumulation_steps");
    text += "; what lowers it (studio-train estimate shows each): ";
    for (size_t i = 0; i < options.size(); ++i) text += (i ? ", " : "") + options[i];
    if (options.empty()) text += "a larger sequence_parallel_size or a shorter cutoff_len";
    return text;
  }

  StepStats train_step(const StepPlan& plan) {
    StepStats st;
    // The normaliser of the whole global batch (valid tokens, or pairs), summed over DP: each
    // micro-batch's backward is then a share of the loss of one big batch, whatever the
    // accumulation, dp and sp.
    double local_norm = 0, local_spans = 0;
    int64_t local_tokens = 0;
    const auto local_micro = static_cast<double>(plan.size());
    {
      const dist::StepClock::Span counted_as(dist::StepTime::Data);
      for (const auto& micro : plan) {
        const MicroCounts c = objective->count(micro);
        local_norm += c.normaliser;
        local_tokens += c.tokens;
        local_spans += c.span_term;
      }
    }
    const auto totals =
        par.sum(par.dp_group(),
                {local_norm, static_cast<double>(local_tokens), local_spans, local_micro},
                "batch size");
    st.normaliser = totals[0];
    st.tokens = static_cast<int64_t>(totals[1]);
    st.span_term = totals[2];
    st.micro_batches = totals[3];
    // The aux loss of the step: the mean over the global batch's micro-batches (each one's aux
    // over its whole sequences, whatever SP splits), times the coefficient.
    aux_weight = aux_coef > 0 && st.micro_batches > 0 ? aux_coef / st.micro_batches : 0;
    torch::Tensor aux_acc;  // this rank's sum of its micro-batches' aux

    // Loss and metric sums stay on the device until the whole step is queued: the host waits
    // for the device once per step, at the end (docs/PERFORMANCE.md, "Host-device syncs").
    torch::Tensor metric_sums;  // the objective's metrics summed over this rank's micro-batches
    torch::Tensor loss_acc;     // this rank's loss sum
    auto accumulate = [](torch::Tensor& acc, const torch::Tensor& v) {
      acc = acc.defined() ? acc + v.detach() : v.detach();
    };
    for (const auto& micro : plan) {
      if (st.normaliser <= 0) break;
      const std::string of = " of micro-batch " + std::to_string(st.micro_losses.size() + 1) + " of " +
                             std::to_string(plan.size());
      // Every rank's gradient covers its own tokens of its own samples: their sum over the
      // world (the ZeRO stage's reduction) is the gradient of the global batch's loss
      // (= SUM over SP of MEAN-over-DP shares).
      zero->begin_micro_batch(&micro == &plan.back());
      // The MoE auxiliary loss a forward starts ends with this micro-batch, however it ends.
      const std::unique_ptr<StepModels, void (*)(StepModels*)> aux_guard(
          &m, [](StepModels* models) { models->end_aux(); });
      phase = "the forward" + of;
      if (fault_requested("oom", state.global_step + 1, par.rank()))
        TORCH_CHECK_WITH(OutOfMemoryError, false,
                         "CUDA out of memory. Tried to allocate 2.00 GiB (injected by "
                         "STUDIO_INJECT_FAULT=oom)");
      MicroLoss out = objective->micro_loss(micro);
      auto sum = out.sum;
      if (fault_requested("loss.nan", state.global_step + 1, par.rank()))
        sum = sum * std::numeric_limits<double>::quiet_NaN();
      st.micro_losses.push_back(sum.detach());
      phase = "the backward" + of;
      (sum / st.normaliser).backward();
      accumulate(loss_acc, sum);
      if (out.metrics.defined()) accumulate(metric_sums, out.metrics);
      if (aux_weight > 0) accumulate(aux_acc, m.aux_value);
      zero->end_backward();
    }
    measure_model_states();
    torch::Tensor grad_norm;
    phase = "the gradient clipping and optimizer step";
    if (st.normaliser > 0) {
      const double max_norm = cfg.max_grad_norm > 0 ? cfg.max_grad_norm
                                                    : std::numeric_limits<double>::infinity();
      grad_norm = zero->clip_gradients(max_norm);
      if (cfg.skip_nonfinite_steps > 0) {
        // Skipping is decided before the update: one more wait for the device, and every rank
        // learns whether any rank's loss is not finite (the norm is the same everywhere).
        const double local_loss = loss_acc.defined() ? loss_acc.item<double>() : 0.0;
        const double bad_loss = par.sum(par.world_group(), {std::isfinite(local_loss) ? 0.0 : 1.0},
                                        "finite loss")[0];
        st.skipped = bad_loss > 0 || !std::isfinite(grad_norm.item<double>());
      }
      if (st.skipped)
        zero->skip_step();
      else
        zero->step(cfg.learning_rate * schedule.factor(state.global_step));
    }
    // The step's one wait for the device: its loss, metrics and gradient norm, read together.
    const double loss_sum = loss_acc.defined() ? loss_acc.item<double>() : 0.0;
    if (grad_norm.defined()) st.grad_norm = grad_norm.item<double>();
    if (aux_weight > 0) {
      // Every rank of an SP group holds the same aux per micro-batch: the mean over DP.
      const double local_aux = aux_acc.defined() ? aux_acc.item<double>() : 0.0;
      st.aux_loss = par.sum(par.dp_group(), {local_aux}, "MoE auxiliary loss")[0] / st.micro_batches;
      st.aux_term = aux_coef * st.aux_loss;
    }
    // The objective's sums over the grid (every rank runs them, whatever its data).
    objective->reduce(st, loss_sum, metric_sums);
    return st;
  }

  // Where a step that is not finite went wrong: the first rank (in rank order) with a
  // micro-batch whose loss was not finite, and which one; or that every loss was finite and the
  // gradients overflowed. Every rank calls it (a collective): all see the same global loss.
  std::string nonfinite_where(const StepStats& st) {
    const int world = par.world();
    std::vector<double> slots(2 * static_cast<size_t>(world), 0.0);
    if (!st.micro_losses.empty()) {
      const auto bad =
          torch::isfinite(torch::stack(st.micro_losses)).logical_not().to(torch::kCPU).nonzero();
      if (bad.numel() > 0) slots[2 * par.rank()] = double(bad[0][0].item<int64_t>() + 1);
      slots[2 * par.rank() + 1] = double(st.micro_losses.size());
    }
    const auto all = par.sum(par.world_group(), slots, "non-finite micro-batch");
    for (int r = 0; r < world; ++r)
      if (all[2 * r] > 0)
        return " (first on rank " + std::to_string(r) + ", in the loss of micro-batch " +
               std::to_string(int64_t(all[2 * r])) + " of " + std::to_string(int64_t(all[2 * r + 1])) + ")";
    return " (every micro-batch's loss was finite on every rank: the gradients overflowed)";
  }

  // Every rank learns whether any failed (a collective): all stop together, none waits for a
  // collective that a failed rank never reaches.
  void agree(const std::string& error, const std::string& what) {
    const double failed = error.empty() ? 0.0 : 1.0;
    if (par.sum(par.world_group(), {failed}, what)[0] == 0) return;
    throw std::runtime_error(!error.empty() ? error
                                            : what + " failed on another rank (see its error)");
  }

  // The model as Hugging Face files in `dir`, from the fp32 masters gathered one tensor at a time
  // for the shard being written (rank 0 writes; every rank takes part in each gather, in
  // hf_save_order's order, also after a failure on rank 0).
  void save_model(const std::string& dir, HfSaveOptions opt) {
    std::string error;
    // An offloaded update's failure surfaces here, on every rank at once.
    try {
      zero->finish_updates();
    } catch (const std::exception& e) {
      error = e.what();
    }
    agree(error, "saving " + dir);
    if (adapters) return save_adapter(dir);
    NamedTensors metas;
    for (size_t i = 0; i < zero->names().size(); ++i)
      metas.emplace_back(zero->names()[i],
                         torch::empty(zero->shape(i), torch::TensorOptions().dtype(torch::kFloat)
                                                          .device(torch::kMeta)));
    const auto order = hf_save_order(metas, opt);
    size_t fetched = 0;
    if (par.rank() == 0) {
      opt.fetch = [&](size_t i) {
        ++fetched;
        return zero->gather_full(i);
      };
      try {
        save_hf_model(dir, metas, opt);
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    // Every rank runs every gather (rank 0 those its writer did not reach), whatever failed.
    if (zero->shards() > 1)
      for (size_t k = fetched; k < order.size(); ++k) {
        try {
          zero->gather_full(order[k]);
        } catch (const std::exception& e) {
          if (error.empty()) error = e.what();
        }
      }
    agree(error, "saving " + dir);
  }

  // finetuning_type lora: the adapter (and the additional_target weights) as PEFT writes them,
  // from the fp32 masters gathered one tensor at a time (every rank takes part in each gather,
  // in names() order, also after a failure on rank 0); rank 0 writes the files. The pending
  // updates are done (save_model).
  void save_adapter(const std::string& dir) {
    std::string error;
    NamedTensors tensors = gather_adapter(error, /*to_host=*/false);
    if (par.rank() == 0 && error.empty()) {
      try {
        save_peft_adapter(dir, tensors, adapters->adapter, in.model_dir);
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    agree(error, "saving " + dir);
  }

  // The adapter's tensors (as adapter_file_shapes lists them) gathered one at a time in names()
  // order, every rank taking part in each gather whatever failed; rank 0 keeps them (copied to
  // host memory with `to_host`). The first failure goes to `error`.
  NamedTensors gather_adapter(std::string& error, bool to_host) {
    const auto shapes = adapter_file_shapes(*model, adapters->adapter);
    NamedTensors tensors;
    for (size_t i = 0; i < zero->names().size(); ++i) {
      if (!shapes.count(zero->names()[i])) continue;
      try {
        torch::Tensor t = zero->gather_full(i);
        if (par.rank() == 0)
          tensors.emplace_back(zero->names()[i], to_host ? host_copy(t) : std::move(t));
      } catch (const std::exception& e) {
        if (error.empty()) error = e.what();
      }
    }
    return tensors;
  }

  // A checkpoint in three phases (checkpoint.h). Rank 0 stages the folder; then, when every
  // rank has the host memory for it, the model (rank 0) and each rank's optimizer states are
  // copied to host memory and written in the background while training goes on, and rank 0
  // commits the folder at the first step at which every rank's write is done (at most one
  // save in flight; `finish` or the next save waits for it). Otherwise every rank writes its
  // files now, streaming the model a tensor at a time, and rank 0 commits at once.
  void save(int64_t step, bool finish = false) {
    finish_save();
    const std::string staging = checkpoint_staging_dir(cfg.output_dir, step);
    std::string error;
    auto on_rank0 = [&](const std::function<void()>& f) {
      if (par.rank() != 0) return;
      try {
        f();
      } catch (const std::exception& e) {
        error = e.what();
      }
    };
    on_rank0([&] {
      prepare_checkpoint(staging);
      write_rng_state(staging);
    });
    agree(error, "checkpoint " + std::to_string(step));
    fault_point("save.staged", step, par.rank());
    const bool in_background = every_rank_can_stage(step);
    try {
      if (in_background) {
        start_background_save(step, staging);
        if (finish) finish_save();
        return;
      }
      save_model(staging, checkpoint_save_options());
      fault_point("save.model", step, par.rank());
      std::vector<std::string> files;
      if (par.rank() == 0) files = own_files(staging, "");
      if (!cfg.save_only_model) {
        try {
          zero->save_optimizer(staging);
          const std::string name = optimizer_file_name_of_rank();
          if (!name.empty()) files.push_back(name);
        } catch (const std::exception& e) {
          error = e.what();
        }
        agree(error, "checkpoint " + std::to_string(step) + " optimizer states");
        fault_point("save.optimizer", step, par.rank());
      }
      try {
        write_digests(staging, par.rank(), files);
      } catch (const std::exception& e) {
        error = e.what();
      }
      agree(error, "checkpoint " + std::to_string(step));
      commit(step, staging, state);
    } catch (const std::exception& e) {
      if (par.rank() == 0) abandon_checkpoint(staging);
      throw std::runtime_error("cannot write checkpoint " +
                               (fs::path(cfg.output_dir) / checkpoint_name(step)).string() +
                               ": " + e.what());
    }
  }

  HfSaveOptions checkpoint_save_options() const {
    HfSaveOptions opt;
    opt.dtype = torch::kFloat;  // the masters, for an exact resume
    opt.source_dir = in.model_dir;
    return opt;
  }

  // This rank's optimizer file name ("" when it writes none).
  std::string optimizer_file_name_of_rank() const {
    return cfg.save_only_model ? std::string() : zero->optimizer_file_name_here();
  }

  // The files of `staging` rank 0 wrote: all but the other ranks' optimizer files (being written
  // now) and the digests. `own_optimizer`: rank 0's own optimizer file, when it writes one.
  static std::vector<std::string> own_files(const std::string& staging,
                                            const std::string& own_optimizer) {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(staging)) {
      const std::string name = e.path().filename().string();
      if (!e.is_regular_file() || name.rfind(".digests-", 0) == 0) continue;
      if (name.rfind("optimizer-", 0) == 0 && name != own_optimizer) continue;
      out.push_back(name);
    }
    return out;
  }

  // Rank 0 commits the folder every rank has written (a collective: all learn the outcome).
  void commit(int64_t step, const std::string& staging, const TrainerState& saved) {
    std::string error, path;
    if (par.rank() == 0) {
      try {
        path = commit_checkpoint(cfg.output_dir, staging, saved);
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    agree(error, "checkpoint " + std::to_string(step));
    fault_point("save.committed", step, par.rank());
    last_saved_dir = (fs::path(cfg.output_dir) / checkpoint_name(step)).string();
    if (par.rank() == 0) {
      if (cfg.save_total_limit) rotate_checkpoints(cfg.output_dir, *cfg.save_total_limit);
      reporter.checkpoint(step, path);
    }
  }

  // Whether every rank has the host memory to hold its part of a checkpoint while it is written
  // (rank 0: the model in fp32, or the adapter; each rank: its optimizer states), with as much
  // again to spare (MemAvailable). A collective: all decide alike. The first save that cannot
  // says so.
  bool every_rank_can_stage(int64_t step) {
    // STUDIO_CHECKPOINT_WRITES=foreground: every save as before (tests of other things that want
    // each checkpoint committed at its step; file systems that must not be written during a
    // step). Every rank has the same environment.
    if (const char* mode = std::getenv("STUDIO_CHECKPOINT_WRITES");
        mode != nullptr && std::string(mode) == "foreground")
      return false;
    double bytes = 0;
    if (par.rank() == 0) {
      const auto shapes = adapters ? adapter_file_shapes(*model, adapters->adapter)
                                   : std::map<std::string, std::vector<int64_t>>{};
      for (size_t i = 0; i < zero->names().size(); ++i) {
        if (adapters && !shapes.count(zero->names()[i])) continue;
        double n = 1;
        for (int64_t d : zero->shape(i)) n *= static_cast<double>(d);
        bytes += 4 * n;
      }
    }
    if (!cfg.save_only_model) bytes += static_cast<double>(zero->optimizer_bytes());
    const double available = available_host_bytes();
    const double cannot = available > 0 && 2 * bytes <= available ? 0.0 : 1.0;
    if (par.sum(par.world_group(), {cannot}, "checkpoint staging")[0] == 0) return true;
    if (!staging_note_given) {
      staging_note_given = true;
      reporter.log("warning",
                   "checkpoint " + std::to_string(step) +
                       " is written with the step waiting: a rank lacks the host memory to hold "
                       "its part (twice " + std::to_string(static_cast<int64_t>(bytes / (1 << 20))) +
                       " MiB on rank " + std::to_string(par.rank()) +
                       ", MemAvailable " + std::to_string(static_cast<int64_t>(available / (1 << 20))) +
                       " MiB) while the next steps run");
    }
    return false;
  }
  bool staging_note_given = false;

  // MemAvailable of /proc/meminfo in bytes (0 when unknown).
  static double available_host_bytes() {
    std::ifstream f("/proc/meminfo");
    std::string key;
    double kib = 0;
    std::string unit;
    while (f >> key >> kib >> unit)
      if (key == "MemAvailable:") return kib * 1024;
    return 0;
  }

  // The snapshot (every rank takes part in each gather, in order) and the background write.
  void start_background_save(int64_t step, const std::string& staging) {
    const auto began = std::chrono::steady_clock::now();
    const auto held_before = host_allocator_stats().allocated;
    std::string error;
    try {
      zero->finish_updates();  // an offloaded update's failure surfaces here, on every rank
    } catch (const std::exception& e) {
      error = e.what();
    }
    agree(error, "checkpoint " + std::to_string(step));
    std::function<void(const std::string&)> write_model;  // rank 0
    if (adapters) {
      NamedTensors tensors = gather_adapter(error, /*to_host=*/true);
      write_model = [tensors = std::move(tensors), adapter = adapters->adapter,
                     source = in.model_dir](const std::string& dir) {
        save_peft_adapter(dir, tensors, adapter, source);
      };
    } else {
      NamedTensors metas;
      for (size_t i = 0; i < zero->names().size(); ++i)
        metas.emplace_back(zero->names()[i],
                           torch::empty(zero->shape(i), torch::TensorOptions()
                                                            .dtype(torch::kFloat)
                                                            .device(torch::kMeta)));
      HfSaveOptions opt = checkpoint_save_options();
      const auto order = hf_save_order(metas, opt);
      auto host = std::make_shared<std::vector<torch::Tensor>>(metas.size());
      for (size_t i : order) {
        if (par.rank() != 0 && zero->shards() == 1) break;  // nothing to gather
        try {
          torch::Tensor t = zero->gather_full(i);
          if (par.rank() == 0) (*host)[i] = host_copy(t);
        } catch (const std::exception& e) {
          if (error.empty()) error = e.what();
        }
      }
      write_model = [metas = std::move(metas), opt, host](const std::string& dir) mutable {
        opt.fetch = [host](size_t i) { return std::move((*host)[i]); };
        save_hf_model(dir, metas, opt);
      };
    }
    ShardedState::OptimizerFile optimizer;
    if (!cfg.save_only_model) {
      try {
        optimizer = zero->optimizer_snapshot();
      } catch (const std::exception& e) {
        if (error.empty()) error = e.what();
      }
    }
    agree(error, "checkpoint " + std::to_string(step));
    PendingSave p;
    p.step = step;
    p.staging = staging;
    p.state = state;
    p.staged_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    p.copies_mib =
        (static_cast<double>(host_allocator_stats().allocated) - static_cast<double>(held_before)) /
        kMiB;
    p.written_s = std::make_shared<double>(0.0);
    const int rank = par.rank();
    p.written = std::async(
        std::launch::async,
        [step, rank, staging, write_model = std::move(write_model),
         optimizer = std::move(optimizer), written_s = p.written_s]() -> std::string {
          const auto start = std::chrono::steady_clock::now();
          try {
            if (fault_requested("save.slow", step, rank))
              std::this_thread::sleep_for(std::chrono::seconds(3));
            std::vector<std::string> files;
            if (rank == 0) {
              write_model(staging);
              files = own_files(staging, optimizer.name);
            }
            fault_point("save.model", step, rank);
            if (!optimizer.name.empty()) {
              write_safetensors((fs::path(staging) / optimizer.name).string(), optimizer.tensors,
                                optimizer.metadata);
              files.push_back(optimizer.name);
            }
            fault_point("save.optimizer", step, rank);
            // rank 0's own optimizer file is listed by own_files only once it exists
            std::sort(files.begin(), files.end());
            files.erase(std::unique(files.begin(), files.end()), files.end());
            write_digests(staging, rank, files);
            *written_s =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            return {};
          } catch (const std::exception& e) {
            return e.what();
          }
        });
    pending_save = std::move(p);
  }

  static torch::Tensor host_copy(const torch::Tensor& t) {
    return t.to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true);
  }

  // Waits for the background save (if any) on every rank, then commits it or, when a rank's
  // write failed, removes it and stops the run with that error. A collective.
  void finish_save() {
    if (!pending_save) return;
    PendingSave p = std::move(*pending_save);
    pending_save.reset();
    const std::string error = p.written.get();
    try {
      agree(error, "checkpoint " + std::to_string(p.step));
      char line[256];
      std::snprintf(line, sizeof line,
                    "checkpoint %lld: the step waited %.3f s for the copies to host memory "
                    "(%.3f MiB on rank 0); rank 0 wrote its files in %.3f s while training went on",
                    static_cast<long long>(p.step), p.staged_s, p.copies_mib, *p.written_s);
      commit(p.step, p.staging, p.state);
      reporter.log("info", line);
    } catch (const std::exception& e) {
      if (par.rank() == 0) abandon_checkpoint(p.staging);
      throw std::runtime_error("cannot write checkpoint " +
                               (fs::path(cfg.output_dir) / checkpoint_name(p.step)).string() +
                               ": " + e.what());
    }
  }

  // After a failure, when collectives can no longer be trusted: a background save whose files
  // every rank has written (each rank's digests file is its last) is still committed, by rank 0
  // alone, so that no finished step's checkpoint is lost. Waits for this rank's own write, then
  // up to 5 s for the other ranks' digests (a launcher stopping this rank waits 8). Never throws.
  // Returns why this rank's own write failed ("cannot write checkpoint DIR: why"; that
  // checkpoint is removed), or "".
  std::string salvage_pending_save() noexcept {
    if (!pending_save) return {};
    PendingSave p = std::move(*pending_save);
    pending_save.reset();
    try {
      if (const std::string failed = p.written.get(); !failed.empty()) {
        if (par.rank() == 0) abandon_checkpoint(p.staging);
        return "cannot write checkpoint " +
               (fs::path(cfg.output_dir) / checkpoint_name(p.step)).string() + ": " + failed;
      }
      if (par.rank() != 0) return {};
      auto all_written = [&] {
        for (int r = 0; r < par.world(); ++r)
          if (!fs::exists(fs::path(p.staging) / (".digests-" + std::to_string(r) + ".json")))
            return false;
        return true;
      };
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (!all_written() && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (!all_written()) {
        reporter.log("warning", "checkpoint " + std::to_string(p.step) +
                                    " was not complete when the run failed (a rank had not "
                                    "written its files): removed");
        abandon_checkpoint(p.staging);
        return {};
      }
      const std::string path = commit_checkpoint(cfg.output_dir, p.staging, p.state);
      last_saved_dir = path;
      reporter.checkpoint(p.step, path);
      reporter.log("info", "checkpoint " + std::to_string(p.step) +
                               ", written in the background, was committed after the failure");
    } catch (const std::exception& e) {
      reporter.log("warning", "checkpoint " + std::to_string(p.step) +
                                  " could not be committed after the failure: " + e.what());
    }
    return {};
  }

  // 1.0 when this rank has no background save or its write is done.
  double save_written() const {
    return !pending_save || pending_save->written.wait_for(std::chrono::seconds(0)) ==
                                std::future_status::ready
               ? 1.0
               : 0.0;
  }

  void save_final_model() {
    HfSaveOptions opt;
    opt.source_dir = in.model_dir;
    save_model(cfg.output_dir, opt);
  }

  double evaluate() { return objective->evaluate(); }

  // Model states measured once, at the first step with its gradients complete and the
  // activations gone: what the allocator holds beyond what it held before the model was built.
  double states_baseline_mib = 0;
  double model_states_mib = kNaN, offloaded_mib = kNaN;

  double allocated_mib_now() const {
    if (device.is_cuda()) {
      const auto m = cuda_memory_stats(device.index());
      return m ? m->allocated_mib : kNaN;
    }
    return static_cast<double>(host_allocator_stats().allocated) / kMiB;
  }
  void measure_model_states() {
    if (!std::isnan(model_states_mib)) return;
    // A backend may drop an operation's buffers only some time after its wait returns (Gloo's
    // worker thread releases the finished work after waking the waiter, and on a loaded
    // machine it may not run for a while): the steady state is measured, the smallest of
    // samples 10 ms apart, once the same value has been seen three times in a row (at most
    // one second). A barrier first, so that no peer's collective is still being served.
    if (par.world_group()) par.world_group()->barrier("model-state measurement");
    double least = allocated_mib_now();
    for (int same = 1, k = 0; same < 3 && k < 100; ++k) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      const double now = allocated_mib_now();
      same = now == least ? same + 1 : 1;
      least = std::min(least, now);
    }
    model_states_mib = least - states_baseline_mib;
    offloaded_mib = device.is_cuda() ? static_cast<double>(zero->bytes().offloaded) / kMiB
                                     : static_cast<double>(host_allocator_stats().offloaded) / kMiB;
    reporter.log("info", "model states on rank " + std::to_string(par.rank()) + ": " +
                             format_mib(model_states_mib) + " MiB measured (ZeRO stage " +
                             std::to_string(zero_options.stage) + " over " +
                             std::to_string(zero->shards()) + " rank(s); " +
                             format_mib(offloaded_mib) + " MiB of it offloaded)");
  }
  static std::string format_mib(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", v);
    return buf;
  }

  // Per-rank memory for the step event, gathered to every rank (all call it): the CUDA caching
  // allocator's figures, or on a CPU run the CPU allocator's count and RSS (device -1).
  // Where this rank's time went over the steps since the last step event (RankTime): the
  // sums of compute, SP communication, gradient communication, data and waits, and the steps.
  std::array<double, 5> window_time{};
  int64_t window_timed_steps = 0;
  // One step's parts from the clock (step_clock.h) and the step's wall time; compute is the rest.
  void count_step_time(double wall_s) {
    const auto parts = dist::StepClock::instance().take();
    double counted = 0;
    for (double p : parts) counted += p;
    window_time[0] += std::max(0.0, wall_s - counted);
    window_time[1] += parts[static_cast<size_t>(dist::StepTime::SpComm)];
    window_time[2] += parts[static_cast<size_t>(dist::StepTime::GradComm)];
    window_time[3] += parts[static_cast<size_t>(dist::StepTime::Data)];
    window_time[4] += parts[static_cast<size_t>(dist::StepTime::Wait)];
    ++window_timed_steps;
  }

  // Every rank's figures for the step event, gathered to every rank in one sum (all call it):
  // memory (returned; the CUDA caching allocator's figures, or on a CPU run the CPU
  // allocator's count and RSS, device -1) and each rank's RankTime (the window's mean per
  // step, into `times`).
  std::vector<GpuMemory> rank_stats(std::vector<RankTime>& times) {
    std::vector<GpuMemory> out;
    std::vector<double> v;
    if (device.is_cuda()) {
      // This rank's own device, explicitly (not whatever is current on this thread).
      auto mine = cuda_memory_stats(device.index());
      reset_cuda_peak_memory(device.index());  // peak_mib: since the previous step event
      v = {mine ? mine->allocated_mib : kNaN, mine ? mine->reserved_mib : kNaN,
           mine ? mine->peak_allocated_mib : kNaN, mine ? mine->total_mib : kNaN,
           static_cast<double>(device.index())};
    } else {
      const auto h = host_allocator_stats();
      reset_host_allocator_peak();
      const auto rss = host_memory_stats();
      // The "device side", as a GPU run counts its GPU: what offload put in host memory
      // (optimizer states, activations) is not in allocated or peak but in offloaded_mib. No
      // capacity line: the machine's memory is shared with everything else on it.
      v = {static_cast<double>(h.allocated - h.offloaded) / kMiB, rss ? rss->rss_mib : kNaN,
           static_cast<double>(h.device_peak) / kMiB, kNaN, -1.0};
    }
    v.push_back(model_states_mib);
    v.push_back(offloaded_mib);
    const auto activity = device.is_cuda() ? gpu_activity(device.index()) : std::nullopt;
    v.push_back(activity ? activity->util_percent : kNaN);
    v.push_back(activity ? activity->power_w : kNaN);
    v.push_back(activity && activity->power_limit_w > 0 ? activity->power_limit_w : kNaN);
    const auto steps = static_cast<double>(std::max<int64_t>(1, window_timed_steps));
    for (double t : window_time) v.push_back(t / steps);
    window_time = {};
    window_timed_steps = 0;
    const int world = par.world();
    const auto cols = static_cast<int64_t>(v.size());
    auto all = torch::zeros({world, cols}, torch::kDouble);
    all[par.rank()] = torch::tensor(v, torch::kDouble);
    if (par.world_group() && world > 1) {
      auto here = device.is_cuda() ? all.to(device) : all;
      par.world_group()->all_reduce_sum(here, "memory stats");
      all = here.cpu();
    }
    for (int r = 0; r < world; ++r) {
      GpuMemory g{r, static_cast<int>(all[r][4].item<double>()), all[r][0].item<double>(),
                  all[r][1].item<double>(), all[r][2].item<double>(), all[r][3].item<double>()};
      g.model_states_mib = all[r][5].item<double>();
      g.offloaded_mib = all[r][6].item<double>();
      g.util_percent = all[r][7].item<double>();
      g.power_w = all[r][8].item<double>();
      g.power_limit_w = all[r][9].item<double>();
      out.push_back(g);
      RankTime t;
      t.rank = r;
      t.compute_s = all[r][10].item<double>();
      t.sp_comm_s = all[r][11].item<double>();
      t.grad_comm_s = all[r][12].item<double>();
      t.data_s = all[r][13].item<double>();
      t.wait_s = all[r][14].item<double>();
      times.push_back(t);
    }
    return out;
  }

  // The device and its peak for MFU (model_flops.h), once the device is chosen.
  std::string device_name_ = "cpu";
  std::optional<double> peak_tflops_;
  void find_peak() {
    if (device.is_cuda())
      for (const auto& d : query_runtime_info().devices)
        if (d.index == device.index()) device_name_ = d.name;
    peak_tflops_ = peak_tflops(device_name_, torch_dtype_name(compute_dtype(cfg)));
  }

  TrainResult run(const std::atomic<bool>* stop);
};

TrainResult Trainer::Impl::run(const std::atomic<bool>* stop) {
  TrainResult result;
  result.eval_loss = kNaN;
  double window_loss = 0, window_aux = 0;
  int64_t window_steps = 0, window_tokens = 0, window_aux_steps = 0;
  int64_t window_diverged = 0;  // steps of the window whose loss was not finite
  double window_spans = 0;
  double window_start = unix_time_now();
  const double run_start = window_start;
  const int64_t eval_every = cfg.eval_steps.value_or(cfg.logging_steps);
  int64_t nonfinite_in_a_row = 0;
  last_saved_dir = resume_dir;
  if (!batching_note.empty()) reporter.log("info", batching_note);

  // STUDIO_CUDA_MEMORY_SNAPSHOT (metrics/profile_capture.h): the first two steps' allocations.
  CudaMemorySnapshot snapshot(device, par.rank(), state.global_step + 2,
                              [this](const std::string& level, const std::string& line) {
                                reporter.log(level, line);
                              });

  while (state.global_step < state.total_steps) {
    const auto plan = planner->plan(state.data_epoch);
    state.steps_per_epoch = std::max<int64_t>(1, static_cast<int64_t>(plan.size()));
    while (state.step_in_epoch < static_cast<int64_t>(plan.size()) &&
           state.global_step < state.total_steps) {
      // The step's time, from here to its loss being known (count_step_time).
      const auto step_began = std::chrono::steady_clock::now();
      dist::StepClock::instance().take();  // what came after the previous step is not its
      if (par.comm) par.comm->set_step(state.global_step);
      if (fault_requested("stall", state.global_step + 1, par.rank())) ::raise(SIGSTOP);
      if (fault_requested("slow", state.global_step + 1, par.rank()))
        std::this_thread::sleep_for(std::chrono::seconds(1));
      if (fault_requested("crash", state.global_step + 1, par.rank())) ::raise(SIGKILL);
      // A stop request on any rank stops all of them at the same step; a checkpoint request
      // (in.checkpoint_stop) on any rank makes every rank save first.
      // The same sum tells whether every rank has written its part of a background save.
      const double stop_here = stop && stop->load() ? 1.0 : 0.0;
      const double save_here = in.checkpoint_stop && in.checkpoint_stop->load() ? 1.0 : 0.0;
      const auto flags =
          par.sum(par.world_group(), {stop_here, save_here, save_written()}, "stop flag");
      if (pending_save && flags[2] == static_cast<double>(par.world())) finish_save();
      if (flags[0] > 0) {
        finish_save();
        result.final_state = "stopped";
        result.steps = state.global_step;
        // save_on_stop: the step every rank has just finished, as a checkpoint to resume from
        // (none before the first step; the one already there when this step was saved).
        if ((cfg.save_on_stop || flags[1] > 0) && state.global_step > 0) {
          const std::string dir =
              (fs::path(cfg.output_dir) / checkpoint_name(state.global_step)).string();
          if (last_saved_dir != dir) save(state.global_step, /*finish=*/true);
          result.stop_checkpoint = dir;
        }
        return result;
      }
      if (fault_requested("stop", state.global_step + 1, par.rank())) {
        if (std::getenv("STUDIO_LAUNCHED")) ::kill(::getppid(), SIGTERM);
        ::raise(SIGTERM);
      }
      const double lr = cfg.learning_rate * schedule.factor(state.global_step);
      StepStats st;
      try {
        st = train_step(plan[static_cast<size_t>(state.step_in_epoch)]);
      } catch (const c10::OutOfMemoryError& e) {
        throw std::runtime_error(out_of_memory(e.what_without_backtrace(), state.global_step + 1));
      }
      count_step_time(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - step_began).count());
      snapshot.after_step(state.global_step + 1);
      const double loss = st.normaliser > 0 ? st.loss_sum / st.normaliser + st.aux_term : kNaN;
      // Not finite: every rank sees the same global loss and norm, so all decide alike.
      if (st.normaliser > 0 && (!std::isfinite(loss) || !std::isfinite(st.grad_norm))) {
        const std::string what = "step " + std::to_string(state.global_step + 1) + ": " +
                                  nonfinite_text(loss, st.grad_norm) + nonfinite_where(st);
        if (++nonfinite_in_a_row > cfg.skip_nonfinite_steps) {
          finish_save();  // every rank is here: the checkpoint being written is kept
          throw std::runtime_error(
              what + (cfg.skip_nonfinite_steps > 0
                          ? " (" + std::to_string(nonfinite_in_a_row) + " such steps in a row, " +
                                "more than skip_nonfinite_steps: " +
                                std::to_string(cfg.skip_nonfinite_steps) + ")"
                          : std::string()) +
              ": training stopped, and nothing of this step was saved" +
              (last_saved_dir.empty() ? std::string("; no checkpoint was saved yet")
                                      : "; the last checkpoint is " + last_saved_dir) +
              ". Lower learning_rate or set max_grad_norm, look for a bad sample in the data, or "
              "set skip_nonfinite_steps to skip such steps");
        }
        reporter.log("warning", what + ": skipped, no update (" +
                                    std::to_string(nonfinite_in_a_row) + " in a row of at most " +
                                    std::to_string(cfg.skip_nonfinite_steps) + ")");
      } else {
        nonfinite_in_a_row = 0;
      }
      ++state.global_step;
      ++state.step_in_epoch;
      state.tokens_seen += st.tokens;
      result.step_losses.push_back(loss);
      window_loss += std::isnan(loss) ? 0 : loss;
      if (std::isfinite(st.aux_loss)) window_aux += st.aux_loss, ++window_aux_steps;
      window_steps += std::isnan(loss) ? 0 : 1;
      window_diverged += st.normaliser > 0 && !std::isfinite(loss) ? 1 : 0;
      window_tokens += st.tokens;
      window_spans += st.span_term;
      objective->add_to_window(st);

      const double now = unix_time_now();
      const bool last = state.global_step == state.total_steps;
      StepEvent e;
      e.step = state.global_step;
      e.epoch = state.epoch();
      e.loss = window_steps > 0 ? window_loss / static_cast<double>(window_steps) : kNaN;
      if (window_aux_steps > 0) e.aux_loss = window_aux / static_cast<double>(window_aux_steps);
      e.lr = lr;
      e.grad_norm = st.grad_norm;
      // A diverged step's loss or norm is written as such (NaN, Infinity), not as "no value".
      if (window_diverged > 0 && !std::isfinite(e.loss)) e.set_not_finite(StepValue::Loss);
      if (st.normaliser > 0 && !std::isfinite(st.grad_norm)) e.set_not_finite(StepValue::GradNorm);
      e.tokens = window_tokens;
      e.tokens_per_sec = static_cast<double>(window_tokens) / std::max(1e-9, now - window_start);
      e.model_tflops = training_flops(in.model, static_cast<double>(window_tokens), window_spans,
                                      objective->reference_forward_per_step()) /
                       std::max(1e-9, now - window_start) / par.world() / 1e12;
      e.mfu = peak_tflops_ ? e.model_tflops / *peak_tflops_ : kNaN;
      e.elapsed = now - run_start;
      e.time = now;
      objective->write_window(e, window_steps);
      if (auto mem = host_memory_stats()) {
        e.rss_mib = mem->rss_mib;
        e.peak_rss_mib = mem->peak_rss_mib;
      }
      const bool log_now = state.global_step % cfg.logging_steps == 0 || last;
      if (log_now) e.gpus = rank_stats(e.rank_times);
      if (in.on_step) in.on_step(state.global_step, loss);
      reporter.step(e, log_now);
      if (log_now) {
        window_loss = 0;
        window_steps = 0;
        window_diverged = 0;
        window_aux = 0;
        window_aux_steps = 0;
        window_tokens = 0;
        window_spans = 0;
        objective->reset_window();
        window_start = now;
      }
      if (cfg.eval_strategy == EvalStrategy::Steps && state.global_step % eval_every == 0) {
        result.eval_loss = evaluate();
        reporter.eval(state.global_step, result.eval_loss, objective->eval_metrics());
      }
      if (state.global_step % cfg.save_steps == 0 && !last) save(state.global_step);
    }
    if (state.step_in_epoch >= static_cast<int64_t>(plan.size())) {
      ++state.data_epoch;
      state.step_in_epoch = 0;
      if (cfg.eval_strategy == EvalStrategy::Epoch) {
        result.eval_loss = evaluate();
        reporter.eval(state.global_step, result.eval_loss, objective->eval_metrics());
      }
    }
  }
  save(state.global_step, /*finish=*/true);
  save_final_model();
  result.steps = state.global_step;
  result.final_state = "finished";
  return result;
}

Trainer::Trainer(TrainInputs in) : impl_(std::make_unique<Impl>(std::move(in))) {}
Trainer::~Trainer() = default;

TrainResult Trainer::run(const std::atomic<bool>* stop) {
  Impl& t = *impl_;
  try {
    if (t.objective->train_size() == 0) throw std::invalid_argument(t.objective->no_train_data());
    torch::manual_seed(static_cast<uint64_t>(t.cfg.seed));
    t.find_resume_point();
    install_counting_host_allocator();
    t.select_device();
    t.states_baseline_mib = t.allocated_mib_now();
    dist::StepClock::instance().start(t.device);
    const std::unique_ptr<dist::StepClock, void (*)(dist::StepClock*)> clock_stops(
        &dist::StepClock::instance(), [](dist::StepClock* c) { c->stop(); });
    t.resuming([&] { t.build_model(); });
    t.resuming([&] { t.plan_run(); });
    t.find_peak();
    t.reporter.start(t.cfg, t.in.model, t.par.world(), t.state.total_steps, t.state.global_step,
                     t.device_name_, t.peak_tflops_);
    for (const auto& note : t.start_notes) t.reporter.log("info", note);
    for (const auto& note : t.start_warnings) t.reporter.log("warning", note);
    if (!t.resume_dir.empty())
      t.reporter.log("info", "resuming from " + t.resume_dir + " at step " +
                                 std::to_string(t.state.global_step));
    TrainResult r = t.run(stop);
    if (r.final_state == "stopped")
      t.reporter.end(RunState::Stopped,
                     "stopped at step " + std::to_string(r.steps) +
                         (!r.stop_checkpoint.empty()
                              ? "; saved to resume from: resume_from_checkpoint: " +
                                    r.stop_checkpoint
                              : t.cfg.save_on_stop ? "; no step done, nothing to save"
                                                   : std::string()),
                     130);  // what the process exits with when stopped, as after Ctrl-C
    else
      t.reporter.end(RunState::Finished, "trained " + std::to_string(r.steps) + " steps", 0);
    return r;
  } catch (const dist::CollectiveError& e) {
    // A peer failed or hung. Under studio-train's launcher the end record is left to it: it
    // knows which rank failed first, and why (this rank only sees a broken connection) -- unless
    // this rank timed out and its watchdog named who stalls, which no launcher can tell.
    t.salvage_pending_save();
    t.reporter.log("error", e.what());
    // (A launcher that is gone, killed, records nothing: this process was orphaned.)
    if (!std::getenv("STUDIO_LAUNCHED") || ::getppid() != t.parent_at_start ||
        std::string_view(e.what()).find("; watchdog: ") != std::string_view::npos)
      t.reporter.end(RunState::Failed, e.what(), 1);
    throw;
  } catch (const std::exception& e) {
    // A background save that failed is the cause even when the step met its consequence first
    // (a full disk: the save took the room, then an event could not be appended).
    const std::string save_failure = t.salvage_pending_save();
    if (save_failure.empty() ||
        std::string_view(e.what()).find(save_failure) != std::string_view::npos) {
      t.reporter.log("error", e.what());
      t.reporter.end(RunState::Failed, e.what(), 1);
      throw;
    }
    const std::string reason = save_failure + " (then: " + e.what() + ")";
    t.reporter.log("error", reason);
    t.reporter.end(RunState::Failed, reason, 1);
    throw std::runtime_error(reason);
  }
}

double Trainer::evaluate() { return impl_->evaluate(); }

double evaluate_model(const std::string& model_dir, const std::vector<TokenizedSample>& samples,
                      int64_t batch_size, int64_t pad_id) {
  CausalLM model = load_model_folder(model_dir);
  return mean_token_loss(model, nullptr, samples, std::max<int64_t>(1, batch_size), pad_id,
                         torch::kCPU, Parallel{});
}

}  // namespace studio::trainer
