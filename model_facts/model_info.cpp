#include "studio/model_facts/model_info.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include <nlohmann/json.hpp>

#include "studio/base/json_file.h"
#include "studio/base/whole_number.h"

namespace studio {
namespace {

const std::vector<std::string>& architectures() {
  static const std::vector<std::string> v = {
      "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
      "Phi3ForCausalLM",  "GlmForCausalLM",     "Glm4ForCausalLM",  "Gemma2ForCausalLM",
      "Gemma3ForCausalLM", "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM"};
  return v;
}

// Sizes, counts and token ids: what transformers and the tokenizer hold them in (torch takes
// int64 shapes, but no model has a dimension or an id past int32).
constexpr WholeRange kConfigWhole = WholeRange::of<int32_t>();

template <typename T>
bool get(const nlohmann::json& j, const char* key, T& out, std::string& error, bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) error = std::string("'") + key + "' is missing";
    return !required;
  }
  // Whole numbers exactly and within range (get<int64_t>() would truncate 4096.5 and wrap
  // 2^64 - 1 to -1).
  auto whole = [&](const nlohmann::json& v, int64_t& into, const std::string& where) {
    std::string problem = json_whole(v, into, kConfigWhole);
    if (!problem.empty()) error = "'" + where + "': " + problem;
    return problem.empty();
  };
  if constexpr (std::is_same_v<T, int64_t>) {
    return whole(*it, out, key);
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    if (!it->is_array())
      return error = std::string("'") + key + "' has the wrong type (" + it->type_name() + ")",
             false;
    out.assign(it->size(), 0);
    for (size_t i = 0; i < it->size(); ++i)
      if (!whole((*it)[i], out[i], std::string(key) + "[" + std::to_string(i) + "]")) return false;
    return true;
  }
  try {
    out = it->get<T>();
    return true;
  } catch (const nlohmann::json::exception&) {
    error = std::string("'") + key + "' has the wrong type (" + it->type_name() + ")";
    return false;
  }
}

bool get_optional(const nlohmann::json& j, const char* key, std::optional<int64_t>& out,
                  std::string& error) {
  int64_t v = 0;
  if (!get(j, key, v, error, false)) return false;
  if (j.contains(key) && !j.at(key).is_null()) out = v;
  return true;
}

// eos_token_id is one id in most configs and a list in some (Llama 3.1 Instruct).
bool get_ids(const nlohmann::json& j, const char* key, std::vector<int64_t>& out,
             std::string& error) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return true;
  if (!it->is_number()) return get(j, key, out, error, false);
  out.assign(1, 0);
  return get(j, key, out.front(), error, false);
}

// Mistral applies sliding_window whenever it is set; Qwen2/Qwen3 only with use_sliding_window.
bool get_sliding_window(const nlohmann::json& j, ModelInfo& m, std::string& error) {
  bool use = m.architecture.rfind("Qwen", 0) != 0;  // transformers' Qwen configs: false
  if (!get(j, "use_sliding_window", use, error, false)) return false;
  int64_t window = 0;
  if (!get(j, "sliding_window", window, error, false)) return false;
  m.sliding_window = use ? window : 0;
  return true;
}

