// LLaMA-Factory v1's keys (src/llamafactory/v1/config/*_args.py): read onto the run config and
// written back in their own spelling. What depends on files and the world is in
// llamafactory_v1_resolve.cpp.
#include "studio/config/llamafactory_v1.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <set>

#include "checker.h"
#include "enum_names.h"
#include "studio/config/config_dialect.h"
#include "studio/config/config_schema.h"
#include "yaml_entries.h"
#include "yaml_load.h"

namespace studio {
namespace {

// One v1 key: the field of the key table it sets (none for the keys kept as written) and, for
// docs/config.md, what studio-train makes of it.
struct V1Key {
  std::string_view key;
  std::string_view field;
  std::string_view becomes;
};

// In the order of v1's argument dataclasses (model, data, training, sample).
const std::vector<V1Key>& v1_keys() {
  static const std::vector<V1Key> keys = {
      {"model", "model_name_or_path",
       "a model folder, or a hub id found in the local Hugging Face cache (nothing is "
       "downloaded); absent: v1's default Qwen/Qwen3-4B-Instruct-2507"},
      {"custom_chat_template", "",
       "refused: studio-train renders named templates, not Jinja; give `template:` instead"},
      {"trust_remote_code", "trust_remote_code", "no effect: no code shipped with a model is run"},
      {"flash_attn", "flash_attn",
       "eager -> disabled, sdpa (v1's default) -> sdpa, flash_attention_2 -> fa2"},
      {"model_class", "", "llm; cls and other are refused"},
      {"init_config", "", "how LLaMA-Factory materialises the weights: no effect"},
      {"peft_config", "",
       "lora -> finetuning_type lora (r -> lora_rank, target_modules -> lora_target, "
       "modules_to_save -> additional_target, the other options by their names; absent: v1's "
       "lora_alpha 16 and lora_dropout 0.05); freeze -> finetuning_type freeze; null -> full; "
       "other names and unknown options are refused"},
      {"kernel_config", "", "no effect: studio-train runs its own fused kernels (a warning)"},
      {"quant_config", "", "refused unless null: not read yet; give quantization_bit: 4 instead"},
      {"train_dataset", "",
       "the dataset YAML (or a data file or folder) read in place of dataset_info.json: local "
       "entries with converter alpaca, sharegpt, pair or v1's messages format"},
      {"eval_dataset", "",
       "read like train_dataset when eval_strategy asks for evaluation (v1 does not evaluate)"},
      {"output_dir", "output_dir", "required (v1 makes outputs/<random hex>)"},
      {"micro_batch_size", "per_device_train_batch_size", ""},
      {"global_batch_size", "",
       "gradient_accumulation_steps = global_batch_size / (world size / cp_size) / "
       "micro_batch_size, which must divide exactly; unset: 1"},
      {"cutoff_len", "cutoff_len",
       "v1 keeps a sample's first cutoff_len tokens and drops one whose answer lies beyond"},
      {"learning_rate", "learning_rate", "v1's default 1.0e-4"},
      {"num_train_epochs", "num_train_epochs", ""},
      {"max_steps", "max_steps", "null (v1's default): the epochs decide"},
      {"max_grad_norm", "max_grad_norm", ""},
      {"bf16", "bf16",
       "bf16 compute, fp32 masters, under dist_config fsdp2 (v1's default true); without "
       "dist_config v1 trains in fp32, and so does studio-train; with deepspeed the JSON's "
       "bf16.enabled decides (auto: bf16)"},
      {"batching_strategy", "",
       "normal; padding_free (the same micro-batches unpadded: the same loss, so studio-train "
       "pads them); dynamic_batching and dynamic_padding_free (micro-batches filled to "
       "micro_batch_size x cutoff_len tokens, padded or packed)"},
      {"batching_workers", "", "no effect: batches are assembled in-process"},
      {"enable_activation_checkpointing", "gradient_checkpointing", ""},
      {"dist_config", "zero_stage",
       "fsdp2 -> ZeRO-3 (reshard_after_forward: false -> ZeRO-2; offload_params -> "
       "offload_param); deepspeed -> deepspeed: config_file; null -> none (DDP); fsdpturbo is "
       "refused"},
      {"dp_size", "", "must equal the world size / cp_size"},
      {"cp_size", "sequence_parallel_size", ""},
      {"cp_mode", "sequence_parallel_mode",
       "ulysses (v1's default and only mode); zigzag-ring and usp are studio-train's own"},
      {"mp_replicate_size", "", "FSDP2's device mesh: no effect (shards span the world)"},
      {"mp_shard_size", "", "FSDP2's device mesh: no effect (shards span the world)"},
      {"dist_timeout", "ddp_timeout", "v1's default 18000"},
      {"optim_config", "",
       "refused unless null: AdamW only; v1's default is torch's AdamW: weight_decay 0.01"},
      {"lr_scheduler_config", "",
       "refused unless null; v1's default is a constant rate without warmup: "
       "lr_scheduler_type constant"},
      {"seed", "seed", ""},
      {"full_determinism", "", "no effect"},
      {"resume_from_checkpoint", "resume_from_checkpoint",
       "a checkpoint folder; auto: the newest in output_dir; unset: v1 starts over "
       "(overwrite_output_dir: true)"},
      {"save_steps", "save_steps", "null (v1's default): only the final model"},
      {"save_epochs", "", "refused: give save_steps"},
      {"save_ckpt_as_hf", "", "no effect"},
      {"save_total_limit", "save_total_limit", ""},
      {"logging_steps", "logging_steps", "v1's default 1"},
      {"pref_loss", "pref_loss", "sigmoid | ipo | hinge | orpo | simpo | kto_pair"},
      {"pref_beta", "pref_beta", ""},
      {"pref_ftx", "pref_ftx", ""},
      {"simpo_gamma", "simpo_gamma", ""},
      {"dpo_label_smoothing", "dpo_label_smoothing", ""},
      {"ld_alpha", "", "refused unless null: LD-DPO is not implemented"},
      {"sample_backend", "", "llamafactory-cli chat's: no effect on training"},
      {"max_new_tokens", "", "llamafactory-cli chat's: no effect on training"},
  };
  return keys;
}

const V1Key* find_v1_key(std::string_view key) {
  for (const auto& k : v1_keys())
    if (k.key == key) return &k;
  return nullptr;
}

// The v1 keys whose value the config holds: written from it and settable with --set. The others
// are kept as the file wrote them.
bool v1_owns(const V1Key& k) {
  return !k.field.empty() || k.key == "train_dataset" || k.key == "eval_dataset" ||
         k.key == "global_batch_size" || k.key == "peft_config";
}

// An option of v1's peft_config block (plugins/model_plugins/peft.py) and the field of the key
// table it sets: v0's keys, under v1's names.
struct PeftOption {
  std::string_view plugin;  // lora | freeze
  std::string_view option;  // as v1 spells it inside the block
  std::string_view field;
};

constexpr PeftOption kPeftOptions[] = {
    {"lora", "r", "lora_rank"},
    {"lora", "lora_alpha", "lora_alpha"},
    {"lora", "lora_dropout", "lora_dropout"},
    {"lora", "target_modules", "lora_target"},
    {"lora", "use_rslora", "use_rslora"},
    {"lora", "use_dora", "use_dora"},
    {"lora", "modules_to_save", "additional_target"},
    {"lora", "adapter_name_or_path", "adapter_name_or_path"},
    {"freeze", "freeze_trainable_layers", "freeze_trainable_layers"},
    {"freeze", "freeze_trainable_modules", "freeze_trainable_modules"},
    {"freeze", "freeze_extra_modules", "freeze_extra_modules"},
};

// v1's options of llamafactory-cli export, read from the same lora block: nothing in training.
constexpr std::string_view kLoraExportOptions[] = {
    "export_dir", "export_size", "export_hub_model_id", "infer_dtype", "export_legacy_format"};

const PeftOption* find_peft_option(std::string_view plugin, std::string_view option) {
  for (const auto& o : kPeftOptions)
    if (o.plugin == plugin && o.option == option) return &o;
  return nullptr;
}

const PeftOption* peft_option_of_field(std::string_view field) {
  for (const auto& o : kPeftOptions)
    if (o.field == field) return &o;
  return nullptr;
}

// Every field peft_config sets back to the key table's default (full-parameter training), and
// where a block placed it forgotten: a block is read onto all of them at once.
void reset_adapter_fields(RunConfig& c) {
  static const RunConfig defaults;
  auto reset = [&](std::string_view field) {
    const FieldSpec* f = find_field(field);
    f->parse(f->to_node(defaults), c);
    const std::string key(field);
    c.source.key_pos.erase(key), c.source.value_pos.erase(key), c.source.spelled.erase(key);
  };
  reset("finetuning_type");
  for (const auto& o : kPeftOptions) reset(o.field);
}

// The v1 key that sets a field of the key table ("" when none does).
std::string_view v1_spelling(std::string_view field) {
  for (const auto& k : v1_keys())
    if (k.field == field && k.key != "dist_config") return k.key;
  return {};
}

// Fields a v1 file sets through keys of its own: written under the key table's name they would
// say the same thing twice.
const std::set<std::string_view>& fields_v1_spells_otherwise() {
  static const std::set<std::string_view> fields = [] {
    std::set<std::string_view> s = {"dataset", "dataset_dir", "eval_dataset",
                                    "gradient_accumulation_steps", "deepspeed"};
    for (const auto& k : v1_keys())
      if (!k.field.empty() && k.field != k.key && k.key != "dist_config") s.insert(k.field);
    s.insert("finetuning_type");  // peft_config's name, and its options below
    for (const auto& o : kPeftOptions) s.insert(o.field);
    return s;
  }();
  return fields;
}

// Keys that only a DPO run reads: a v1 file having one asks for `llamafactory-cli dpo`.
constexpr std::string_view kDpoKeys[] = {"pref_loss",   "pref_beta",           "pref_ftx",
                                         "simpo_gamma", "dpo_label_smoothing", "ld_alpha"};

// The stage a v1 file's own keys ask for: dpo when it sets what only DPO reads.
Stage stage_of_keys(const std::map<std::string, int>& keys) {
  for (std::string_view key : kDpoKeys)
    if (keys.count(std::string(key))) return Stage::Dpo;
  return Stage::Sft;
}

bool is_null(const YAML::Node& n) {
  if (n.IsNull()) return true;
  if (!n.IsScalar() || n.Tag() == "!") return false;
  const std::string& s = n.Scalar();
  return s == "null" || s == "~" || s == "None";
}

// A *_config block as LLaMA-Factory's get_plugin_config takes it: a mapping, or a JSON string.
YAML::Node plugin_block(const YAML::Node& v) {
  if (v.IsScalar() && !v.Scalar().empty() && v.Scalar().front() == '{') {
    try {
      return detail::load_yaml(v.Scalar());
    } catch (const YAML::Exception&) {
    }
  }
  return v;
}

std::string scalar_or(const YAML::Node& n, const std::string& fallback = {}) {
  return n && n.IsScalar() ? n.Scalar() : fallback;
}

const RunConfig& v1_defaults() {
  static const RunConfig d = [] {
    RunConfig c;
    c.source.form = ConfigForm::LlamaFactoryV1;
    c.model_name_or_path = "Qwen/Qwen3-4B-Instruct-2507";
    c.flash_attn = FlashAttn::Sdpa;
    c.learning_rate = 1e-4;
    c.bf16 = true;
    c.lr_scheduler_type = LrScheduler::Constant;  // v1: LambdaLR(lambda _: 1.0), no warmup
    c.weight_decay = 0.01;                        // torch.optim.AdamW's default
    c.logging_steps = 1;
    c.save_steps = kSaveAtEndOnly;
    c.ddp_timeout = 18000;
    c.sequence_parallel_mode = SpMode::Ulysses;
    c.overwrite_output_dir = true;  // v1 neither refuses a used folder nor resumes by itself
    return c;
  }();
  return d;
}

// Mixed precision in v1 comes from FSDP2's policy or the DeepSpeed JSON; without either the
// model trains in fp32 whatever bf16 says.
bool v1_mixed_precision(const RunConfig& c) {
  return c.deepspeed.has_value() || (c.zero_stage && *c.zero_stage >= 2);
}

bool resumes_auto(const RunConfig& c) {
  for (const auto& w : c.v1.written)
    if (w.key == "resume_from_checkpoint") return w.text == "auto";
  return false;
}

// The defaults a written v1 file leaves out: v1's, with what the file's own keys imply (bf16
// from the distribution, the stage from DPO keys, no overwrite with resume_from_checkpoint auto).
RunConfig v1_defaults_for(const RunConfig& c) {
  RunConfig d = v1_defaults();
  d.bf16 = v1_mixed_precision(c);
  d.overwrite_output_dir = !resumes_auto(c);
  std::map<std::string, int> keys;
  for (const auto& w : c.v1.written) keys[w.key] = w.line;
  d.stage = stage_of_keys(keys);
  return d;
}

// dist_config as the ZeRO settings and DeepSpeed JSON say it.
YAML::Node dist_config_of(const RunConfig& c) {
  YAML::Node n(YAML::NodeType::Map);
  if (c.deepspeed) {
    n["name"] = "deepspeed";
    n["config_file"] = *c.deepspeed;
  } else if (c.zero_stage && *c.zero_stage >= 2) {
    n["name"] = "fsdp2";
    if (*c.zero_stage == 2) n["reshard_after_forward"] = "false";
    if (c.offload_param) n["offload_params"] = "true";
  } else {
    return YAML::Node(YAML::NodeType::Null);
  }
  return n;
}

// peft_config as the adapter fields say it: every option v1 would otherwise default
// differently from the key table (lora_alpha, lora_dropout), the rest where set.
YAML::Node peft_config_of(const RunConfig& c) {
  if (c.finetuning_type == FinetuningType::Full) return YAML::Node(YAML::NodeType::Null);
  auto field = [&](std::string_view key) { return find_field(key)->to_node(c); };
  // A name as v1 reads it (not split at commas), several as a list.
  auto names = [](const std::vector<std::string>& v) {
    if (v.size() == 1) return YAML::Node(v.front());
    YAML::Node list(YAML::NodeType::Sequence);
    for (const auto& name : v) list.push_back(name);
    list.SetStyle(YAML::EmitterStyle::Flow);
    return list;
  };
  YAML::Node n(YAML::NodeType::Map);
  if (c.finetuning_type == FinetuningType::Freeze) {
    n["name"] = "freeze";
    n["freeze_trainable_layers"] = field("freeze_trainable_layers");
    n["freeze_trainable_modules"] = field("freeze_trainable_modules");
    if (!c.freeze_extra_modules.empty()) n["freeze_extra_modules"] = field("freeze_extra_modules");
    return n;
  }
  n["name"] = "lora";
  n["r"] = field("lora_rank");
  // Without lora_alpha the key table means 2 x r; v1 would take 16.
  const double alpha = c.lora_alpha.value_or(2.0 * static_cast<double>(c.lora_rank));
  n["lora_alpha"] = alpha == std::floor(alpha) && std::abs(alpha) < 1e15
                        ? YAML::Node(std::to_string(static_cast<int64_t>(alpha)))
                        : field("lora_alpha");
  n["lora_dropout"] = field("lora_dropout");
  n["target_modules"] = names(c.lora_target);
  if (c.use_rslora) n["use_rslora"] = "true";
  if (c.use_dora) n["use_dora"] = "true";
  if (!c.additional_target.empty()) n["modules_to_save"] = names(c.additional_target);
  if (!c.adapter_name_or_path.empty()) n["adapter_name_or_path"] = names(c.adapter_name_or_path);
  return n;
}

// The value a v1 key writes, translated back to v1's values.
YAML::Node v1_value(const RunConfig& c, const V1Key& k) {
  const auto& d = c.v1;
  if (k.key == "train_dataset") return YAML::Node(d.train_dataset);
  if (k.key == "eval_dataset")
    return d.eval_dataset ? YAML::Node(*d.eval_dataset) : YAML::Node(YAML::NodeType::Null);
  if (k.key == "global_batch_size")
    return d.global_batch_size ? YAML::Node(std::to_string(*d.global_batch_size))
                               : YAML::Node(YAML::NodeType::Null);
  if (k.key == "dist_config") return dist_config_of(c);
  if (k.key == "peft_config") return peft_config_of(c);
  if (k.key == "max_steps" && c.max_steps <= 0) return YAML::Node(YAML::NodeType::Null);
  if (k.key == "save_steps" && c.save_steps == kSaveAtEndOnly)
    return YAML::Node(YAML::NodeType::Null);
  if (k.key == "flash_attn") {
    switch (c.flash_attn) {
      case FlashAttn::Disabled:
        return YAML::Node("eager");
      case FlashAttn::Fa2:
        return YAML::Node("flash_attention_2");
      case FlashAttn::Auto:  // the same kernels as sdpa here; v1 knows no "auto"
      case FlashAttn::Sdpa:
        return YAML::Node("sdpa");
    }
  }
  return find_field(k.field)->to_node(c);
}

std::string written_text(const RunConfig& c, const std::string& key);

// Reads one v1 file into a config: keys of v1 onto their fields, studio-train's own keys as
// extensions, everything else kept as written, each problem located at its key.
class V1Reader {
 public:
  explicit V1Reader(LoadResult& res) : res_(res), cfg_(res.config), file_(res.config.source.file) {}

