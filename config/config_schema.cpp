#include "studio/config/config_schema.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>

#include "enum_names.h"
#include "yaml_load.h"
#include "studio/config/config_dialect.h"

namespace studio {
namespace {

using detail::yaml_kind;

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// YAML 1.1 spells floats with a dot and a signed exponent (5.0e-06); PyYAML reads "5e-06" as a
// string, so this form is what LLaMA-Factory can read back.
std::string format_double(double v) {
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string s = buf;
  auto e = s.find_first_of("eE");
  std::string mant = e == std::string::npos ? s : s.substr(0, e);
  std::string exp = e == std::string::npos ? "" : s.substr(e + 1);
  if (mant.find('.') == std::string::npos) mant += ".0";
  if (exp.empty()) return mant;
  if (exp[0] != '-' && exp[0] != '+') exp = "+" + exp;
  return mant + "e" + exp;
}

// --- codecs: one per field type ---------------------------------------------------------------
template <typename T, typename = void>
struct Codec;

template <>
struct Codec<bool> {
  static std::string parse(const YAML::Node& n, bool& out) {
    if (!n.IsScalar()) return "expected true or false, got " + yaml_kind(n);
    const std::string s = lower(trim(n.Scalar()));
    if (s == "true" || s == "yes" || s == "on" || s == "y" || s == "1") return out = true, "";
    if (s == "false" || s == "no" || s == "off" || s == "n" || s == "0") return out = false, "";
    return "expected true or false, got " + yaml_kind(n);
  }
  static YAML::Node to_node(bool v) { return YAML::Node(v ? "true" : "false"); }
  static std::string allowed() { return "true | false"; }
};

template <>
struct Codec<double> {
  static std::string parse(const YAML::Node& n, double& out) {
    if (!n.IsScalar() || !parse_double(n.Scalar(), out))
      return "expected a number (e.g. 5.0e-6), got " + yaml_kind(n);
    return "";
  }
  static YAML::Node to_node(double v) { return YAML::Node(format_double(v)); }
  static std::string allowed() { return ""; }
};

// Whole numbers are read exactly (not through a double), within the field's range.
template <>
struct Codec<int64_t> {
  static std::string parse(const YAML::Node& n, int64_t& out,
                           WholeRange range = kWholeKeyRange) {
    if (!n.IsScalar()) return "expected a whole number, got " + yaml_kind(n);
    return parse_whole(n.Scalar(), range, out);
  }
  static YAML::Node to_node(int64_t v) { return YAML::Node(std::to_string(v)); }
  static std::string allowed() { return ""; }
};

template <>
struct Codec<std::string> {
  static std::string parse(const YAML::Node& n, std::string& out) {
    if (!n.IsScalar()) return "expected text, got " + yaml_kind(n);
    out = n.Scalar();
    return "";
  }
  static YAML::Node to_node(const std::string& v) { return YAML::Node(v); }
  static std::string allowed() { return ""; }
};

// `dataset: a,b` (LLaMA-Factory's comma list); a YAML list is accepted too.
template <>
struct Codec<std::vector<std::string>> {
  static std::string parse(const YAML::Node& n, std::vector<std::string>& out) {
    out.clear();
    std::vector<std::string> items;
    if (n.IsSequence()) {
      for (const auto& item : n) {
        if (!item.IsScalar()) return "expected names, got a list holding " + yaml_kind(item);
        items.push_back(item.Scalar());
      }
    } else if (n.IsScalar()) {
      std::string_view s = n.Scalar();
      size_t start = 0;
      while (true) {
        size_t comma = s.find(',', start);
        items.emplace_back(s.substr(start, comma == std::string_view::npos ? s.npos : comma - start));
        if (comma == std::string_view::npos) break;
        start = comma + 1;
      }
    } else {
      return "expected a comma-separated list of names, got " + yaml_kind(n);
    }
    for (auto& item : items) {
      item = trim(item);
      if (item.empty()) return "an empty name in the list '" + n.Scalar() + "'";
      out.push_back(item);
    }
    return "";
  }
  static YAML::Node to_node(const std::vector<std::string>& v) {
    if (v.empty()) return YAML::Node(YAML::NodeType::Null);
    std::string joined;
    for (const auto& s : v) joined += (joined.empty() ? "" : ",") + s;
    return YAML::Node(joined);
  }
  static std::string allowed() { return ""; }
};

// lr_scheduler_kwargs: a mapping of numbers, also accepted as a JSON string as LLaMA-Factory does.
template <>
struct Codec<std::map<std::string, double>> {
  static std::string parse(const YAML::Node& n, std::map<std::string, double>& out) {
    out.clear();
    YAML::Node map = n;
    if (n.IsScalar()) {
      try {
        map = detail::load_yaml(n.Scalar());
      } catch (const YAML::Exception&) {
        return "expected a mapping such as {\"min_lr_rate\": 0.1}, got " + yaml_kind(n);
      }
    }
    if (map.IsNull()) return "";
    if (!map.IsMap()) return "expected a mapping such as {\"min_lr_rate\": 0.1}, got " + yaml_kind(n);
    for (const auto& kv : map) {
      double v = 0;
      if (!kv.second.IsScalar() || !parse_double(kv.second.Scalar(), v))
        return "'" + kv.first.Scalar() + "' must be a number, got " + yaml_kind(kv.second);
      out[kv.first.Scalar()] = v;
    }
    return "";
  }
  static YAML::Node to_node(const std::map<std::string, double>& v) {
    if (v.empty()) return YAML::Node(YAML::NodeType::Null);
    YAML::Node map(YAML::NodeType::Map);
    for (const auto& [k, x] : v) map[k] = Codec<double>::to_node(x);
    map.SetStyle(YAML::EmitterStyle::Flow);
    return map;
  }
  static std::string allowed() { return ""; }
};

template <>
struct Codec<RawYaml> {
  static std::string parse(const YAML::Node& n, RawYaml& out) {
    out.text = yaml_text(n);
    return "";
  }
  static YAML::Node to_node(const RawYaml& v) { return YAML::Load(v.text); }
  static std::string allowed() { return ""; }
};

template <typename E>
struct Codec<E, std::enable_if_t<std::is_enum_v<E>>> {
  static std::string parse(const YAML::Node& n, E& out) {
    if (!n.IsScalar()) return "expected one of the values below, got " + yaml_kind(n);
    const std::string s = trim(n.Scalar());
    for (const auto& [value, name] : detail::EnumInfo<E>::names())
      if (name == s) return out = value, "";
    const auto& refused = detail::EnumInfo<E>::refused();
    if (std::find(refused.begin(), refused.end(), s) != refused.end())
      return "'" + s + "' is not supported: " + std::string(detail::EnumInfo<E>::refused_why);
    return "'" + s + "' is not a valid value";
  }
  static YAML::Node to_node(E v) { return YAML::Node(std::string(detail::enum_name(v))); }
  static std::string allowed() { return detail::enum_allowed<E>(); }
};

template <typename T>
struct Codec<std::optional<T>> {
  template <typename... Limits>
  static std::string parse(const YAML::Node& n, std::optional<T>& out, Limits... limits) {
    if (n.IsNull()) return out.reset(), "";
    T v{};
    std::string err = Codec<T>::parse(n, v, limits...);
    if (err.empty()) out = std::move(v);
    return err;
  }
  static YAML::Node to_node(const std::optional<T>& v) {
    return v ? Codec<T>::to_node(*v) : YAML::Node(YAML::NodeType::Null);
  }
  static std::string allowed() { return Codec<T>::allowed(); }
};

bool same_yaml(const YAML::Node& a, const YAML::Node& b) { return yaml_text(a) == yaml_text(b); }

// Keys whose empty value (`key:` or `key: null`) means "unset" rather than an error.
template <typename T>
struct AcceptsNull : std::false_type {};
template <typename T>
struct AcceptsNull<std::optional<T>> : std::true_type {};
template <>
struct AcceptsNull<std::vector<std::string>> : std::true_type {};
template <>
struct AcceptsNull<std::map<std::string, double>> : std::true_type {};

struct FieldOptions {
  KeySupport support = KeySupport::Used;
  bool required = false;
  std::string allowed;  // overrides the codec's list (ranges, template names)
  WholeRange whole = kWholeKeyRange;  // what a whole-number key is read within
};

FieldOptions required(std::string allowed = {}) {
  FieldOptions o;
  o.required = true;
  o.allowed = std::move(allowed);
  return o;
}
FieldOptions no_effect() {
  FieldOptions o;
  o.support = KeySupport::NoEffect;
  return o;
}
FieldOptions range(std::string allowed) {
  FieldOptions o;
  o.allowed = std::move(allowed);
  return o;
}
FieldOptions range(std::string allowed, WholeRange whole) {
  FieldOptions o = range(std::move(allowed));
  o.whole = whole;
  return o;
}

// A whole-number field is read within its own range.
template <typename T>
std::string parse_value(const YAML::Node& n, T& out, WholeRange whole) {
  if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, std::optional<int64_t>>)
    return Codec<T>::parse(n, out, whole);
  else
    return static_cast<void>(whole), Codec<T>::parse(n, out);
}

template <typename T>
FieldSpec field(std::string_view key, std::string_view group, T RunConfig::*member,
                std::string_view help, FieldOptions opt = {}) {
  FieldSpec f;
  f.key = key;
  f.group = group;
  f.help = help;
  f.support = opt.support;
  f.required = opt.required;
  f.allowed = opt.allowed.empty() ? Codec<T>::allowed() : opt.allowed;
  f.parse = [member, whole = opt.whole](const YAML::Node& n, RunConfig& cfg) -> std::string {
    if (n.IsNull()) {
      if constexpr (AcceptsNull<T>::value) {
        cfg.*member = T{};
        return "";
      } else {
        return "needs a value";
      }
    }
    return parse_value(n, cfg.*member, whole);
  };
  f.to_node = [member](const RunConfig& cfg) { return Codec<T>::to_node(cfg.*member); };
  f.is_default = [member](const RunConfig& cfg) {
    static const RunConfig defaults;
    return same_yaml(Codec<T>::to_node(cfg.*member), Codec<T>::to_node(defaults.*member));
  };
  return f;
}

}  // namespace