// Which rope_scaling keys HF requires per type (its _validate_*_parameters); the others have
// defaults in RopeScaling.
// Phi-3's longrope: both factor lists (one value per rotating frequency), the pretraining context
// (in the rope section or, in older configs, at the top), factor and attention_factor as HF
// derives them when absent.
bool fill_longrope(const nlohmann::json& rs, const nlohmann::json& top, ModelInfo& m,
                   std::string& error) {
  RopeScaling& r = m.rope;
  bool ok = get(rs, "short_factor", r.short_factor, error, true) &&
            get(rs, "long_factor", r.long_factor, error, true);
  if (ok && !get(rs, "original_max_position_embeddings", r.original_max_position_embeddings,
                 error, false))
    ok = false;
  if (ok && r.original_max_position_embeddings == 0)
    ok = get(top, "original_max_position_embeddings", r.original_max_position_embeddings, error,
             true);
  double attention_factor = 0;
  if (ok && rs.contains("attention_factor") && !rs.at("attention_factor").is_null()) {
    ok = get(rs, "attention_factor", attention_factor, error, true);
    r.attention_factor = attention_factor;
  }
  if (ok && rs.contains("factor") && !rs.at("factor").is_null())
    ok = get(rs, "factor", r.factor, error, true);
  else if (ok && r.original_max_position_embeddings > 0)
    r.factor = double(m.max_position_embeddings) / double(r.original_max_position_embeddings);
  if (!ok) return error = "rope_scaling (longrope): " + error, false;
  const size_t pairs = size_t(m.rotary_dim() / 2);
  if (r.short_factor.size() != pairs || r.long_factor.size() != pairs)
    return error = "rope_scaling (longrope): short_factor and long_factor need " +
                   std::to_string(pairs) + " values each (rotary dimensions / 2), found " +
                   std::to_string(r.short_factor.size()) + " and " +
                   std::to_string(r.long_factor.size()),
           false;
  if (r.original_max_position_embeddings <= 0)
    return error = "rope_scaling (longrope): original_max_position_embeddings must be positive",
           false;
  return true;
}

bool fill_rope(const nlohmann::json& rs, const nlohmann::json& top, ModelInfo& m,
               std::string& error) {
  auto t = rs.find("rope_type");
  if (t == rs.end() || t->is_null()) t = rs.find("type");
  if (t == rs.end() || !t->is_string()) return true;
  m.rope_scaling = t->get<std::string>();
  if (m.rope_scaling == "default") m.rope_scaling.clear();
  const std::string& type = m.rope_scaling;
  const bool yarn = type == "yarn", llama3 = type == "llama3";
  RopeScaling& r = m.rope;
  if (type == "longrope") return fill_longrope(rs, top, m, error);
  if (!yarn && !llama3 && type != "linear" && type != "dynamic") return true;
  bool ok = get(rs, "original_max_position_embeddings", r.original_max_position_embeddings, error,
                llama3) &&
            get(rs, "factor", r.factor, error, !yarn || r.original_max_position_embeddings == 0);
  if (ok && llama3)
    ok = get(rs, "low_freq_factor", r.low_freq_factor, error, true) &&
         get(rs, "high_freq_factor", r.high_freq_factor, error, true);
  if (ok && yarn) {
    // The newest HF derives a missing yarn factor from the two context lengths.
    if (rs.find("factor") == rs.end() || rs.at("factor").is_null())
      r.factor = double(m.max_position_embeddings) / double(r.original_max_position_embeddings);
    double attention_factor = 0;
    ok = get(rs, "beta_fast", r.beta_fast, error, false) &&
         get(rs, "beta_slow", r.beta_slow, error, false) &&
         get(rs, "mscale", r.mscale, error, false) &&
         get(rs, "mscale_all_dim", r.mscale_all_dim, error, false) &&
         get(rs, "truncate", r.truncate, error, false);
    if (ok && rs.contains("attention_factor") && !rs.at("attention_factor").is_null()) {
      ok = get(rs, "attention_factor", attention_factor, error, true);
      r.attention_factor = attention_factor;
    }
    // HF reads these with `or`: an explicit 0 means the default as well.
    if (r.beta_fast == 0) r.beta_fast = 32.0;
    if (r.beta_slow == 0) r.beta_slow = 1.0;
  }
  if (!ok) return error = "rope_scaling (" + type + "): " + error, false;
  if (r.factor <= 0) return error = "rope_scaling.factor must be positive", false;
  if (llama3 && r.low_freq_factor >= r.high_freq_factor)
    return error = "rope_scaling.low_freq_factor must be below high_freq_factor", false;
  return true;
}