  void read(const YAML::Node& k, const YAML::Node& v) {
    const SourcePos kp = yaml_pos(k);
    if (!k.IsScalar()) return problem(Severity::Error, kp, "", "a key must be a plain name");
    const std::string key = k.Scalar();
    if (auto it = seen_.find(key); it != seen_.end())
      return problem(
          Severity::Error, kp, key,
          "duplicate key (first given at line " + std::to_string(it->second) + "): keep one");
    seen_[key] = kp.line;
    const SourcePos vp = v.IsNull() ? kp : yaml_pos(v);
    written_.push_back({key, yaml_text(v), "", kp.line});
    if (const V1Key* spec = find_v1_key(key)) {
      if (!spec->field.empty() && key != "dist_config") return read_field(*spec, key, v, kp, vp);
      place(key, key, kp, vp);
      return read_v1_only(key, v, kp, vp);
    }
    if (const FieldSpec* f = find_field(key)) return read_extension(*f, key, v, kp, vp);
    keep(key, v, kp);
    std::string msg =
        "not a LLaMA-Factory v1 key (it refuses it unless ALLOW_EXTRA_KEYS=1) nor a "
        "studio-train one; kept as written when the config is saved";
    if (std::string near = nearest(key); !near.empty()) msg += " (did you mean '" + near + "'?)";
    problem(Severity::Warning, kp, key, msg);
  }

