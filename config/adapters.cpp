#include "studio/config/adapters.h"

#include <algorithm>
#include <optional>
#include <regex>
#include <set>
#include <utility>

namespace studio {
namespace {

// The Hugging Face parameters of a dense decoder layer (without the "model.layers.N." prefix)
// and their element counts, in module order.
std::vector<std::pair<std::string, int64_t>> layer_parameters(const ModelInfo& m) {
  std::vector<std::pair<std::string, int64_t>> out;
  const int64_t h = m.hidden_size;
  for (const DecoderLinear& l : decoder_linears(m)) {
    const bool attention = l.name.find("_proj") != std::string::npos &&
                           (l.name[0] == 'q' || l.name[0] == 'k' || l.name[0] == 'v' ||
                            l.name[0] == 'o');
    const std::string module = attention ? "self_attn." : "mlp.";
    out.emplace_back(module + l.name + ".weight", l.in * l.out);
    const bool bias = attention ? (l.name == "o_proj" ? m.o_bias : m.qkv_bias) : m.mlp_bias;
    if (bias) out.emplace_back(module + l.name + ".bias", l.out);
  }
  if (m.qk_norm) {
    out.emplace_back("self_attn.q_norm.weight", m.head_dim);
    out.emplace_back("self_attn.k_norm.weight", m.head_dim);
  }
  using L = ModelInfo::NormLayout;
  std::vector<std::string> norms = {"input_layernorm", "post_attention_layernorm"};
  if (m.norm_layout == L::Glm4Sandwich) {
    norms.push_back("post_self_attn_layernorm");
    norms.push_back("post_mlp_layernorm");
  } else if (m.norm_layout == L::GemmaSandwich) {
    norms.push_back("pre_feedforward_layernorm");
    norms.push_back("post_feedforward_layernorm");
  }
  for (const auto& n : norms) out.emplace_back(n + ".weight", h);
  return out;
}

// Every Hugging Face parameter of a dense `m` with its element count, in state-dict order.
std::vector<std::pair<std::string, int64_t>> all_parameters(const ModelInfo& m) {
  std::vector<std::pair<std::string, int64_t>> out;
  out.emplace_back("model.embed_tokens.weight", m.vocab_size * m.hidden_size);
  const auto in_layer = layer_parameters(m);
  for (int64_t layer = 0; layer < m.num_layers; ++layer)
    for (const auto& [name, n] : in_layer)
      out.emplace_back("model.layers." + std::to_string(layer) + "." + name, n);
  out.emplace_back("model.norm.weight", m.hidden_size);
  if (!m.tie_word_embeddings) out.emplace_back("lm_head.weight", m.vocab_size * m.hidden_size);
  return out;
}

// A parameter's module path: "model.layers.0.input_layernorm.weight" -> "...input_layernorm".
std::string module_path(const std::string& name) { return name.substr(0, name.rfind('.')); }

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// LLaMA-Factory's freeze patterns (_setup_freeze_tuning): ".{layer}.{module}" for each trained
// layer and module (".{layer}." for all), then freeze_extra_modules as they are. A parameter is
// trained when its name contains one of them (a plain substring test, so that extra module
// `norm` also trains every layer's norms, as in LLaMA-Factory).
std::vector<std::string> freeze_patterns(const RunConfig& cfg, const ModelInfo& model) {
  std::vector<std::string> out;
  const auto layers = freeze_trained_layers(cfg, model);
  for (const auto& module : cfg.freeze_trainable_modules)
    for (int64_t layer : layers)
      out.push_back("." + std::to_string(layer) + "." + (module == "all" ? "" : module + "."));
  for (const auto& extra : cfg.freeze_extra_modules) out.push_back(extra);
  return out;
}

}  // namespace

std::vector<DecoderLinear> decoder_linears(const ModelInfo& m) {
  const int64_t h = m.hidden_size, q = m.num_heads * m.head_dim, kv = m.num_kv_heads * m.head_dim;
  const int64_t i = m.intermediate_size;
  std::vector<DecoderLinear> out;
  if (m.fused_qkv) {
    out.push_back({"qkv_proj", h, q + 2 * kv});
  } else {
    out.push_back({"q_proj", h, q});
    out.push_back({"k_proj", h, kv});
    out.push_back({"v_proj", h, kv});
  }
  out.push_back({"o_proj", q, h});
  if (m.fused_gate_up) {
    out.push_back({"gate_up_proj", h, 2 * i});
  } else {
    out.push_back({"gate_proj", h, i});
    out.push_back({"up_proj", h, i});
  }
  out.push_back({"down_proj", i, h});
  return out;
}

std::vector<std::string> lora_target_modules(const RunConfig& cfg, const ModelInfo& model,
                                             std::string& error) {
  error.clear();
  const auto linears = decoder_linears(model);
  std::vector<std::string> names;
  for (const auto& l : linears) names.push_back(l.name);
  // LLaMA-Factory expands `all` only as the one entry; in a list it is a module name (none).
  if (cfg.lora_target.size() == 1 && cfg.lora_target.front() == "all") return names;
  std::vector<std::string> out;
  for (const auto& t : cfg.lora_target) {
    if (std::find(names.begin(), names.end(), t) == names.end()) {
      std::string known;
      for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
      error = "'" + t + "' is not a linear layer of " + model.architecture +
              "'s decoder layers (" + known + ", or all)";
      return {};
    }
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(t);
  }
  return out;
}

std::vector<std::string> additional_target_parameters(const RunConfig& cfg, const ModelInfo& model,
                                                      std::string& error) {
  error.clear();
  std::vector<std::string> out;
  const auto params = all_parameters(model);
  std::string lora_error;
  const auto adapted = lora_target_modules(cfg, model, lora_error);
  for (const auto& t : cfg.additional_target) {
    if ((t == "lm_head" || t == "embed_tokens") && model.tie_word_embeddings) {
      // PEFT trains a copy of the module, which unties it from the other one: a model studio-train
      // cannot hold (its tied LM head is the embedding matrix itself).
      error = "'" + t + "': this model ties its LM head to the embeddings (tie_word_embeddings), "
              "and PEFT would train an untied copy of one of them; train the adapters only, or "
              "use finetuning_type full or freeze (freeze_extra_modules: embed_tokens)";
      return {};
    }
    if (std::find(adapted.begin(), adapted.end(), t) != adapted.end()) {
      error = "'" + t + "' has LoRA adapters (lora_target): a module is trained either through "
              "an adapter or whole";
      return {};
    }
    // PEFT's modules_to_save: every module whose path ends with the name (so `norm` takes every
    // layer's norms as well as the final one).
    bool any = false;
    for (const auto& [name, n] : params) {
      if (!ends_with(module_path(name), t)) continue;
      any = true;
      if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
    }
    if (!any) {
      error = "'" + t + "' names no module of this model (embed_tokens, lm_head, norm, a "
              "layer's norms, ...)";
      return {};
    }
  }
  return out;
}

int64_t lora_parameter_count(const RunConfig& cfg, const ModelInfo& model) {
  std::string error;
  const auto targets = lora_target_modules(cfg, model, error);
  int64_t per_layer = 0;
  for (const auto& l : decoder_linears(model))
    if (std::find(targets.begin(), targets.end(), l.name) != targets.end())
      per_layer += cfg.lora_rank * (l.in + l.out) + (cfg.use_dora ? l.out : 0);
  return per_layer * model.num_layers;
}

std::vector<int64_t> freeze_trained_layers(const RunConfig& cfg, const ModelInfo& model) {
  std::vector<int64_t> out;
  const int64_t n = model.num_layers, k = cfg.freeze_trainable_layers;
  if (k > 0)
    for (int64_t i = std::max<int64_t>(0, n - k); i < n; ++i) out.push_back(i);
  else
    for (int64_t i = 0; i < std::min(n, -k); ++i) out.push_back(i);
  return out;
}

namespace {

// base_parameter_trained's rule with what it needs worked out once (the additional_target
// parameters, the freeze patterns), for the loops over every parameter.
class TrainedRule {
 public:
  TrainedRule(const RunConfig& cfg, const ModelInfo& model) : type_(cfg.finetuning_type) {
    std::string error;
    if (type_ == FinetuningType::Lora) whole_ = additional_target_parameters(cfg, model, error);
    if (type_ == FinetuningType::Freeze) patterns_ = freeze_patterns(cfg, model);
  }
  bool operator()(const std::string& name) const {
    // Stage rm's value head is always trained (TRL's head, added after the adapters).
    if (name.rfind("v_head.", 0) == 0) return true;
    switch (type_) {
      case FinetuningType::Full:
        return true;
      case FinetuningType::Lora:
        return std::find(whole_.begin(), whole_.end(), name) != whole_.end();
      case FinetuningType::Freeze:
        for (const auto& pattern : patterns_)
          if (name.find(pattern) != std::string::npos) return true;
        return false;
    }
    return true;
  }