// transformers 5 writes rope_parameters (rope_theta and partial_rotary_factor inside); older
// ones rope_scaling, with those two at the top. Gemma 3 has one section per layer type
// (full_attention, sliding_attention): the full layers' is the model's RoPE, the sliding
// layers' must be plain RoPE with its own base.
bool fill_rope_section(const nlohmann::json& j, ModelInfo& m, std::string& error) {
  if (!get(j, "partial_rotary_factor", m.partial_rotary_factor, error, false)) return false;
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    auto rs = j.find(key);
    if (rs == j.end() || !rs->is_object()) continue;
    const nlohmann::json* section = &*rs;
    if (rs->contains("full_attention") && rs->at("full_attention").is_object()) {
      section = &rs->at("full_attention");
      if (auto local = rs->find("sliding_attention"); local != rs->end() && local->is_object()) {
        std::string type = local->value("rope_type", std::string("default"));
        if (type != "default")
          return error = std::string(key) + ".sliding_attention: rope_type " + type +
                         " is not supported for the sliding layers (allowed: default)",
                 false;
        if (!get(*local, "rope_theta", m.rope_local_theta, error, false)) return false;
      }
    }
    if (!get(*section, "rope_theta", m.rope_theta, error, false) ||
        !get(*section, "partial_rotary_factor", m.partial_rotary_factor, error, false))
      return false;
    return fill_rope(*section, j, m, error);
  }
  return true;
}

// layer_types (transformers 5 writes it for Qwen2, Mistral, Gemma, ...): which layers use the
// sliding window. Absent: every layer (Gemma: fill_gemma's pattern).
bool fill_layer_types(const nlohmann::json& j, ModelInfo& m, std::string& error) {
  std::vector<std::string> types;
  if (!get(j, "layer_types", types, error, false)) return false;
  if (types.empty()) {
    // Qwen3-MoE: the window, when in effect, applies in every layer.
    if (m.architecture == "Qwen3MoeForCausalLM") return true;
    int64_t first = 0;
    if (!get(j, "max_window_layers", first, error, false)) return false;
    if (m.architecture == "Qwen2MoeForCausalLM") {
      // Qwen2-MoE derives layer_types differently: even layers below max_window_layers (28).
      if (!j.contains("max_window_layers")) first = 28;
      if (m.sliding_window > 0) {
        m.sliding_layers.assign(size_t(m.num_layers), false);
        for (int64_t i = 0; i < m.num_layers; ++i)
          m.sliding_layers[size_t(i)] = (i + 1) % 2 != 0 && i < first;
      }
      return true;
    }
    // Older Qwen2 configs: the window applies from layer max_window_layers on (HF derives
    // layer_types so).
    if (m.sliding_window > 0 && j.contains("max_window_layers")) {
      m.sliding_layers.assign(size_t(m.num_layers), false);
      for (int64_t i = first; i < m.num_layers; ++i) m.sliding_layers[size_t(i)] = true;
    }
    return true;
  }
  if (types.size() != size_t(m.num_layers))
    return error = "layer_types has " + std::to_string(types.size()) + " entries for " +
                   std::to_string(m.num_layers) + " layers",
           false;
  m.sliding_layers.assign(types.size(), false);
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i] != "sliding_attention" && types[i] != "full_attention")
      return error = "layer_types[" + std::to_string(i) + "] " + types[i] +
                     " is not supported (allowed: sliding_attention, full_attention)",
             false;
    m.sliding_layers[i] = types[i] == "sliding_attention";
  }
  return true;
}

// Gemma 2/3: layer_types (or, in older Gemma 3 configs, sliding_window_pattern: every n-th
// layer global) and the Gemma specifics; Gemma 2 also by its default pattern (odd layers
// global).
bool fill_gemma(const nlohmann::json& j, ModelInfo& m, std::string& error) {
  m.norm_layout = ModelInfo::NormLayout::GemmaSandwich;
  m.gemma_norm = true;
  m.embedding_multiplier = std::sqrt(double(m.hidden_size));
  double query_pre_attn_scalar = double(m.head_dim);
  if (!get(j, "hidden_activation", m.hidden_act, error, false) ||
      !get(j, "query_pre_attn_scalar", query_pre_attn_scalar, error, false) ||
      !get(j, "attn_logit_softcapping", m.attn_logit_softcapping, error, false) ||
      !get(j, "final_logit_softcapping", m.final_logit_softcapping, error, false))
    return false;
  if (query_pre_attn_scalar <= 0) return error = "query_pre_attn_scalar must be positive", false;
  m.attention_scale = 1.0 / std::sqrt(query_pre_attn_scalar);
  // sliding_window itself was read with the other decoder fields (Gemma has no
  // use_sliding_window, so it applies as written).
  if (m.sliding_layers.empty()) {  // no layer_types: the pattern (every n-th layer global)
    int64_t pattern = m.architecture == "Gemma2ForCausalLM" ? 2 : 6;
    if (!get(j, "sliding_window_pattern", pattern, error, false)) return false;
    m.sliding_layers.assign(size_t(m.num_layers), false);
    for (int64_t i = 0; i < m.num_layers; ++i)
      m.sliding_layers[size_t(i)] = pattern > 0 && (i + 1) % pattern != 0;
  }
  bool bidirectional = false;
  if (!get(j, "use_bidirectional_attention", bidirectional, error, false)) return false;
  if (bidirectional)
    return error = "use_bidirectional_attention is true: only causal language models train here",
           false;
  return true;
}