  void finish() {
    if (!cfg_.source.has("stage") && stage_of_keys(seen_) == Stage::Dpo) {
      cfg_.stage = Stage::Dpo;
      for (std::string_view key : kDpoKeys)
        if (auto it = cfg_.source.value_pos.find(std::string(key));
            it != cfg_.source.value_pos.end()) {
          problem(Severity::Note, it->second, it->first,
                  "stage dpo, as the DPO keys ask (LLaMA-Factory v1 takes the stage from its "
                  "command, llamafactory-cli dpo); write `stage: dpo` to say so in the file");
          break;
        }
    }
    // Without FSDP2 or DeepSpeed, v1 trains its fp32 copy of the model whatever bf16 says.
    if (!v1_mixed_precision(cfg_)) {
      if (cfg_.bf16 && seen_.count("bf16"))
        problem(Severity::Warning, cfg_.source.value_pos["bf16"], "bf16",
                "no effect without dist_config: LLaMA-Factory v1 applies bf16 through FSDP2 (or "
                "a DeepSpeed JSON) and otherwise trains in fp32, as studio-train does here; add "
                "dist_config: {name: fsdp2} for bf16");
      cfg_.bf16 = false;
    }
    if (!seen_.count("train_dataset"))
      problem(Severity::Error, {1, 1}, "train_dataset",
              "required: a dataset YAML (name: {path, source, converter}), a data file or folder");
    for (auto& w : written_) w.loaded = written_text(cfg_, w.key);
    cfg_.v1.written = std::move(written_);
  }