SourcePos yaml_pos(const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  return {m.line + 1, m.column + 1};
}

bool yaml_long_key(std::string_view key) {
  return key.size() > 200;
}

namespace {

// The nodes of a value as a graph: an alias is the very node it names (`&x [1, *x]` holds itself;
// `&a [x, x]`, `&b [*a, *a]`, ... doubles with each level), so a walk visits each node once and
// counts the ways to it. Parsed nodes are told apart by their place in the file and then by
// identity; nodes made in memory (no place) are plain trees.
class NodeGraph {
 public:
  struct Seen {
    YAML::Node node;
    int count = 0;
    std::string anchor;  // for a node reached more than once
    bool written = false;
  };
  // Counts the ways to each node of `n`; whether any map in it has a long key.
  bool scan(const YAML::Node& n) {
    if (n.Mark().pos >= 0) {
      if (Seen* s = find(n)) {
        ++s->count;
        return false;  // its own nodes are counted already
      }
      by_place_[n.Mark().pos].push_back({n, 1, {}, false});
    }
    bool found = false;
    if (n.IsMap()) {
      for (const auto& kv : n) {
        found |= kv.first.IsScalar() && yaml_long_key(kv.first.Scalar());
        found |= scan(kv.first);
        found |= scan(kv.second);
      }
    } else if (n.IsSequence()) {
      for (const auto& x : n) found |= scan(x);
    }
    return found;
  }
  void name_shared() {
    int next = 0;
    for (auto& [place, nodes] : by_place_)
      for (Seen& s : nodes)
        if (s.count > 1) s.anchor = "a" + std::to_string(++next);
  }
  Seen* find(const YAML::Node& n) {
    if (n.Mark().pos < 0) return nullptr;
    auto it = by_place_.find(n.Mark().pos);
    if (it == by_place_.end()) return nullptr;
    for (Seen& s : it->second)
      if (s.node.is(n)) return &s;
    return nullptr;
  }