// Qwen2-MoE / Qwen3-MoE: the experts, their routing and the auxiliary loss's settings
// (transformers' Qwen2MoeConfig / Qwen3MoeConfig defaults where a key is absent).
bool fill_moe(const nlohmann::json& j, ModelInfo& m, std::string& error) {
  const bool qwen2 = m.architecture == "Qwen2MoeForCausalLM";
  m.num_experts = qwen2 ? 60 : 128;
  m.num_experts_per_tok = qwen2 ? 4 : 8;
  m.moe_intermediate_size = qwen2 ? 1408 : 768;
  m.shared_expert_intermediate_size = qwen2 ? 5632 : 0;
  // transformers 5 writes Qwen3-MoE's num_experts as num_local_experts (its attribute_map).
  if (!j.contains("num_experts") &&
      !get(j, "num_local_experts", m.num_experts, error, false))
    return false;
  if (!get(j, "num_experts", m.num_experts, error, false) ||
      !get(j, "num_experts_per_tok", m.num_experts_per_tok, error, false) ||
      !get(j, "moe_intermediate_size", m.moe_intermediate_size, error, false) ||
      !get(j, "norm_topk_prob", m.norm_topk_prob, error, false) ||
      !get(j, "decoder_sparse_step", m.decoder_sparse_step, error, false) ||
      !get(j, "mlp_only_layers", m.mlp_only_layers, error, false) ||
      !get(j, "output_router_logits", m.output_router_logits, error, false) ||
      !get(j, "router_aux_loss_coef", m.router_aux_loss_coef, error, false))
    return false;
  if (qwen2 && !get(j, "shared_expert_intermediate_size", m.shared_expert_intermediate_size,
                    error, false))
    return false;
  if (m.num_experts < 0 || m.decoder_sparse_step < 1 || m.moe_intermediate_size < 0 ||
      m.shared_expert_intermediate_size < 0)
    return error = "num_experts, moe_intermediate_size and shared_expert_intermediate_size must "
                   "not be negative, decoder_sparse_step must be at least 1",
           false;
  if (m.num_experts > 0 && (m.num_experts_per_tok < 1 || m.num_experts_per_tok > m.num_experts))
    return error = "num_experts_per_tok (" + std::to_string(m.num_experts_per_tok) +
                   ") must be between 1 and num_experts (" + std::to_string(m.num_experts) + ")",
           false;
  if (m.num_experts > 0 && m.moe_intermediate_size == 0)
    return error = "moe_intermediate_size must be positive", false;
  if (m.router_aux_loss_coef < 0) return error = "router_aux_loss_coef must not be negative", false;
  return true;
}