 private:
  void problem(Severity sev, SourcePos p, std::string key, std::string msg,
               std::string allowed = {}) {
    res_.diagnostics.push_back(
        {sev, file_, p.line, p.column, std::move(key), std::move(msg), std::move(allowed)});
  }
  // Positions are kept under the key table's name, with the file's spelling beside it.
  void place(const std::string& field, const std::string& key, SourcePos kp, SourcePos vp) {
    cfg_.source.key_pos[field] = kp;
    cfg_.source.value_pos[field] = vp;
    if (field != key) cfg_.source.spelled[field] = key;
  }
  void keep(const std::string& key, const YAML::Node& v, SourcePos kp) {
    cfg_.extra_keys.push_back({key, RawYaml{yaml_text(v)}, kp.line});
  }

  void read_field(const V1Key& spec, const std::string& key, const YAML::Node& v, SourcePos kp,
                  SourcePos vp) {
    const std::string field(spec.field);
    place(field, key, kp, vp);
    const FieldSpec* f = find_field(field);
    YAML::Node value = v;
    std::string allowed = f->allowed;
    if (key == "flash_attn") {
      allowed = "eager | sdpa | flash_attention_2";
      const std::string s = scalar_or(v);
      if (s == "eager") value = YAML::Node("disabled");
      if (s == "flash_attention_2") value = YAML::Node("fa2");
    }
    if (is_null(v)) {
      if (key == "max_steps") return void(cfg_.max_steps = -1);
      if (key == "save_steps") return void(cfg_.save_steps = kSaveAtEndOnly);
    }
    if (key == "resume_from_checkpoint" && scalar_or(v) == "auto") {
      // v1 finds the newest checkpoint of output_dir: studio-train's rule when none is named.
      cfg_.resume_from_checkpoint.reset();
      cfg_.overwrite_output_dir = false;
      return;
    }
    if (std::string err = f->parse(value, cfg_); !err.empty())
      problem(Severity::Error, vp, key, err, allowed);
    else if (f->support == KeySupport::NoEffect)
      problem(Severity::Warning, kp, key,
              "accepted for compatibility, no effect: " + std::string(f->help));
  }

  // studio-train's own keys in a v1 file: LLaMA-Factory would refuse them (ALLOW_EXTRA_KEYS=1
  // lets them through); here they mean what they mean in any run config.
  void read_extension(const FieldSpec& f, const std::string& key, const YAML::Node& v, SourcePos kp,
                      SourcePos vp) {
    if (fields_v1_spells_otherwise().count(f.key)) {
      std::string_view v1 = v1_spelling(f.key);
      std::string msg = "a LLaMA-Factory v1 file says this with ";
      if (key == "dataset" || key == "dataset_dir")
        msg += "train_dataset (a dataset YAML)";
      else if (key == "gradient_accumulation_steps")
        msg += "global_batch_size";
      else if (key == "deepspeed")
        msg += "dist_config: {name: deepspeed, config_file: ...}";
      else if (key == "finetuning_type")
        msg += "peft_config: {name: lora} or {name: freeze} (none: full)";
      else if (const PeftOption* o = peft_option_of_field(key))
        msg += "peft_config: {name: " + std::string(o->plugin) + ", " + std::string(o->option) +
               ": ...}";
      else
        msg += "`" + std::string(v1) + "`";
      return problem(Severity::Error, kp, key, msg);
    }
    const bool zero_key =
        key == "zero_stage" || key == "offload_param" || key == "offload_optimizer";
    if (zero_key && seen_.count("dist_config"))
      return problem(Severity::Error, kp, key,
                     "dist_config" + line_of("dist_config") +
                         " already says how the model is "
                         "sharded: keep one of them");
    place(key, key, kp, vp);
    if (std::string err = f.parse(v, cfg_); !err.empty())
      problem(Severity::Error, vp, key, err, f.allowed);
    else if (f.support == KeySupport::NoEffect)
      problem(Severity::Warning, kp, key,
              "accepted for compatibility, no effect: " + std::string(f.help));
  }