 private:
  std::map<int, std::vector<Seen>> by_place_;
};

// `n` node by node, each long key in the explicit form, each node reached more than once written
// once with an anchor and then as its alias (as yaml-cpp writes them), tags kept. Collections are
// written in block style: yaml-cpp writes an explicit key inside a flow map as `{ ?"...": 1}`,
// which it does not read back.
void emit_node(YAML::Emitter& e, const YAML::Node& n, NodeGraph& graph) {
  if (NodeGraph::Seen* s = graph.find(n); s && !s->anchor.empty()) {
    if (s->written) {
      e << YAML::Alias(s->anchor);
      return;
    }
    s->written = true;
    e << YAML::Anchor(s->anchor);
  }
  if (!n.IsMap() && !n.IsSequence()) {
    e << n;
    return;
  }
  const std::string& tag = n.Tag();
  if (!tag.empty() && tag != "?" && tag != "!") e << YAML::VerbatimTag(tag);
  if (n.IsMap()) {
    e << YAML::BeginMap;
    for (const auto& kv : n) {
      e << YAML::Key;
      if (kv.first.IsScalar() && yaml_long_key(kv.first.Scalar())) e << YAML::LongKey;
      emit_node(e, kv.first, graph);
      e << YAML::Value;
      emit_node(e, kv.second, graph);
    }
    e << YAML::EndMap;
  } else {
    e << YAML::BeginSeq;
    for (const auto& x : n) emit_node(e, x, graph);
    e << YAML::EndSeq;
  }
}

}  // namespace

void emit_yaml(YAML::Emitter& e, const YAML::Node& n) {
  NodeGraph graph;
  if (!graph.scan(n)) {  // nearly every value: as yaml-cpp writes it
    e << n;
    return;
  }
  graph.name_shared();
  emit_node(e, n, graph);
}

std::string yaml_text(const YAML::Node& n) {
  YAML::Emitter e;
  emit_yaml(e, n);
  return e.c_str();
}