// quantization_config as transformers writes it (QuantizationConfigMixin.to_dict).
bool fill_quantization(const nlohmann::json& j, ModelInfo& m, std::string& error) {
  const auto it = j.find("quantization_config");
  if (it == j.end() || it->is_null()) return true;
  if (!it->is_object())
    return error = "'quantization_config' has the wrong type (" + std::string(it->type_name()) + ")",
           false;
  DiskQuantization& q = m.quantization;
  if (!get(*it, "quant_method", q.method, error, true))
    return error = "quantization_config: " + error, false;
  if (q.method.empty()) return error = "quantization_config: 'quant_method' is empty", false;
  bool ok = true;
  if (q.method == "bitsandbytes") {
    bool four = false, eight = false;
    ok = get(*it, "load_in_4bit", four, error, false) && get(*it, "load_in_8bit", eight, error, false) &&
         get(*it, "bnb_4bit_quant_type", q.quant_type, error, false) &&
         get(*it, "bnb_4bit_use_double_quant", q.double_quant, error, false) &&
         get(*it, "bnb_4bit_quant_storage", q.storage, error, false) &&
         get(*it, "llm_int8_skip_modules", q.skip_modules, error, false);
    q.skip_modules_given = it->contains("llm_int8_skip_modules") && !(*it)["llm_int8_skip_modules"].is_null();
    if (ok && four == eight)
      return error = "quantization_config: bitsandbytes with load_in_4bit " +
                     std::string(four ? "and" : "nor") + " load_in_8bit",
             false;
    q.bits = four ? 4 : 8;
    if (ok && four && q.quant_type.empty()) q.quant_type = "fp4";  // BitsAndBytesConfig's default
  } else if (it->contains("bits")) {
    int64_t bits = 0;
    ok = get(*it, "bits", bits, error, false);
    q.bits = static_cast<int>(bits);
  }
  if (!ok) error = "quantization_config: " + error;
  return ok;
}

bool fill_decoder_fields(const nlohmann::json& j, ModelInfo& m, std::string& error) {
  return get(j, "rms_norm_eps", m.rms_norm_eps, error, false) &&
         get(j, "hidden_act", m.hidden_act, error, false) &&
         get(j, "attention_dropout", m.attention_dropout, error, false) &&
         get(j, "initializer_range", m.initializer_range, error, false) &&
         get_optional(j, "bos_token_id", m.bos_token_id, error) &&
         get_optional(j, "pad_token_id", m.pad_token_id, error) &&
         get_ids(j, "eos_token_id", m.eos_token_ids, error) && get_sliding_window(j, m, error);
}