  std::string line_of(const std::string& key) const {
    auto it = seen_.find(key);
    return it == seen_.end() ? "" : " (line " + std::to_string(it->second) + ")";
  }

  // The keys of v1 with no field of their own.
  void read_v1_only(const std::string& key, const YAML::Node& v, SourcePos kp, SourcePos vp) {
    auto error = [&](const std::string& msg, std::string allowed = {}) {
      problem(Severity::Error, vp, key, msg, std::move(allowed));
    };
    auto warn = [&](const std::string& msg) { problem(Severity::Warning, vp, key, msg); };
    if (key == "train_dataset" || key == "eval_dataset") {
      if (is_null(v)) return;
      if (!v.IsScalar()) return error("expected a path or a dataset id");
      (key == "train_dataset" ? cfg_.v1.train_dataset : cfg_.v1.eval_dataset.emplace()) =
          v.Scalar();
      return;
    }
    if (key == "global_batch_size") {
      if (is_null(v)) return;
      int64_t n = 0;
      if (std::string err = yaml_whole(v, n); !err.empty()) return error(err, ">= 1");
      if (n < 1) return error("expected a whole number of sequences, >= 1");
      cfg_.v1.global_batch_size = n;
      return;
    }
    if (key == "dist_config") return read_dist_config(v, vp);
    if (key == "peft_config") return read_peft_config(v, kp, vp);
    keep(key, v, kp);
    if (is_null(v) && key != "model_class" && key != "batching_strategy") return;
    const std::string value = scalar_or(v);
    if (key == "model_class") {
      if (value != "llm" && !is_null(v))
        error("'" + value + "': studio-train trains causal language models only", "llm");
    } else if (key == "custom_chat_template") {
      error(
          "studio-train renders named chat templates, not Jinja: remove custom_chat_template "
          "and give `template:` the named template that renders like it (docs/templates.md)");
    } else if (key == "quant_config" || key == "kernel_config" || key == "init_config" ||
               key == "optim_config" || key == "lr_scheduler_config") {
      read_plugin(key, plugin_block(v), vp);
    } else if (key == "batching_strategy") {
      const std::string name = is_null(v) ? "normal" : value;
      bool known = false;
      for (Batching b : {Batching::Normal, Batching::PaddingFree, Batching::Dynamic,
                         Batching::DynamicPaddingFree})
        if (to_string(b) == name) cfg_.batching_strategy = b, known = true;
      if (!known)
        error("'" + value + "' is not a batching strategy",
              "normal | padding_free | dynamic_batching | dynamic_padding_free");
      else if (cfg_.batching_strategy == Batching::PaddingFree)
        problem(Severity::Note, vp, key,
                "studio-train pads each micro-batch of micro_batch_size samples instead of "
                "packing it: the same samples per micro-step and the same loss");
    } else if (key == "save_epochs") {
      error("checkpoints every N epochs are not implemented: give save_steps instead");
    } else if (key == "ld_alpha") {
      error("LD-DPO (length-desensitised log-probs) is not implemented: remove ld_alpha");
    } else if (key == "sample_backend" || key == "max_new_tokens") {
      warn("llamafactory-cli chat's setting: no effect on training");
    } else if (key == "dp_size") {
      int64_t n = 0;
      if (std::string err = yaml_whole(v, n); !err.empty())
        error(err, ">= 1");
      else if (n < 1)
        error("expected a whole number of data-parallel ranks");
    } else if (key == "mp_replicate_size" || key == "mp_shard_size") {
      warn("FSDP2's device-mesh layout: no effect (studio-train shards over every rank)");
    } else if (key == "batching_workers" || key == "full_determinism" || key == "save_ckpt_as_hf") {
      warn("accepted for compatibility, no effect");
    }
  }

  // LLaMA-Factory v1 plugin blocks: {name: ..., options}.
  void read_plugin(const std::string& key, const YAML::Node& block, SourcePos vp) {
    const bool named = block.IsMap() && block["name"] && block["name"].IsScalar();
    if (key == "quant_config")
      return problem(Severity::Error, named ? yaml_pos(block["name"]) : vp, key,
                     "QLoRA from a v1 quant_config block is not read yet: remove quant_config and "
                     "give studio-train's quantization_bit: 4 (nf4, double quantization: v1's "
                     "bnb defaults) beside peft_config lora");

    if (!named)
      return problem(Severity::Error, vp, key,
                     "needs a `name` (LLaMA-Factory v1 requires one in every *_config block)");
    const std::string name = block["name"].Scalar();
    const SourcePos np = yaml_pos(block["name"]);
    if (key == "optim_config")
      return problem(Severity::Error, np, key,
                     refused_extra_key("optim", YAML::Node(name)) + ": remove optim_config");
    if (key == "lr_scheduler_config")
      return problem(Severity::Error, np, key,
                     "LLaMA-Factory v1 registers no learning-rate scheduler ('" + name +
                         "'); for a schedule remove lr_scheduler_config and give "
                         "lr_scheduler_type (studio-train's own key)");
    if (key == "kernel_config")
      return problem(Severity::Warning, np, key,
                     "'" + name +
                         "': studio-train runs its own kernels (fused RMSNorm, "
                         "attention, loss): no effect");
    if (key == "init_config" && name != "init_on_default")
      problem(Severity::Warning, np, key,
              "'" + name +
                  "': how LLaMA-Factory materialises the weights before sharding: no "
                  "effect (studio-train loads a layer at a time at ZeRO-3)");
  }

