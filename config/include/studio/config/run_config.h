#pragma once
// The run config: the contract between the studio and the engine. One typed struct holding every
// key of a LLaMA-Factory (and 360-LLaMA-Factory) training YAML that users bring, with LLaMA-Factory's
// defaults. Parsing lives in config_io, the key table in config_schema, the rules in validate.
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace studio {

enum class Stage { Sft, Dpo, Pt, Rm, Kto };
enum class FinetuningType { Full, Lora, Freeze };
enum class LrScheduler { Linear, Cosine, Constant, ConstantWithWarmup, CosineWithMinLr };
enum class FlashAttn { Auto, Fa2, Sdpa, Disabled };
enum class PrefLoss { Sigmoid, Ipo, Hinge, Orpo, Simpo, KtoPair };
enum class EvalStrategy { No, Steps, Epoch };
enum class SpMode { ZigzagRing, Ulysses, Usp };
// How training samples form micro-batches (LLaMA-Factory v1's batching_strategy): Normal and
// PaddingFree take per_device_train_batch_size samples each (padding_free's packing into one row
// gives the same loss, so studio-train pads them); Dynamic and DynamicPaddingFree fill each
// micro-batch to a budget of per_device_train_batch_size x cutoff_len tokens, padded or packed.
enum class Batching { Normal, PaddingFree, Dynamic, DynamicPaddingFree };

// A YAML value kept verbatim (as YAML text) because the engine does not interpret it.
struct RawYaml {
  std::string text;
};

// A key the engine does not know: kept as written so that load -> save loses nothing.
struct ExtraKey {
  std::string key;
  RawYaml value;
  int line = 0;  // where it stood in the source file (orders it on save)
};

struct SourcePos {
  int line = 0;  // 1-based
  int column = 0;
};

// The form a config file is written in; a config saves back in the form it came in.
enum class ConfigForm {
  LlamaFactory,    // LLaMA-Factory's (and 360-LLaMA-Factory's) training YAML: the key table's names
  LlamaFactoryV1,  // LLaMA-Factory v1 (USE_V1=1): flat keys of its own (llamafactory_v1.h)
};

// Where each key came from; empty for configs built in memory. Positions are kept under the key
// table's names; `spelled` gives the name the file wrote where it differs (a v1 file's `cp_size`
// for sequence_parallel_size), so messages name the key the user wrote.
struct ConfigSource {
  std::string file;                           // as given to the loader
  ConfigForm form = ConfigForm::LlamaFactory;
  std::map<std::string, SourcePos> key_pos;   // keys present in the file
  std::map<std::string, SourcePos> value_pos;
  std::map<std::string, std::string> spelled;  // key table name -> the file's name for it
  bool has(const std::string& key) const { return key_pos.count(key) != 0; }
  const std::string& spelling(const std::string& key) const {
    auto it = spelled.find(key);
    return it == spelled.end() ? key : it->second;
  }
};

// What a LLaMA-Factory v1 file says that no field of the key table holds (llamafactory_v1.h).
struct LlamaFactoryV1Data {
  std::string train_dataset;                 // a dataset YAML, a data file or folder, or a hub id
  std::optional<std::string> eval_dataset;   // the same; read when eval_strategy asks for it
  std::optional<int64_t> global_batch_size;  // sequences per optimizer step over the data-parallel
                                             // ranks; sets gradient_accumulation_steps
  // The file's keys in its order with the text of their values, and the text their values wrote
  // as when loaded: a key whose value is still that is written back as the file had it.
  struct Written {
    std::string key;     // as the file spells it
    std::string text;    // the file's YAML text of the value
    std::string loaded;  // the value as written right after loading
    int line = 0;
  };
  std::vector<Written> written;
};

struct RunConfig {
  // --- model --------------------------------------------------------------------------------
  std::string model_name_or_path;              // local Hugging Face model folder (required)
  bool trust_remote_code = false;              // accepted; no remote code is ever run
  std::optional<std::string> ref_model;        // DPO/ASFT reference; default: frozen initial policy
  // A hub id in model_name_or_path / ref_model is found in the local Hugging Face cache
  // (studio/model_facts/hub_cache.h) at this revision (branch, tag or commit), in cache_dir first.
  std::string model_revision = "main";
  std::optional<std::string> cache_dir;

  // --- method -------------------------------------------------------------------------------
  Stage stage = Stage::Sft;                    // sft | dpo | pt | rm | kto
  bool do_train = true;                        // false: nothing to train
  FinetuningType finetuning_type = FinetuningType::Full;  // full | lora | freeze (docs/ADAPTERS.md)
  std::optional<std::string> deepspeed;        // DeepSpeed JSON: its ZeRO stage and offload flags
  // The same request without a JSON (docs/SHARDING.md): ZeRO stage 0-3 over the whole world,
  // fp32 masters + AdamW states (+ gradient pieces) in host memory, stage 3 weights there too.
  std::optional<int64_t> zero_stage;
  bool offload_optimizer = false;
  bool offload_param = false;
  double pref_beta = 0.1;                      // DPO beta
  PrefLoss pref_loss = PrefLoss::Sigmoid;      // sigmoid | ipo | hinge | orpo | simpo | kto_pair
  double simpo_gamma = 0.5;                    // SimPO's target reward margin (pref_loss simpo)
  double pref_ftx = 0.0;                       // weight of the SFT term mixed into DPO / KTO
  double kto_chosen_weight = 1.0;              // KTO: weight of the desirable examples' losses
  double kto_rejected_weight = 1.0;            // KTO: weight of the undesirable examples' losses
  double dpo_label_smoothing = 0.0;            // conservative DPO (sigmoid loss only)
  bool precompute_ref_logps = false;           // reference log-probs in one pass before training

  // --- adapters (finetuning_type lora / freeze; LLaMA-Factory's keys, docs/ADAPTERS.md) -------
  int64_t lora_rank = 8;                       // r of every LoRA pair
  std::optional<double> lora_alpha;            // scaling numerator; default 2 x lora_rank
  double lora_dropout = 0.0;                   // dropout on the adapters' input while training
  std::vector<std::string> lora_target = {"all"};  // module names (q_proj, ...) or all
  std::vector<std::string> additional_target;  // whole modules trained too (embed_tokens, lm_head)
  bool use_rslora = false;                     // scaling alpha / sqrt(r) instead of alpha / r
  bool use_dora = false;                       // weight-decomposed LoRA (a magnitude per row)
  std::vector<std::string> adapter_name_or_path;  // PEFT adapters: earlier merged, last continued
  bool create_new_adapter = false;             // merge every given adapter, train a new one
  int64_t freeze_trainable_layers = 2;         // freeze: last n layers (n < 0: first -n)
  std::vector<std::string> freeze_trainable_modules = {"all"};  // freeze: modules in those layers
  std::vector<std::string> freeze_extra_modules;  // freeze: non-layer modules trained too
  // QLoRA (finetuning_type lora): the base's decoder linear weights in bitsandbytes' 4-bit format.
  std::optional<int64_t> quantization_bit;     // 4 (8: LLM.int8, not implemented)
  std::string quantization_type = "nf4";       // nf4 | fp4
  bool double_quantization = true;             // the absmax values in 8 bits too
  std::string quantization_method = "bnb";     // bitsandbytes' format (the only one)
  bool quantized() const { return quantization_bit.has_value(); }
  double lora_scaling() const {
    const double alpha = lora_alpha.value_or(2.0 * static_cast<double>(lora_rank));
    return use_rslora ? alpha / std::sqrt(static_cast<double>(lora_rank))
                      : alpha / static_cast<double>(lora_rank);
  }

  // --- export (studio-train export: LLaMA-Factory's `llamafactory-cli export`) ---------------
  std::optional<std::string> export_dir;       // where the merged model is written
  int64_t export_size = 5;                     // GB (10^9 bytes) of weights per shard
  std::string export_device = "cpu";           // cpu | auto: where the merge runs
  std::string infer_dtype = "auto";            // auto | float16 | bfloat16 | float32
  bool export_legacy_format = false;           // .bin files: refused (safetensors only)

  // --- data ---------------------------------------------------------------------------------
  std::vector<std::string> dataset;            // names in dataset_info.json (required)
  std::string dataset_dir = "data";            // folder holding dataset_info.json
  std::vector<std::string> eval_dataset;       // names in dataset_info.json
  double val_size = 0.0;                       // fraction in [0, 1) or a whole sample count
  std::string template_name;                   // key `template`: chat template (required)
  int64_t cutoff_len = 2048;                   // tokens per sequence (the trained length with SP)
  std::optional<int64_t> max_samples;          // cap on samples per dataset
  bool train_on_prompt = false;                // also learn the prompt tokens
  bool mask_history = false;                   // learn only the last turn
  bool packing = false;                        // pack several samples into one sequence
  bool neat_packing = false;                   // packing without cross-sample attention
  Batching batching_strategy = Batching::Normal;
  bool dynamic_batching() const {
    return batching_strategy == Batching::Dynamic ||
           batching_strategy == Batching::DynamicPaddingFree;
  }
  bool overwrite_cache = false;                // re-tokenize instead of using the cache
  std::optional<int64_t> preprocessing_num_workers;  // tokenizer workers
  // Rows per preprocessing batch (LLaMA-Factory's preprocessing_batch_size): stage pt with
  // packing concatenates each batch's texts and cuts them into cutoff_len blocks on its own,
  // dropping each batch's remainder, as LLaMA-Factory's batched map does.
  int64_t preprocessing_batch_size = 1000;
  std::optional<int64_t> dataloader_num_workers;     // accepted; loading is in-process

  // --- output -------------------------------------------------------------------------------
  std::string output_dir;                      // run folder: checkpoints, events.jsonl (required)
  bool overwrite_output_dir = false;           // allow a non-empty output_dir without resuming
  int64_t logging_steps = 10;                  // steps between logged metrics
  int64_t save_steps = 500;                    // steps between checkpoints
  std::optional<int64_t> save_total_limit;     // keep at most this many checkpoints
  bool save_only_model = false;                // checkpoints without optimizer/scheduler state
  bool plot_loss = false;                      // accepted; the studio plots every run
  std::optional<RawYaml> report_to;            // "tensorboard" (or "all") also writes TB events
  std::optional<std::string> logging_dir;      // TensorBoard's folder; default OUTPUT_DIR/runs/...

  // --- optimisation -------------------------------------------------------------------------
  int64_t per_device_train_batch_size = 1;     // sequences per rank per micro-step
  int64_t gradient_accumulation_steps = 1;     // micro-steps per optimizer step
  double learning_rate = 5e-5;                 // peak learning rate
  double num_train_epochs = 3.0;               // used when max_steps <= 0
  int64_t max_steps = -1;                      // > 0 overrides num_train_epochs
  LrScheduler lr_scheduler_type = LrScheduler::Linear;
  std::map<std::string, double> lr_scheduler_kwargs;  // min_lr_rate / min_lr (cosine_with_min_lr)
  double warmup_ratio = 0.0;                   // fraction of steps spent warming up
  int64_t warmup_steps = 0;                    // > 0 overrides warmup_ratio
  double weight_decay = 0.0;                   // AdamW decoupled decay (not on norms, biases)
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  double max_grad_norm = 1.0;                  // global-norm clipping; 0 disables
  // MoE models (LLaMA-Factory's key): > 0 turns the routers' auxiliary load-balancing loss on
  // with this coefficient (transformers' output_router_logits + router_aux_loss_coef); absent
  // or 0: as the model's config.json says (moe_aux_coefficient).
  std::optional<double> moe_aux_loss_coef;
  // LLaMA-Factory's use_dft_loss (stage sft): Dynamic Fine-Tuning, each target token's
  // cross-entropy weighted by its (detached) probability.
  bool use_dft_loss = false;
  // LLaMA-Factory's use_eaft_loss (stage sft): each target token's cross-entropy weighted by
  // (entropy of its top-20 softmax / 3) ^ eaft_alpha.
  bool use_eaft_loss = false;
  double eaft_alpha = 1.0;
  // LLaMA-Factory's use_asft_loss (stage sft): the DFT loss plus asft_alpha x KL(reference ||
  // policy) per target token, the reference a frozen copy of the initial model (or ref_model).
  bool use_asft_loss = false;
  double asft_alpha = 0.1;
  // A step whose loss or gradient norm is NaN or infinite: 0 stops the run there (status.json
  // names the step and why; nothing of the step is saved); N > 0 skips such steps (no update)
  // and stops at the (N+1)-th in a row.
  int64_t skip_nonfinite_steps = 0;
  // On a stop request (SIGINT/SIGTERM, the studio's Stop, cancel): every rank ends its step, and
  // with save_on_stop a checkpoint of that step is written before the run ends.
  bool save_on_stop = false;
  bool bf16 = false;                           // bf16 compute, fp32 master weights
  bool fp16 = false;                           // fp16 compute with loss scaling
  bool pure_bf16 = false;                      // bf16 weights and optimizer states
  bool gradient_checkpointing = true;          // recompute each decoder layer in backward
  // Long sequences (docs/LONG_CONTEXT.md): the checkpointed layer inputs in host memory, the
  // MLP over sequence tiles whose intermediate activations fit tiled_mlp_budget_mib (0: as much
  // as one layer's input, the sequence's hidden states).
  bool offload_activations = false;
  bool tiled_mlp = false;
  int64_t tiled_mlp_budget_mib = 0;
  FlashAttn flash_attn = FlashAttn::Auto;      // attention backend
  int64_t ddp_timeout = 1800;                  // seconds before a collective counts as hung
  int64_t seed = 42;
  std::optional<std::string> resume_from_checkpoint;  // checkpoint folder to continue from

  // --- evaluation ---------------------------------------------------------------------------
  int64_t per_device_eval_batch_size = 1;      // HF's default is 8; long sequences want 1
  EvalStrategy eval_strategy = EvalStrategy::No;
  std::optional<int64_t> eval_steps;           // default: logging_steps

  // --- sequence parallelism -----------------------------------------------------------------
  int64_t sequence_parallel_size = 1;          // ranks sharing one sequence; divides world size
  SpMode sequence_parallel_mode = SpMode::ZigzagRing;  // zigzag-ring | ulysses | usp
  int64_t sequence_parallel_ulysses_degree = 1;  // usp: Ulysses ranks inside a ring rank
  int64_t sequence_parallel_ring_degree = 1;     // usp: ring ranks
  bool shuffle_for_sequence_parallel = true;   // shuffle samples before the SP split

  // --- not part of the YAML schema ----------------------------------------------------------
  LlamaFactoryV1Data v1;                       // a v1 file's data and batch keys
  std::vector<ExtraKey> extra_keys;            // unknown keys, kept verbatim
  ConfigSource source;                         // where the keys came from

  bool evaluates() const { return eval_strategy != EvalStrategy::No; }
  // Stage pt's texts concatenated and cut into cutoff_len blocks: LLaMA-Factory packs pre-training
  // data unless the file sets packing (or neat_packing, which implies it).
  bool pt_packs() const {
    return stage == Stage::Pt &&
           (packing || neat_packing || (!source.has("packing") && !source.has("neat_packing")));
  }
  // Stages trained on preference pairs (chosen and rejected): dpo, and rm (a reward model).
  bool pairwise() const { return stage == Stage::Dpo || stage == Stage::Rm; }
  // Whether a run holds a reference model (or its precomputed log-probs): stage dpo except for
  // the reference-free losses orpo and simpo (LLaMA-Factory's use_ref_model), stage kto, and
  // use_asft_loss.
  bool uses_reference() const {
    return (stage == Stage::Dpo && pref_loss != PrefLoss::Orpo && pref_loss != PrefLoss::Simpo) ||
           (stage == Stage::Sft && use_asft_loss) || stage == Stage::Kto;
  }
  bool is_v1() const { return source.form == ConfigForm::LlamaFactoryV1; }
};

// Names of choice values exactly as they are written in YAML.
std::string_view to_string(Stage v);
std::string_view to_string(FinetuningType v);
std::string_view to_string(LrScheduler v);
std::string_view to_string(FlashAttn v);
std::string_view to_string(PrefLoss v);
std::string_view to_string(EvalStrategy v);
std::string_view to_string(SpMode v);
std::string_view to_string(Batching v);

// The chat templates the engine renders, by their LLaMA-Factory names.
const std::vector<std::string>& known_templates();

// How long whoever stops a run (studio-train's launcher, the studio's Stop, remote cancel) waits
// after SIGTERM before SIGKILL: `base`, plus ddp_timeout with save_on_stop, the bound on the
// collectives around that last checkpoint's write (every rank waits for it within ddp_timeout).
double stop_grace_seconds(const RunConfig& c, double base);

// report_to as a list of names, as Hugging Face reads it: a name, a list of names, "all" or
// "none" (empty). Names as written, lowercased; a value that is neither gives `error`.
std::vector<std::string> report_to_targets(const RunConfig& c, std::string* error = nullptr);
// TensorBoard event files too: report_to names tensorboard, or all.
bool reports_to_tensorboard(const RunConfig& c);

struct ModelInfo;
// The coefficient of the MoE auxiliary loss a run trains with: moe_aux_loss_coef when > 0, else
// config.json's router_aux_loss_coef when its output_router_logits is true, else 0 (off; also
// for dense models, and for stage dpo, whose LLaMA-Factory trainer adds none).
double moe_aux_coefficient(const RunConfig& c, const ModelInfo& m);

}  // namespace studio