const std::vector<FieldSpec>& config_fields() {
  using R = RunConfig;
  static const std::vector<FieldSpec> fields = [] {
    std::string templates;
    for (const auto& t : known_templates()) templates += (templates.empty() ? "" : " | ") + t;
    return std::vector<FieldSpec>{
        // model
        field("model_name_or_path", "model", &R::model_name_or_path,
              "Hugging Face model folder (config.json, *.safetensors, tokenizer.json), or a hub "
              "id found in the local Hugging Face cache",
              required()),
        field("trust_remote_code", "model", &R::trust_remote_code,
              "studio-train never runs code shipped with a model", no_effect()),
        field("ref_model", "model", &R::ref_model,
              "the reference model of DPO and of use_asft_loss: a model folder or a hub id; "
              "default: a frozen copy of the initial weights"),
        field("model_revision", "model", &R::model_revision,
              "the revision (branch, tag or commit) of a hub id in model_name_or_path or "
              "ref_model, looked up in the local Hugging Face cache; nothing is downloaded"),
        field("cache_dir", "model", &R::cache_dir,
              "a Hugging Face cache folder searched first for hub ids (then HF_HUB_CACHE, "
              "HF_HOME/hub, ~/.cache/huggingface/hub)"),
        // method
        field("stage", "method", &R::stage,
              "training stage: pt (continued pre-training on plain texts), sft, dpo, rm (a reward "
              "model trained on preference pairs), or kto (desirable and undesirable examples, "
              "kto_tag datasets) (docs/STAGES.md)"),
        field("do_train", "method", &R::do_train, "train (false leaves nothing to do)"),
        field("finetuning_type", "method", &R::finetuning_type,
              "which weights are trained: full (all), lora (low-rank adapters on a frozen base, "
              "written as PEFT's files), freeze (the last or first layers only) (docs/ADAPTERS.md)"),
        field("deepspeed", "method", &R::deepspeed,
              "DeepSpeed JSON: zero_optimization.stage, offload_optimizer and offload_param are "
              "honoured by studio-train itself; batch, clipping, precision and optimizer values "
              "must agree with this file's keys (or be \"auto\"); other fields are reported"),
        field("zero_stage", "method", &R::zero_stage,
              "ZeRO stage without a DeepSpeed JSON: 0 none, 1 optimizer states, 2 + gradients, "
              "3 + weights sharded over all ranks", range("0, 1, 2 or 3")),
        field("offload_optimizer", "method", &R::offload_optimizer,
              "fp32 masters, AdamW states and gradient pieces in CPU memory, updated there "
              "(ZeRO stage >= 1)"),
        field("offload_param", "method", &R::offload_param,
              "ZeRO-3 weight pieces in CPU memory (implies offload_optimizer)"),
        field("pref_beta", "method", &R::pref_beta,
              "beta of the preference loss (ORPO: the weight of its odds-ratio term; stage kto: "
              "KTO's beta)",
              range("> 0")),
        field("pref_loss", "method", &R::pref_loss,
              "preference loss of stage dpo; orpo and simpo need no reference model"),
        field("simpo_gamma", "method", &R::simpo_gamma,
              "SimPO's target reward margin (pref_loss: simpo)", range(">= 0")),
        field("pref_ftx", "method", &R::pref_ftx,
              "weight of the SFT loss mixed into DPO (and KTO: the desirable examples')",
              range(">= 0")),
        field("kto_chosen_weight", "method", &R::kto_chosen_weight,
              "stage kto: weight of the desirable examples' losses", range(">= 0")),
        field("kto_rejected_weight", "method", &R::kto_rejected_weight,
              "stage kto: weight of the undesirable examples' losses", range(">= 0")),
        field("dpo_label_smoothing", "method", &R::dpo_label_smoothing,
              "label smoothing of the sigmoid DPO loss", range("0 to 0.5")),
        field("precompute_ref_logps", "method", &R::precompute_ref_logps,
              "compute reference log-probs once before training; no reference model in memory "
              "(stages dpo and kto)"),
        // adapters
        field("lora_rank", "adapters", &R::lora_rank, "finetuning_type lora: rank r of the adapters",
              range(">= 1")),
        field("lora_alpha", "adapters", &R::lora_alpha,
              "finetuning_type lora: the adapters' output is scaled by lora_alpha / lora_rank "
              "(default lora_alpha: 2 x lora_rank)", range("> 0")),
        field("lora_dropout", "adapters", &R::lora_dropout,
              "finetuning_type lora: dropout on each adapter's input in training forwards",
              range("0 <= p < 1")),
        field("lora_target", "adapters", &R::lora_target,
              "finetuning_type lora: module names that get adapters (q_proj, k_proj, v_proj, "
              "o_proj, gate_proj, up_proj, down_proj, qkv_proj, gate_up_proj), or all: every "
              "linear layer of the decoder but the LM head"),
        field("additional_target", "adapters", &R::additional_target,
              "finetuning_type lora: modules trained whole beside the adapters (embed_tokens, "
              "lm_head, norm; PEFT's modules_to_save)"),
        field("use_rslora", "adapters", &R::use_rslora,
              "finetuning_type lora: rank-stabilised scaling lora_alpha / sqrt(lora_rank)"),
        field("use_dora", "adapters", &R::use_dora,
              "finetuning_type lora: weight-decomposed LoRA (DoRA): a trained magnitude per "
              "output row of each adapted weight"),
        field("adapter_name_or_path", "adapters", &R::adapter_name_or_path,
              "finetuning_type lora: PEFT adapter folders (comma-separated); all but the last "
              "are merged into the base, the last is trained further (create_new_adapter: "
              "merged too)"),
        field("create_new_adapter", "adapters", &R::create_new_adapter,
              "finetuning_type lora: merge every adapter_name_or_path into the base and train a "
              "new adapter"),
        field("quantization_bit", "adapters", &R::quantization_bit,
              "QLoRA (finetuning_type lora): 4 keeps the base's decoder linear weights in "
              "bitsandbytes' 4-bit format (the bytes it writes), dequantized where each layer "
              "runs; the LM head and embeddings stay as loaded", range("4")),
        field("quantization_type", "adapters", &R::quantization_type,
              "QLoRA's 4-bit code: nf4 (NormalFloat) or fp4", range("nf4 | fp4")),
        field("double_quantization", "adapters", &R::double_quantization,
              "QLoRA: the per-block scales quantized to 8 bits as well (bnb_4bit_use_double_quant)"),
        field("quantization_method", "adapters", &R::quantization_method,
              "QLoRA: bnb (bitsandbytes' format) only; gptq, awq, hqq, eetq, ... are refused",
              range("bnb")),
        field("freeze_trainable_layers", "adapters", &R::freeze_trainable_layers,
              "finetuning_type freeze: the last n decoder layers are trained (n < 0: the first "
              "-n)", range("!= 0")),
        field("freeze_trainable_modules", "adapters", &R::freeze_trainable_modules,
              "finetuning_type freeze: the modules of those layers that are trained (self_attn, "
              "mlp, input_layernorm, ...), or all"),
        field("freeze_extra_modules", "adapters", &R::freeze_extra_modules,
              "finetuning_type freeze: modules outside the layers trained too (embed_tokens, "
              "norm, lm_head)"),
        // export
        field("export_dir", "export", &R::export_dir,
              "studio-train export: the folder the merged model is written to (the base with "
              "every adapter_name_or_path merged, as transformers' save_pretrained writes it)"),
        field("export_size", "export", &R::export_size,
              "studio-train export: GB (10^9 bytes) of weights per shard", range(">= 1")),
        field("export_device", "export", &R::export_device,
              "studio-train export: cpu or auto; the merge streams one tensor at a time on the "
              "CPU either way", range("cpu | auto")),
        field("infer_dtype", "export", &R::infer_dtype,
              "studio-train export: the merged weights' dtype; auto keeps the base's config.json "
              "torch_dtype (float32 stays float32 on a machine without a GPU, as LLaMA-Factory)",
              range("auto | float16 | bfloat16 | float32")),
        field("export_legacy_format", "export", &R::export_legacy_format,
              "studio-train export: true (pickle .bin files) is refused; transformers 5 writes "
              "safetensors only"),
        // data
        field("dataset", "data", &R::dataset, "comma-separated names from dataset_info.json",
              required()),
        field("dataset_dir", "data", &R::dataset_dir, "folder holding dataset_info.json"),
        field("eval_dataset", "data", &R::eval_dataset, "evaluation dataset names"),
        field("val_size", "data", &R::val_size,
              "held-out share of the training data (fraction < 1, or a sample count)",
              range("0 <= fraction < 1, or a whole count")),
        field("template", "data", &R::template_name, "chat template",
              required(templates)),
        field("cutoff_len", "data", &R::cutoff_len, "tokens per sequence",
              range(">= 1")),
        field("max_samples", "data", &R::max_samples, "at most this many samples per dataset",
              range("", WholeRange::of<int64_t>())),
        field("train_on_prompt", "data", &R::train_on_prompt, "also train on prompt tokens"),
        field("mask_history", "data", &R::mask_history, "train on the last turn only"),
        field("packing", "data", &R::packing,
              "pack several samples into one sequence; stage pt packs its texts into cutoff_len "
              "blocks unless this is set to false (LLaMA-Factory's default for pt)"),
        field("neat_packing", "data", &R::neat_packing,
              "packing without attention across sample boundaries"),
        field("batching_strategy", "data", &R::batching_strategy,
              "LLaMA-Factory v1's micro-batches (stage sft): normal and padding_free take "
              "per_device_train_batch_size samples each (padding_free packs them in v1, with the "
              "same loss; studio-train pads them); dynamic_batching fills each micro-batch, in "
              "the shuffled order, with as many samples as fit per_device_train_batch_size x "
              "cutoff_len tokens once padded to the longest, dynamic_padding_free as many as fit "
              "it unpadded, packed into one row with attention isolated per sample"),
        field("overwrite_cache", "data", &R::overwrite_cache,
              "re-tokenize even when a cache for the same data and settings exists"),
        field("preprocessing_num_workers", "data", &R::preprocessing_num_workers,
              "tokenizer worker threads (default: all cores)"),
        field("preprocessing_batch_size", "data", &R::preprocessing_batch_size,
              "rows per preprocessing batch; stage pt packs each batch's texts into cutoff_len "
              "blocks on its own, as LLaMA-Factory does", range(">= 1")),
        field("dataloader_num_workers", "data", &R::dataloader_num_workers,
              "batches are assembled in-process", no_effect()),
        // output
        field("output_dir", "output", &R::output_dir,
              "run folder: checkpoints, final model, events.jsonl, status.json",
              required()),
        field("overwrite_output_dir", "output", &R::overwrite_output_dir,
              "allow an output_dir that already holds files"),
        field("logging_steps", "output", &R::logging_steps, "steps between logged metrics",
              range(">= 1")),
        field("save_steps", "output", &R::save_steps, "steps between checkpoints",
              range(">= 1")),
        field("save_total_limit", "output", &R::save_total_limit,
              "keep at most this many checkpoints", range(">= 1")),
        field("save_only_model", "output", &R::save_only_model,
              "checkpoints hold the model only (no optimizer state: cannot resume exactly)"),
        field("plot_loss", "output", &R::plot_loss,
              "the studio plots every run from events.jsonl", no_effect()),
        field("report_to", "output", &R::report_to,
              "metrics always go to events.jsonl; tensorboard (or all) also writes TensorBoard "
              "event files into logging_dir (train/loss, train/learning_rate, train/grad_norm, "
              "train/epoch, train/tokens_per_sec, DPO train/rewards/*, eval/loss, "
              "memory/rankN/*_mib); other integrations (wandb, mlflow, ...) are not built in: "
              "validate warns"),
        field("logging_dir", "output", &R::logging_dir,
              "TensorBoard's folder with report_to: tensorboard; default "
              "OUTPUT_DIR/runs/<Mon><DD>_<HH-MM-SS>_<host>, as Hugging Face's Trainer"),
        // optimisation
        field("per_device_train_batch_size", "train", &R::per_device_train_batch_size,
              "sequences per rank per micro-step", range(">= 1")),
        field("gradient_accumulation_steps", "train", &R::gradient_accumulation_steps,
              "micro-steps per optimizer step", range(">= 1")),
        field("learning_rate", "train", &R::learning_rate, "peak learning rate",
              range("> 0")),
        field("num_train_epochs", "train", &R::num_train_epochs,
              "epochs (when max_steps is not set)", range("> 0")),
        field("max_steps", "train", &R::max_steps, "optimizer steps; > 0 overrides epochs"),
        field("lr_scheduler_type", "train", &R::lr_scheduler_type, "learning-rate schedule"),
        field("lr_scheduler_kwargs", "train", &R::lr_scheduler_kwargs,
              "schedule options: min_lr_rate or min_lr for cosine_with_min_lr"),
        field("warmup_ratio", "train", &R::warmup_ratio, "share of steps spent warming up",
              range("0 <= ratio < 1")),
        field("warmup_steps", "train", &R::warmup_steps, "warm-up steps; > 0 overrides the ratio",
              range(">= 0")),
        field("weight_decay", "train", &R::weight_decay,
              "AdamW decoupled weight decay (never on norms and biases)",
              range(">= 0")),
        field("adam_beta1", "train", &R::adam_beta1, "AdamW beta1",
              range("0 <= beta < 1")),
        field("adam_beta2", "train", &R::adam_beta2, "AdamW beta2",
              range("0 <= beta < 1")),
        field("adam_epsilon", "train", &R::adam_epsilon, "AdamW epsilon",
              range("> 0")),
        field("max_grad_norm", "train", &R::max_grad_norm, "clip the global gradient norm; 0: off",
              range(">= 0")),
        field("moe_aux_loss_coef", "train", &R::moe_aux_loss_coef,
              "mixture-of-experts models: > 0 adds the routers' auxiliary load-balancing loss "
              "with this coefficient (transformers' output_router_logits and "
              "router_aux_loss_coef); absent or 0: as config.json's output_router_logits says",
              range(">= 0")),
        field("use_dft_loss", "train", &R::use_dft_loss,
              "stage sft: Dynamic Fine-Tuning, each target token's cross-entropy times its "
              "probability (taken as a constant), as LLaMA-Factory's dft_loss_func; the logged "
              "and eval losses are that loss"),
        field("use_eaft_loss", "train", &R::use_eaft_loss,
              "stage sft: entropy-adaptive fine-tuning, each target token's cross-entropy times "
              "(the entropy of the softmax over its 20 largest logits / 3) ^ eaft_alpha, taken "
              "as a constant, as LLaMA-Factory's eaft_loss_func"),
        field("eaft_alpha", "train", &R::eaft_alpha, "use_eaft_loss: the power of its weight",
              range(">= 0")),
        field("use_asft_loss", "train", &R::use_asft_loss,
              "stage sft: anchored SFT, the DFT loss plus asft_alpha x KL(reference || policy) "
              "over the vocabulary at each target token, the reference a frozen copy of the "
              "initial weights (or ref_model) run on every micro-batch, as LLaMA-Factory's "
              "asft_loss_func; the logged and eval losses are that loss"),
        field("asft_alpha", "train", &R::asft_alpha, "use_asft_loss: the weight of its KL term",
              range(">= 0")),
        field("skip_nonfinite_steps", "train", &R::skip_nonfinite_steps,
              "a step whose loss or gradient norm is NaN or infinite: 0 stops the run there "
              "(status.json says which step and why); N > 0 skips such steps without updating "
              "and stops at the (N+1)-th in a row",
              range(">= 0")),
        field("save_on_stop", "train", &R::save_on_stop,
              "on a stop request (SIGINT/SIGTERM, the studio's Stop, remote cancel, scancel) every "
              "rank ends the step it is in; true also writes checkpoint-STEP then, to resume from "
              "(the launcher and the studio then wait up to ddp_timeout more before SIGKILL)"),
        field("bf16", "train", &R::bf16, "bf16 compute with fp32 master weights"),
        field("fp16", "train", &R::fp16,
              "fp16 compute with loss scaling; not implemented: validate warns, training refuses"),
        field("pure_bf16", "train", &R::pure_bf16,
              "bf16 weights and optimizer states; not implemented (fp32 masters only): validate "
              "warns, training refuses"),
        field("gradient_checkpointing", "train", &R::gradient_checkpointing,
              "recompute each decoder layer's activations in backward"),
        field("offload_activations", "train", &R::offload_activations,
              "with gradient_checkpointing: keep each layer's checkpointed input in (pinned) host "
              "memory and bring it back for the recompute, overlapped with compute on CUDA"),
        field("tiled_mlp", "train", &R::tiled_mlp,
              "run each layer's MLP over sequence tiles, forward and backward, so its [tokens x "
              "intermediate] activations never exist whole"),
        field("tiled_mlp_budget_mib", "train", &R::tiled_mlp_budget_mib,
              "tiled_mlp: MiB one tile's MLP activations may take; 0: as much as the layer's "
              "input hidden states",
              range(">= 0")),
        field("flash_attn", "train", &R::flash_attn,
              "attention kernels: disabled = the math path everywhere; auto, sdpa and fa2 = ATen's "
              "flash kernels where they apply (CUDA bf16/fp16, CPU fp32/bf16)"),
        field("ddp_timeout", "train", &R::ddp_timeout,
              "seconds before a collective counts as hung", range(">= 1")),
        field("seed", "train", &R::seed, "random seed", range(">= 0", WholeRange::of<int64_t>())),
        field("resume_from_checkpoint", "train", &R::resume_from_checkpoint,
              "checkpoint folder to continue from"),
        // evaluation
        field("per_device_eval_batch_size", "eval", &R::per_device_eval_batch_size,
              "sequences per rank in evaluation", range(">= 1")),
        field("eval_strategy", "eval", &R::eval_strategy, "when to evaluate"),
        field("eval_steps", "eval", &R::eval_steps, "steps between evaluations",
              range(">= 1")),
        // sequence parallelism
        field("sequence_parallel_size", "sequence parallelism", &R::sequence_parallel_size,
              "ranks that share one sequence; divides the world size",
              range(">= 1, divides GPUs x nodes")),
        field("sequence_parallel_mode", "sequence parallelism", &R::sequence_parallel_mode,
              "zigzag-ring: K/V ring; ulysses: all-to-all over heads; usp: ulysses x ring"),
        field("sequence_parallel_ulysses_degree", "sequence parallelism",
              &R::sequence_parallel_ulysses_degree, "usp: Ulysses ranks per ring rank",
              range(">= 1")),
        field("sequence_parallel_ring_degree", "sequence parallelism",
              &R::sequence_parallel_ring_degree, "usp: ring ranks",
              range(">= 1")),
        field("shuffle_for_sequence_parallel", "sequence parallelism",
              &R::shuffle_for_sequence_parallel,
              "with sequence_parallel_size > 1: false trains the samples in dataset order (as "
              "360-LLaMA-Factory); no effect without SP"),
    };
  }();
  return fields;
}