bool fill(const nlohmann::json& j, ModelInfo& m, std::string& error) {
  if (!j.is_object()) return error = "the file does not hold a JSON object", false;
  std::vector<std::string> archs;
  if (!get(j, "architectures", archs, error, true) || archs.empty())
    return error = error.empty() ? "'architectures' is empty" : error, false;
  m.architecture = archs.front();
  // A wrapper this engine does not build (a multimodal folder keeps its text model's shapes
  // under text_config): say which architecture, not which shape key is missing.
  if (!is_supported_architecture(m.architecture) && !j.contains("hidden_size"))
    return error = "architecture " + m.architecture + " is not supported (allowed: " +
                   supported_architectures() + ")" +
                   (j.contains("text_config") ? "; its text model's settings are under "
                                                "text_config: a multimodal folder"
                                              : ""),
           false;
  bool ok = get(j, "model_type", m.model_type, error, false) &&
            get(j, "hidden_size", m.hidden_size, error, true) &&
            get(j, "intermediate_size", m.intermediate_size, error, true) &&
            get(j, "num_hidden_layers", m.num_layers, error, true) &&
            get(j, "num_attention_heads", m.num_heads, error, true) &&
            get(j, "vocab_size", m.vocab_size, error, true) &&
            get(j, "max_position_embeddings", m.max_position_embeddings, error, false) &&
            get(j, "tie_word_embeddings", m.tie_word_embeddings, error, false) &&
            get(j, "rope_theta", m.rope_theta, error, false) &&
            get(j, "torch_dtype", m.torch_dtype, error, false);
  if (!ok) return false;
  m.num_kv_heads = m.num_heads;
  m.head_dim = m.num_heads > 0 ? m.hidden_size / m.num_heads : 0;
  if (!get(j, "num_key_value_heads", m.num_kv_heads, error, false) ||
      !get(j, "head_dim", m.head_dim, error, false) ||
      !get(j, "attention_bias", m.qkv_bias, error, false) ||
      !get(j, "mlp_bias", m.mlp_bias, error, false))
    return false;
  // Which biases each HF architecture builds: LLaMA honours attention_bias (q/k/v/o) and
  // mlp_bias; Qwen3 attention_bias only; Qwen2 has q/k/v biases always and none else; Mistral
  // none at all, whatever its config says.
  const std::string& a = m.architecture;
  if (a != "LlamaForCausalLM") m.mlp_bias = false;
  if (a == "MistralForCausalLM") m.qkv_bias = false;
  m.o_bias = m.qkv_bias;
  if (a == "Qwen2ForCausalLM") m.qkv_bias = true, m.o_bias = false;
  if (a == "Qwen2MoeForCausalLM") {  // q/k/v biases with qkv_bias (default true), o_proj none
    m.qkv_bias = true;
    if (!get(j, "qkv_bias", m.qkv_bias, error, false)) return false;
    m.o_bias = false;
  }
  m.qk_norm = a == "Qwen3ForCausalLM" || a == "Gemma3ForCausalLM" || a == "Qwen3MoeForCausalLM";
  if ((a == "Qwen2MoeForCausalLM" || a == "Qwen3MoeForCausalLM") && !fill_moe(j, m, error))
    return false;
  // Phi-3/Phi-4 have no biases; GLM q/k/v biases with attention_bias (o_proj none); Gemma
  // honours attention_bias on all four.
  if (a == "Phi3ForCausalLM") m.qkv_bias = m.o_bias = false, m.fused_qkv = true;
  if (a == "GlmForCausalLM" || a == "Glm4ForCausalLM") {
    m.o_bias = false;
    m.rope_interleaved = true;
    m.partial_rotary_factor = 0.5;  // HF's default when the config does not say
  }
  m.fused_gate_up = a == "Phi3ForCausalLM" || a == "GlmForCausalLM" || a == "Glm4ForCausalLM";
  if (a == "Glm4ForCausalLM") m.norm_layout = ModelInfo::NormLayout::Glm4Sandwich;
  if (!fill_decoder_fields(j, m, error) || !fill_rope_section(j, m, error) ||
      !fill_layer_types(j, m, error) || !fill_quantization(j, m, error))
    return false;
  const bool gemma = a == "Gemma2ForCausalLM" || a == "Gemma3ForCausalLM";
  if (gemma && !fill_gemma(j, m, error)) return false;
  if (m.partial_rotary_factor <= 0 || m.partial_rotary_factor > 1)
    return error = "partial_rotary_factor must be in (0, 1]", false;
  if (m.hidden_size <= 0 || m.num_heads <= 0 || m.num_layers <= 0 || m.vocab_size <= 0 ||
      m.num_kv_heads <= 0 || m.head_dim <= 0)
    return error = "sizes must be positive", false;
  if (m.num_heads % m.num_kv_heads != 0)
    return error = "num_attention_heads (" + std::to_string(m.num_heads) +
                   ") is not a multiple of num_key_value_heads (" +
                   std::to_string(m.num_kv_heads) + ")",
           false;
  return true;
}

}  // namespace

bool ModelInfo::is_moe_layer(int64_t layer) const {
  if (num_experts <= 0) return false;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end())
    return false;
  return (layer + 1) % std::max<int64_t>(1, decoder_sparse_step) == 0;
}

int64_t ModelInfo::moe_layer_count() const {
  int64_t n = 0;
  for (int64_t i = 0; i < num_layers; ++i) n += is_moe_layer(i) ? 1 : 0;
  return n;
}

namespace {

// Parameters of one layer (MoE or dense), with `experts` of an MoE layer's experts counted.
int64_t count_layer(const ModelInfo& m, bool moe, int64_t experts) {
  const int64_t h = m.hidden_size, q = m.num_heads * m.head_dim, kv = m.num_kv_heads * m.head_dim;
  int64_t attn = h * q + 2 * h * kv + q * h;
  if (m.qkv_bias) attn += q + 2 * kv;
  if (m.o_bias) attn += h;
  if (m.qk_norm) attn += 2 * m.head_dim;
  const int64_t norms = m.norms_per_layer() * h;
  if (!moe) {
    int64_t dense = 3 * h * m.intermediate_size;
    if (m.mlp_bias) dense += 2 * m.intermediate_size + h;
    return attn + dense + norms;
  }
  // Router, the experts, the shared expert and its one-output gate.
  int64_t sparse = m.num_experts * h + experts * 3 * h * m.moe_intermediate_size;
  if (m.shared_expert_intermediate_size > 0)
    sparse += 3 * h * m.shared_expert_intermediate_size + h;
  return attn + sparse + norms;
}

// Parameters of the model, with `experts` of each MoE layer's experts counted (all of them, or
// the ones a token passes through).
int64_t count_parameters(const ModelInfo& m, int64_t experts) {
  int64_t layers = 0;
  for (int64_t i = 0; i < m.num_layers; ++i) layers += count_layer(m, m.is_moe_layer(i), experts);
  const int64_t embed = m.vocab_size * m.hidden_size;
  return embed * (m.tie_word_embeddings ? 1 : 2) + layers + m.hidden_size;
}

}  // namespace