 private:
  FinetuningType type_;
  std::vector<std::string> whole_, patterns_;
};

}  // namespace

bool base_parameter_trained(const RunConfig& cfg, const ModelInfo& model, const std::string& name) {
  return TrainedRule(cfg, model)(name);
}

TrainedCount trained_parameter_count(const RunConfig& cfg, const ModelInfo& model) {
  TrainedCount c;
  c.total = model.parameter_count();
  if (cfg.finetuning_type == FinetuningType::Full) {
    c.trained = c.total;
    return c;
  }
  const TrainedRule trained(cfg, model);
  for (const auto& [name, n] : all_parameters(model))
    if (trained(name)) c.trained += n;
  if (cfg.finetuning_type == FinetuningType::Lora) {
    const int64_t adapters = lora_parameter_count(cfg, model);
    c.trained += adapters;
    c.total += adapters;
  }
  return c;
}

int64_t quant4_weight_bytes(int64_t n, int64_t blocksize, bool double_quant) {
  const int64_t blocks = (n + blocksize - 1) / blocksize;
  const int64_t packed = (n + 1) / 2;
  if (!double_quant) return packed + 4 * blocks;
  return packed + blocks + 4 * ((blocks + 255) / 256) + 4 * 256;
}

namespace {

// llm_int8_skip_modules' patterns, each compiled once (a pattern that is no regex is taken as
// written).
class SkipPatterns {
 public:
  explicit SkipPatterns(const std::vector<std::string>& patterns) {
    for (const auto& key : patterns) {
      if (key.empty()) continue;
      std::optional<std::regex> re;
      try {
        re.emplace(key);
      } catch (const std::regex_error&) {
      }
      keys_.push_back({key, std::move(re)});
    }
  }