const FieldSpec* find_field(std::string_view key) {
  for (const auto& f : config_fields())
    if (f.key == key) return &f;
  return nullptr;
}

namespace {

// The optim values whose update is plain AdamW with fp32 states: what studio-train runs (the
// paged variants only page host memory; the fused ones fuse kernels).
bool plain_adamw(const std::string& v) {
  static const std::set<std::string> kPlain = {
      "adamw_torch", "adamw_torch_fused", "adamw_hf", "adamw_apex_fused", "adamw_torch_xla",
      "adamw_torch_npu_fused", "paged_adamw_32bit", "adamw"};
  return kPlain.count(v) > 0;
}

}  // namespace

std::string extra_key_note(std::string_view key, const YAML::Node& value) {
  const std::string v = value.IsScalar() ? lower(trim(value.Scalar())) : "";
  const bool off = value.IsNull() || v.empty() || v == "null" || v == "~" || v == "none" ||
                   v == "false" || v == "no" || v == "off" || v == "0";
  if (key == "optim" && plain_adamw(v))
    return "'" + v + "' is AdamW: studio-train runs its own AdamW (fp32 masters and states, "
           "decoupled weight decay, not on norms and biases); kept as written when the config "
           "is saved";
  if ((key == "fp8" || key == "fp8_enable_fsdp_float8_all_gather") && !off)
    return "fp8 training is not implemented: the run computes in bf16 (bf16: true) or fp32; "
           "kept as written when the config is saved";
  if (key == "fp8_backend")
    return "fp8 training is not implemented (see fp8); kept as written when the config is saved";
  return "";
}