  // peft_config: lora and freeze onto the adapter fields, v1's defaults where the block is
  // silent. Each option is placed where the block writes it and spelled peft_config.OPTION, so
  // that what validate says about lora_rank lands at `r`; an option left out is placed at the
  // block's name.
  void read_peft_config(const YAML::Node& raw, SourcePos kp, SourcePos vp) {
    reset_adapter_fields(cfg_);
    if (is_null(raw)) return;
    const YAML::Node block = plugin_block(raw);
    // A block given as JSON text has positions of its own text: use the value's.
    auto pos = [&](const YAML::Node& n) { return raw.IsMap() ? yaml_pos(n) : vp; };
    if (!block.IsMap() || !block["name"] || !block["name"].IsScalar())
      return problem(Severity::Error, vp, "peft_config",
                     "needs a `name` (LLaMA-Factory v1 requires one in every *_config block)",
                     "lora | freeze");
    const std::string name = block["name"].Scalar();
    const SourcePos np = pos(block["name"]);
    if (name != "lora" && name != "freeze") {
      const auto& refused = detail::EnumInfo<FinetuningType>::refused();
      RunConfig scratch;  // a refused finetuning_type (oft) is refused in its words
      const std::string why =
          std::find(refused.begin(), refused.end(), name) != refused.end()
              ? find_field("finetuning_type")->parse(YAML::Node(name), scratch)
              : "'" + name + "' is not a PEFT plugin of LLaMA-Factory v1" +
                    (name == "full" ? ": for full-parameter training leave peft_config out" : "");
      return problem(Severity::Error, np, "peft_config", why, "lora | freeze");
    }
    cfg_.finetuning_type = name == "lora" ? FinetuningType::Lora : FinetuningType::Freeze;
    place("finetuning_type", "peft_config", kp, np);
    if (name == "lora") {  // v1's defaults, not the key table's (2 x r, 0)
      cfg_.lora_alpha = 16;
      cfg_.lora_dropout = 0.05;
    }
    std::vector<std::string_view> options;
    for (const auto& o : kPeftOptions) {
      if (o.plugin != name) continue;
      options.push_back(o.option);
      cfg_.source.value_pos[std::string(o.field)] = np;
      cfg_.source.spelled[std::string(o.field)] = "peft_config." + std::string(o.option);
    }
    for (const auto& kv : block) {
      const std::string option = scalar_or(kv.first);
      if (option == "name") continue;
      const std::string spelled = "peft_config." + option;
      const SourcePos op = pos(kv.first);
      const SourcePos ovp = is_null(kv.second) ? op : pos(kv.second);
      if (const PeftOption* o = find_peft_option(name, option)) {
        place(std::string(o->field), spelled, op, ovp);
        if (std::string err = read_peft_option(o->field, kv.second); !err.empty())
          problem(Severity::Error, ovp, spelled, err, find_field(o->field)->allowed);
        continue;
      }
      const bool export_option =
          name == "lora" && std::find(std::begin(kLoraExportOptions), std::end(kLoraExportOptions),
                                      option) != std::end(kLoraExportOptions);
      if (export_option) {
        problem(Severity::Warning, op, spelled,
                "llamafactory-cli export's option: no effect on training");
        continue;
      }
      if (name == "freeze" && option == "cast_trainable_params_to_fp32") {
        bool cast = true;
        if (!is_null(kv.second) && yaml_bool(kv.second, cast) && !cast)
          problem(Severity::Warning, ovp, spelled,
                  "no effect: studio-train keeps fp32 master copies of the trained weights");
        continue;
      }
      // LLaMA-Factory 0.9.5 passes over an option it does not know; later versions refuse it.
      // A misspelt r would train at the default rank, so it is refused here.
      std::string msg = "not an option of peft_config " + name;
      const PeftOption* v0 = peft_option_of_field(option);
      std::string near =
          v0 && v0->plugin == name ? std::string(v0->option) : suggest_key(option, options);
      if (!near.empty()) msg += " (did you mean '" + near + "'?)";
      std::string allowed;
      for (auto o : options) allowed += (allowed.empty() ? "" : " | ") + std::string(o);
      problem(Severity::Error, op, spelled, msg, allowed);
    }
  }

  // One option of a peft_config block onto its field: "" or what is wrong with the value, the
  // field then keeping v1's default.
  std::string read_peft_option(std::string_view field, const YAML::Node& v) {
    const std::string text = scalar_or(v);
    // target_modules, modules_to_save, adapter_name_or_path: one name (v1 does not split it at
    // commas; PEFT matches it whole) or a list of names.
    auto names = [&](std::vector<std::string>& out, bool nullable) -> std::string {
      if (is_null(v)) {
        if (!nullable) return "needs a value: all, a module name or a list of them";
        return out.clear(), "";
      }
      std::vector<std::string> read;
      if (v.IsScalar()) {
        read.push_back(text);
      } else if (v.IsSequence()) {
        for (const auto& item : v) {
          if (!item.IsScalar())
            return "expected a list of names, got a list holding " + detail::yaml_kind(item);
          read.push_back(item.Scalar());
        }
      } else {
        return "expected a name or a list of names, got " + detail::yaml_kind(v);
      }
      if (std::count(read.begin(), read.end(), std::string())) return "an empty name";
      if (read.empty() && !nullable) return "expected at least one name, got an empty list";
      return out = std::move(read), "";
    };
    if (field == "lora_target") return names(cfg_.lora_target, false);
    if (field == "additional_target") return names(cfg_.additional_target, true);
    if (field == "adapter_name_or_path") {
      std::vector<std::string> paths;
      if (std::string err = names(paths, true); !err.empty()) return err;
      if (paths.size() > 1)  // v1's load_adapter, in training
        return "LLaMA-Factory v1 trains a single adapter further and refuses several: merge "
               "the others into the base model first";
      return cfg_.adapter_name_or_path = std::move(paths), "";
    }
    if ((field == "use_rslora" || field == "use_dora") && is_null(v)) return "";  // falsy in v1
    if (is_null(v) && field != "freeze_extra_modules") return "needs a value";
    RunConfig tried;  // the value is read here first, so that a refused one sets nothing
    if (std::string err = find_field(field)->parse(v, tried); !err.empty()) return err;
    if (field == "lora_rank" && tried.lora_rank < 1)
      return "expected a rank of at least 1, got " + text;
    if (field == "lora_alpha" && !(*tried.lora_alpha > 0))
      return "expected a positive number, got " + text;
    if (field == "lora_dropout" && !(tried.lora_dropout >= 0 && tried.lora_dropout < 1))
      return "expected a probability in [0, 1), got " + text;
    return find_field(field)->parse(v, cfg_);
  }