  bool empty() const { return keys_.empty(); }

  bool skips(const std::string& full_name) const {
    for (const auto& [key, re] : keys_) {
      if (full_name.size() >= key.size() &&
          full_name.compare(full_name.size() - key.size(), key.size(), key) == 0)
        return true;
      // re.match(key + boundary): some prefix ending at a module boundary matches key whole.
      for (size_t len = 1; len <= full_name.size(); ++len) {
        const bool boundary =
            len == full_name.size() || full_name[len] == '.' || full_name[len - 1] == '.';
        if (!boundary) continue;
        const std::string prefix = full_name.substr(0, len);
        if (re ? std::regex_match(prefix, *re) : prefix == key) return true;
      }
    }
    return false;
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::regex>>> keys_;
};

}  // namespace

bool bnb_skips_module(const std::string& full_name, const std::vector<std::string>& patterns) {
  return SkipPatterns(patterns).skips(full_name);
}

QuantizedBase quantized_base(const RunConfig& cfg, const ModelInfo& model) {
  QuantizedBase q;
  const bool disk = model.bnb_4bit_on_disk();
  if (!disk && (!cfg.quantized() || *cfg.quantization_bit != 4)) return q;
  const bool double_quant = disk ? model.quantization.double_quant : cfg.double_quantization;
  const SkipPatterns skip(disk ? model.quantization.skip_modules : std::vector<std::string>{});
  const auto linears = decoder_linears(model);
  for (int64_t i = 0; i < model.num_layers; ++i)
    for (const auto& l : linears) {
      const bool attention = l.name == "q_proj" || l.name == "k_proj" || l.name == "v_proj" ||
                             l.name == "o_proj" || l.name == "qkv_proj";
      if (!skip.empty() && skip.skips("model.layers." + std::to_string(i) +
                                      (attention ? ".self_attn." : ".mlp.") + l.name))
        continue;
      q.params += l.in * l.out;
      q.bytes += quant4_weight_bytes(l.in * l.out, 64, double_quant);
    }
  return q;
}

int64_t largest_trained_layer(const RunConfig& cfg, const ModelInfo& model) {
  if (cfg.finetuning_type == FinetuningType::Full) {
    int64_t most = 0;
    for (int64_t i = 0; i < model.num_layers; ++i)
      most = std::max(most, model.layer_parameter_count(i));
    return most;
  }
  const auto in_layer = layer_parameters(model);
  const int64_t adapters =
      cfg.finetuning_type == FinetuningType::Lora && model.num_layers > 0
          ? lora_parameter_count(cfg, model) / model.num_layers
          : 0;
  const TrainedRule trained(cfg, model);
  int64_t most = 0;
  for (int64_t layer = 0; layer < model.num_layers; ++layer) {
    int64_t n = adapters;
    for (const auto& [name, count] : in_layer)
      if (trained("model.layers." + std::to_string(layer) + "." + name))
        n += count;
    most = std::max(most, n);
  }
  return most;
}

}  // namespace studio