std::string refused_extra_key(std::string_view key, const YAML::Node& value) {
  const std::string v = value.IsScalar() ? lower(trim(value.Scalar())) : "";
  const bool unset = value.IsNull() || v.empty() || v == "null" || v == "~" || v == "none";
  const bool off = unset || v == "false" || v == "no" || v == "off" || v == "0";
  if (key == "quantization_device_map" && !unset)
    return "a device map is for inference (LLaMA-Factory: \"Cannot use device map for quantized "
           "models in training\"): remove quantization_device_map";
  if (key == "loraplus_lr_ratio" && !unset)
    return "LoRA+ (a learning rate of its own for lora_B) is not implemented: remove "
           "loraplus_lr_ratio";
  if (key == "pissa_init" && !off)
    return "PiSSA initialisation is not implemented: remove pissa_init (adapters start as PEFT's "
           "default initialisation)";
  if (key == "export_quantization_bit" && !unset)
    return "quantizing the export (GPTQ) is not implemented: remove export_quantization_bit";
  if (key == "export_hub_model_id" && !unset)
    return "studio-train uploads nothing: remove export_hub_model_id and upload export_dir "
           "yourself";
  if (key == "use_llama_pro" && !off)
    return "LLaMA-Pro (training expanded blocks) is not implemented: remove use_llama_pro";
  if ((key == "use_galore" || key == "use_badam" || key == "use_apollo" ||
       key == "use_adam_mini" || key == "use_muon") && !off)
    return "this optimizer is not available: studio-train trains with AdamW; remove " +
           std::string(key);
  if (key == "optim" && !unset && !plain_adamw(v))
    return "studio-train trains with AdamW; '" + v + "' is not available" +
           (v.find("8bit") != std::string::npos || v.find("4bit") != std::string::npos
                ? std::string(" (quantized optimizer states; studio-train keeps them in fp32)")
                : std::string());
  // Keys that change the loss or the model: training without them would not be the run asked.
  if (key == "mixture_of_depths" && !unset)
    return "mixture-of-depths models are not implemented; remove mixture_of_depths";
  if (key == "neftune_noise_alpha" && !off)
    return "NEFTune noise is not implemented; remove neftune_noise_alpha";
  if (key == "use_unsloth" && !off)
    return "Unsloth is a different engine; remove use_unsloth";
  return "";
}

