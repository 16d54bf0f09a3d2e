// A run's set-up (train_loop_impl.h): where it resumes from, its models and their sharding, and
// its plan of steps.
#include "train_loop_impl.h"

#include <cstdio>
#include <filesystem>
#include <set>
#include <stdexcept>

#include "studio/config/adapters.h"
#include "studio/trainer/peft_adapter.h"
#include "studio/trainer/runtime_info.h"
#include "studio/trainer/sp/sp_attention.h"

namespace fs = std::filesystem;

namespace studio::trainer {

torch::Dtype Trainer::Impl::compute_dtype(const RunConfig& cfg) {
  if (cfg.fp16)
    throw std::invalid_argument(
        "fp16: fp16 training needs loss scaling, which studio-train does "
        "not implement; use bf16: true");
  if (cfg.pure_bf16)
    throw std::invalid_argument(
        "pure_bf16: studio-train does not train with bf16 weights and "
        "optimizer states (it keeps fp32 masters); use bf16: true");
  return cfg.bf16 ? torch::kBFloat16 : torch::kFloat;
}

void Trainer::Impl::find_resume_point() {
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

LoraSettings Trainer::Impl::lora_settings() const {
  LoraSettings s = adapters->adapter.lora;
  if (cfg.stage == Stage::Dpo || cfg.stage == Stage::Kto) s.dropout = 0;
  return s;
}

WeightGetter Trainer::Impl::base_weights(CausalLM& m, std::string* head_note) {
  return merged_base(*adapters, *m,
                     model_weights(in.model_dir, m, static_cast<uint64_t>(cfg.seed), head_note));
}

void Trainer::Impl::quantize_base(CausalLM& m, const WeightGetter& weights, bool policy) {
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
                cfg.quantization_type.c_str(),
                cfg.double_quantization ? " (double quantization)" : "",
                static_cast<double>(after) / kMiB, static_cast<double>(before) / kMiB);
  start_notes.push_back(line);
}

void Trainer::Impl::load_disk_4bit(CausalLM& m, bool policy) {
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

CausalLM Trainer::Impl::make_model(const std::string& weights_dir, bool policy,
                                   WeightGetter& weights) {
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

void Trainer::Impl::select_device() {
  // select_cuda_device also makes it the current device (streams, NCCL, the allocator's stats).
  // flash_attn: disabled is the eager (math) path; auto, sdpa and fa2 pick ATen's kernels.
  set_attention_kernel(cfg.flash_attn == FlashAttn::Disabled ? AttentionKernel::Math
                                                             : AttentionKernel::Auto);
  if (const auto d = select_cuda_device(in.local_rank, in.share_gpus))
    device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(*d));
}

void Trainer::Impl::build_model() {
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
    reporter.log("info", "MoE auxiliary load-balancing loss on, coefficient " + c10::str(aux_coef) +
                             " (the loss reported includes it)");
  // A checkpoint holds the fp32 masters: the masters are taken as saved, not through bf16.
  const std::string weights = resume_dir.empty() ? in.model_dir : resume_dir;
  WeightGetter source;
  model = make_model(weights, /*policy=*/true, source);
  select_trained();
  zero = std::make_unique<ShardedState>(model, device, par.world_group(), zero_options,
                                        AdamWSettings::from(cfg), /*trainable=*/true, source);
  if (objective->needs_reference()) build_reference();
}

void Trainer::Impl::select_trained() {
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
  std::snprintf(line, sizeof line,
                "trainable params: %lld || all params: %lld || trainable%%: %.4f",
                static_cast<long long>(count), static_cast<long long>(all),
                all > 0 ? 100.0 * static_cast<double>(count) / static_cast<double>(all) : 0.0);
  start_notes.push_back(line);
  zero_options.trained = [trained = std::move(trained)](const std::string& name) {
    return trained.count(name) > 0;
  };
}

void Trainer::Impl::build_reference() {
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
    reporter.log("info",
                 "the reference is a frozen copy of the base model: additional_target "
                 "trains base weights in place, so switching the adapter off would not "
                 "give the base back");
  const std::string dir = cfg.ref_model.value_or(in.model_dir);
  WeightGetter source;
  CausalLM ref = make_model(dir, /*policy=*/false, source);
  for (auto& p : ref->parameters()) p.set_requires_grad(false);
  ref->eval();
  ref_zero = std::make_unique<ShardedState>(ref, device, par.world_group(), zero_options,
                                            AdamWSettings::from(cfg), /*trainable=*/false, source);
  if (objective->keep_reference(ref)) {
    ref_model = ref;
    return;
  }
  ref_zero.reset();  // the reference model goes with it
}

void Trainer::Impl::plan_run() {
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
    s.token_budget = std::max<int64_t>(1, cfg.cutoff_len) *
                     std::max<int64_t>(1, cfg.per_device_train_batch_size);
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
      total += static_cast<int64_t>(
          std::ceil(rest * static_cast<double>(planner->steps_in_epoch(whole))));
  } else {
    total = static_cast<int64_t>(std::ceil(cfg.num_train_epochs * static_cast<double>(per_epoch)));
  }
  if (!s.lengths.empty()) {
    const auto micro = planner->dynamic_micro_batches(0);
    batching_note = std::string(to_string(cfg.batching_strategy)) + ": " +
                    std::to_string(objective->train_size()) + " samples in " +
                    std::to_string(micro.size()) + " micro-batches of at most " +
                    std::to_string(s.token_budget) + " tokens" +
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
                                std::to_string(then_per_epoch) +
                                " now): the run does not continue "
                                "exactly");
  state.steps_per_epoch = then_per_epoch;
  state.total_steps = schedule.total_steps;
}

}  // namespace studio::trainer