  void read_dist_config(const YAML::Node& raw, SourcePos vp) {
    if (is_null(raw)) return;
    const YAML::Node block = plugin_block(raw);
    if (!block.IsMap() || !block["name"] || !block["name"].IsScalar())
      return problem(Severity::Error, vp, "dist_config",
                     "needs a `name` (LLaMA-Factory v1 requires one in every *_config block)",
                     "fsdp2 | deepspeed");
    const std::string name = block["name"].Scalar();
    const SourcePos np = yaml_pos(block["name"]);
    auto flag = [&](const char* option, bool fallback) {
      bool b = fallback;
      const YAML::Node n = block[option];
      if (n && !is_null(n) && !yaml_bool(n, b))
        problem(Severity::Error, yaml_pos(n), "dist_config",
                std::string(option) + ": expected true or false");
      return b;
    };
    std::set<std::string> known;
    if (name == "fsdp2") {
      known = {"name", "reshard_after_forward", "offload_params", "pin_memory", "dcp_path"};
      const bool reshard = flag("reshard_after_forward", true);
      const bool offload = flag("offload_params", false);
      cfg_.zero_stage = reshard || offload ? 3 : 2;
      cfg_.offload_param = offload;
      if (offload) place("offload_param", "dist_config", cfg_.source.key_pos["dist_config"], vp);
      if (offload && !reshard)
        problem(Severity::Note, yaml_pos(block["reshard_after_forward"]), "dist_config",
                "offload_params keeps the weight shards in CPU memory: ZeRO-3 with offload_param, "
                "which gathers each layer again for the backward");
      if (!flag("pin_memory", true))
        problem(Severity::Warning, yaml_pos(block["pin_memory"]), "dist_config",
                "pin_memory: false has no effect: studio-train pins the host copies");
      if (block["dcp_path"] && !is_null(block["dcp_path"]))
        problem(Severity::Error, yaml_pos(block["dcp_path"]), "dist_config",
                "dcp_path: weights from a torch.distributed.checkpoint folder are not read; point "
                "`model` at a Hugging Face model folder (safetensors)");
    } else if (name == "deepspeed") {
      known = {"name", "config_file"};
      if (!block["config_file"] || !block["config_file"].IsScalar() ||
          is_null(block["config_file"]))
        return problem(Severity::Error, np, "dist_config",
                       "deepspeed needs config_file: the DeepSpeed JSON");
      cfg_.deepspeed = block["config_file"].Scalar();
      // validate locates the JSON's problems at the deepspeed key: here, dist_config.
      place("deepspeed", "dist_config", cfg_.source.key_pos["dist_config"],
            yaml_pos(block["config_file"]));
    } else if (name == "fsdpturbo") {
      return problem(Severity::Error, np, "dist_config",
                     "fsdpturbo (expert parallelism for MoE models) is not implemented; use fsdp2",
                     "fsdp2 | deepspeed");
    } else {
      return problem(Severity::Error, np, "dist_config", "'" + name + "' is not a backend",
                     "fsdp2 | deepspeed");
    }
    place("zero_stage", "dist_config", cfg_.source.key_pos["dist_config"], vp);
    for (const auto& kv : block)
      if (!known.count(kv.first.Scalar()))
        problem(Severity::Warning, yaml_pos(kv.first), "dist_config",
                "'" + kv.first.Scalar() + "' is not a " + name +
                    " option studio-train reads; "
                    "not used");
  }

  // The nearest v1 key to a misspelt one, else the nearest key of the table.
  static std::string nearest(const std::string& key) {
    std::vector<std::string_view> keys;
    for (const auto& k : v1_keys()) keys.push_back(k.key);
    std::string near = suggest_key(key, keys);
    return near.empty() ? suggest_key(key) : near;
  }