std::string suggest_key(std::string_view unknown, const std::vector<std::string_view>& candidates) {
  auto distance = [](std::string_view a, std::string_view b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      size_t prev = row[0];
      row[0] = i;
      for (size_t j = 1; j <= b.size(); ++j) {
        size_t cur = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] != b[j - 1])});
        prev = cur;
      }
    }
    return row[b.size()];
  };
  std::string best;
  size_t best_d = 3;
  for (std::string_view c : candidates) {
    // The distance is at least the difference in length: a long key (a line of text pasted as
    // one) costs nothing here.
    const size_t apart =
        unknown.size() > c.size() ? unknown.size() - c.size() : c.size() - unknown.size();
    if (apart >= best_d) continue;
    size_t d = distance(unknown, c);
    if (d < best_d) best_d = d, best = std::string(c);
  }
  return best;
}

std::string suggest_key(std::string_view unknown) {
  std::vector<std::string_view> keys;
  for (const auto& f : config_fields()) keys.push_back(f.key);
  return suggest_key(unknown, keys);
}

bool yaml_bool(const YAML::Node& n, bool& out) { return Codec<bool>::parse(n, out).empty(); }
std::string yaml_whole(const YAML::Node& n, int64_t& out) { return Codec<int64_t>::parse(n, out); }