int64_t ModelInfo::parameter_count() const { return count_parameters(*this, num_experts); }

int64_t ModelInfo::layer_parameter_count(int64_t layer) const {
  return count_layer(*this, is_moe_layer(layer), num_experts);
}

int64_t ModelInfo::active_parameter_count() const {
  return count_parameters(*this, num_experts_per_tok);
}

int64_t ModelInfo::rotary_dim() const {
  return static_cast<int64_t>(double(head_dim) * partial_rotary_factor);
}

int64_t ModelInfo::layer_window(int64_t layer) const {
  if (sliding_window <= 0) return 0;
  if (sliding_layers.empty()) return sliding_window;
  return layer >= 0 && size_t(layer) < sliding_layers.size() && sliding_layers[size_t(layer)]
             ? sliding_window
             : 0;
}

std::string decoder_support_error(const ModelInfo& info) {
  if (!is_supported_architecture(info.architecture))
    return "architecture " + info.architecture + " is not supported (allowed: " +
           supported_architectures() + ")";
  if (info.hidden_act != "silu" && info.hidden_act != "gelu_pytorch_tanh")
    return "hidden_act " + info.hidden_act + " is not supported (allowed: silu, gelu_pytorch_tanh)";
  const std::string& r = info.rope_scaling;
  if (!r.empty() && r != "linear" && r != "dynamic" && r != "llama3" && r != "yarn" &&
      r != "longrope")
    return "rope_scaling type " + r + " is not supported (allowed: default, linear, dynamic, "
           "llama3, yarn, longrope)";
  if (info.rotary_dim() % 2 != 0 || info.rotary_dim() <= 0)
    return "the rotary dimensions (" + std::to_string(info.rotary_dim()) +
           " = head_dim x partial_rotary_factor) are odd: rotary embeddings need pairs";
  return "";
}

bool is_supported_architecture(const std::string& architecture) {
  const auto& v = architectures();
  return std::find(v.begin(), v.end(), architecture) != v.end();
}

std::string supported_architectures() {
  std::string out;
  for (const auto& a : architectures()) out += (out.empty() ? "" : ", ") + a;
  return out;
}

std::optional<ModelInfo> read_model_info(const std::string& dir_or_file, std::string& error) {
  std::string path = dir_or_file;
  if (path.size() < 11 || path.compare(path.size() - 11, 11, "config.json") != 0)
    path += (path.empty() || path.back() == '/' ? "" : "/") + std::string("config.json");
  nlohmann::json j;
  if (!read_json_file(path, j, error)) return std::nullopt;
  ModelInfo m;
  if (!fill(j, m, error)) {
    error = path + ": " + error;
    return std::nullopt;
  }
  return m;
}

std::optional<ModelInfo> parse_model_info(const std::string& json_text, std::string& error) {
  const nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return error = "malformed JSON", std::nullopt;
  ModelInfo m;
  if (!fill(j, m, error)) return std::nullopt;
  return m;
}

std::string format_size(const ModelInfo& m) {
  std::string out = format_count(m.parameter_count());
  if (m.is_moe())
    out += " (" + format_count(m.active_parameter_count()) + " active, top-" +
           std::to_string(m.num_experts_per_tok) + " of " + std::to_string(m.num_experts) +
           " experts)";
  return out;
}

std::string format_count(int64_t n) {
  const char* units[] = {"", "K", "M", "B", "T"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1000.0 && u < 4) v /= 1000.0, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f%s" : (v < 10 ? "%.2f%s" : (v < 100 ? "%.1f%s" : "%.0f%s")), v, units[u]);
  return buf;
}

}  // namespace studio