  LoadResult& res_;
  RunConfig& cfg_;
  std::string file_;
  std::map<std::string, int> seen_;
  std::vector<LlamaFactoryV1Data::Written> written_;
};

// The text a key of a v1 file writes as now: a v1 key in v1's values, studio-train's own keys
// by the key table, kept keys as kept.
std::string written_text(const RunConfig& c, const std::string& key) {
  if (const V1Key* spec = find_v1_key(key); spec && v1_owns(*spec))
    return yaml_text(v1_value(c, *spec));
  if (const FieldSpec* f = find_field(key)) return yaml_text(f->to_node(c));
  for (const auto& x : c.extra_keys)
    if (x.key == key) return x.value.text;
  return {};
}

}  // namespace

bool is_llamafactory_v1(const YAML::Node& root) {
  if (!root.IsMap() || root["model_name_or_path"]) return false;
  for (const auto& kv : root) {
    if (!kv.first.IsScalar()) continue;
    const std::string& k = kv.first.Scalar();
    if (k == "model" || k == "train_dataset" || k == "micro_batch_size" ||
        k == "global_batch_size" || k == "cp_size" ||
        (k.size() > 7 && k.compare(k.size() - 7, 7, "_config") == 0))
      return true;
  }
  return false;
}

void read_llamafactory_v1(const YAML::Node& root, LoadResult& res) {
  const std::string file = res.config.source.file;
  res.config = v1_defaults();
  res.config.source.file = file;
  V1Reader reader(res);
  for (const auto& kv : root) reader.read(kv.first, kv.second);
  reader.finish();
}

bool apply_llamafactory_v1_override(RunConfig& cfg, const std::string& key, const YAML::Node& value,
                                    const std::string& where, std::vector<Diagnostic>& diags) {
  const V1Key* spec = find_v1_key(key);
  if (!spec || !v1_owns(*spec)) return false;
  LoadResult res;
  res.config = cfg;
  V1Reader reader(res);
  reader.read(YAML::Node(key), value);
  for (Diagnostic d : res.diagnostics) {
    d.file = where, d.line = 0, d.column = 0, d.in_file = false;
    diags.push_back(std::move(d));
  }
  if (has_errors(res.diagnostics)) return true;
  cfg = std::move(res.config);
  // Given on the command line: no position in the file, but given (saved and checked).
  for (auto* pos : {&cfg.source.key_pos, &cfg.source.value_pos})
    for (auto& [field, p] : *pos) {
      const std::string& spelled = cfg.source.spelling(field);
      if (field == key || spelled == key || spelled.rfind(key + ".", 0) == 0) p = SourcePos{};
    }
  return true;
}

std::string llamafactory_v1_yaml(const RunConfig& cfg, bool full) {
  std::vector<detail::YamlEntry> entries;
  std::set<std::string> done;
  long unplaced = INT_MAX;  // keys not in the file go after its keys
  const RunConfig defaults = v1_defaults_for(cfg);
  // The file's own keys in its order; an unchanged value as the file wrote it.
  for (const auto& w : cfg.v1.written) {
    done.insert(w.key);
    const bool kept = std::any_of(cfg.extra_keys.begin(), cfg.extra_keys.end(),
                                  [&](const ExtraKey& x) { return x.key == w.key; });
    const bool known = find_v1_key(w.key) || find_field(w.key);
    if (!kept && !known) continue;  // a key that failed to load: nothing to write
    const std::string now = written_text(cfg, w.key);
    entries.push_back({w.line, w.key, YAML::Load(now == w.loaded ? w.text : now)});
  }
  for (const auto& k : v1_keys()) {
    if (done.count(std::string(k.key))) continue;
    if (!v1_owns(k)) continue;
    YAML::Node value = v1_value(cfg, k);
    const bool dpo_key =
        std::find(std::begin(kDpoKeys), std::end(kDpoKeys), k.key) != std::end(kDpoKeys);
    const bool shown = full && (cfg.stage == Stage::Dpo || !dpo_key);  // they would make it DPO
    if (!shown && yaml_text(value) == yaml_text(v1_value(defaults, k))) continue;
    if (!full && k.key == "model" && cfg.model_name_or_path.empty()) continue;
    done.insert(std::string(k.key));
    entries.push_back({unplaced++, std::string(k.key), value});
  }
  // studio-train's own keys, where they say something v1's defaults do not.
  for (const auto& f : config_fields()) {
    const std::string key(f.key);
    if (done.count(key) || fields_v1_spells_otherwise().count(f.key) || !v1_spelling(key).empty() ||
        key == "zero_stage" || key == "offload_param")
      continue;
    if (yaml_text(f.to_node(cfg)) == yaml_text(f.to_node(defaults))) continue;
    entries.push_back({unplaced++, key, f.to_node(cfg)});
  }
  // A ZeRO request dist_config cannot say (stage 1, or optimizer offload alone) stays in
  // studio-train's keys.
  if (!done.count("zero_stage") && cfg.zero_stage && *cfg.zero_stage == 1)
    entries.push_back({unplaced++, "zero_stage", find_field("zero_stage")->to_node(cfg)});
  for (const auto& x : cfg.extra_keys)
    if (!done.count(x.key))
      entries.push_back({x.line > 0 ? x.line : unplaced++, x.key, YAML::Load(x.value.text)});
  return detail::write_yaml_entries(entries);
}

std::string llamafactory_v1_keys_markdown() {
  std::string out =
      "\n## LLaMA-Factory v1 files\n\n"
      "A file with v1's keys (`model`, `train_dataset`, `micro_batch_size`, `cp_size`,\n"
      "`dist_config`, ...) and no `model_name_or_path` is read as LLaMA-Factory v1 writes it\n"
      "(`USE_V1=1 llamafactory-cli sft|dpo`), starting from v1's defaults, and saved back in that\n"
      "form. The keys above are accepted in such a file as studio-train's own (`stage`,\n"
      "`template`, ...), except those v1 spells otherwise. docs/LLAMAFACTORY.md explains each\n"
      "choice.\n\n| v1 key | becomes | notes |\n|---|---|---|\n";
  // Where a v1 key sets something other than one field.
  const std::map<std::string_view, std::string_view> targets = {
      {"train_dataset", "`dataset`, `dataset_dir`"},
      {"eval_dataset", "`eval_dataset`"},
      {"global_batch_size", "`gradient_accumulation_steps`"},
      {"dist_config", "`zero_stage`, `offload_param`, `deepspeed`"},
      {"peft_config",
       "`finetuning_type`, `lora_*`, `additional_target`, `use_rslora`, "
       "`use_dora`, `adapter_name_or_path`, `freeze_*`"}};
  auto cell = [](std::string text) {
    for (size_t i = 0; (i = text.find('|', i)) != std::string::npos; i += 2) text.insert(i, "\\");
    return text;
  };
  for (const auto& k : v1_keys()) {
    auto t = targets.find(k.key);
    const std::string target = t != targets.end() ? std::string(t->second)
                               : k.field.empty()  ? std::string("-")
                                                  : "`" + std::string(k.field) + "`";
    out += "| `" + std::string(k.key) + "` | " + target + " | " + cell(std::string(k.becomes)) +
           " |\n";
  }
  return out;
}

const ConfigDialect& llamafactory_v1_dialect() {
  static const ConfigDialect dialect{
      "LLaMA-Factory v1",      ConfigForm::LlamaFactoryV1,     is_llamafactory_v1,
      read_llamafactory_v1,    apply_llamafactory_v1_override, llamafactory_v1_yaml,
      resolve_llamafactory_v1, detail::check_llamafactory_v1,  llamafactory_v1_keys_markdown,
  };
  return dialect;
}

}  // namespace studio