std::string config_keys_markdown() {
  const RunConfig defaults;
  std::string out =
      "# Run config keys\n\n"
      "Generated by `studio-train config-keys` from the key table in `config/config_schema.cpp`;\n"
      "a test keeps this file equal to it. Keys are spelled as in LLaMA-Factory YAML files. Keys\n"
      "not listed are kept as written when a config is saved and reported once as warnings; the\n"
      "few that would change what a run means are errors: `quantization_device_map`, `loraplus_lr_ratio`,\n"
      "`pissa_init`, `use_llama_pro`, other optimizers\n"
      "(`use_galore`, `use_badam`, `use_apollo`, `use_adam_mini`, `use_muon`, an `optim` that is\n"
      "not plain AdamW such as `adamw_8bit` or `paged_adamw_8bit`), `mixture_of_depths`,\n"
      "`neftune_noise_alpha`, `use_unsloth`. `optim: adamw_torch` (and the fused, paged 32-bit and hf AdamWs) and `fp8`\n"
      "(the run computes in bf16) are warned about with what runs instead.\n\n"
      "Files are read as PyYAML (LLaMA-Factory's loader) reads them: merge keys (`<<: *anchor`,\n"
      "`<<: [*a, *b]`) are resolved, keys of the mapping itself winning. Whole-number keys are\n"
      "read exactly, from -2147483648 to 2147483647 (`max_samples` and `seed`: int64's range); a\n"
      "value beyond is refused as too large, never cut or rounded.\n";
  std::string_view group;
  for (const auto& f : config_fields()) {
    if (f.group != group) {
      group = f.group;
      out += "\n## " + std::string(group) + "\n\n| key | default | allowed | what it does |\n"
             "|---|---|---|---|\n";
    }
    YAML::Node v = f.to_node(defaults);
    std::string def = f.required ? "required" : v.IsNull() ? "unset" : "";
    if (def.empty()) {
      YAML::Emitter e;
      e << YAML::Flow << v;
      def = "`" + std::string(e.c_str()) + "`";
    }
    std::string help(f.help);
    if (f.support == KeySupport::NoEffect) help += " *(no effect)*";
    auto cell = [](std::string text) {  // a '|' inside a cell would end it
      for (size_t i = 0; (i = text.find('|', i)) != std::string::npos; i += 2) text.insert(i, "\\");
      return text;
    };
    out += "| `" + std::string(f.key) + "` | " + cell(def) + " | " + cell(f.allowed) + " | " +
           cell(help) + " |\n";
  }
  for (const ConfigDialect* dialect : config_dialects()) out += dialect->keys_markdown();
  return out;
}

}  // namespace studio
