#include "studio/config/model_info.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include <nlohmann/json.hpp>

#include "studio/config/json_file.h"

namespace studio {
namespace {

const std::vector<std::string>& architectures() {
  static const std::vector<std::string> v = {"LlamaForCausalLM", "MistralForCausalLM",
                                             "Qwen2ForCausalLM", "Qwen3ForCausalLM"};
  return v;
}

template <typename T>
bool get(const nlohmann::json& j, const char* key, T& out, std::string& error, bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) error = std::string("'") + key + "' is missing";
    return !required;
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
  if (it->is_number_integer()) return out = {it->get<int64_t>()}, true;
  return get(j, key, out, error, false);
}

// Mistral applies sliding_window whenever it is set; Qwen2/Qwen3 only with use_sliding_window.
bool get_sliding_window(const nlohmann::json& j, ModelInfo& m, std::string& error) {
  bool use = true;
  if (!get(j, "use_sliding_window", use, error, false)) return false;
  int64_t window = 0;
  if (!get(j, "sliding_window", window, error, false)) return false;
  m.sliding_window = use ? window : 0;
  return true;
}

// Which rope_scaling keys HF requires per type (its _validate_*_parameters); the others have
// defaults in RopeScaling.
bool fill_rope(const nlohmann::json& rs, ModelInfo& m, std::string& error) {
  auto t = rs.find("rope_type");
  if (t == rs.end() || t->is_null()) t = rs.find("type");
  if (t == rs.end() || !t->is_string()) return true;
  m.rope_scaling = t->get<std::string>();
  if (m.rope_scaling == "default") m.rope_scaling.clear();
  const std::string& type = m.rope_scaling;
  const bool yarn = type == "yarn", llama3 = type == "llama3";
  if (!yarn && !llama3 && type != "linear" && type != "dynamic") return true;
  RopeScaling& r = m.rope;
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

// transformers 5 writes rope_parameters (rope_theta inside); older ones rope_scaling.
bool fill_rope_section(const nlohmann::json& j, ModelInfo& m, std::string& error) {
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    auto rs = j.find(key);
    if (rs == j.end() || !rs->is_object()) continue;
    if (!get(*rs, "rope_theta", m.rope_theta, error, false)) return false;
    return fill_rope(*rs, m, error);
  }
  return true;
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
  m.qk_norm = m.architecture == "Qwen3ForCausalLM";
  if (!fill_decoder_fields(j, m, error) || !fill_rope_section(j, m, error)) return false;
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

int64_t ModelInfo::parameter_count() const {
  const int64_t q = num_heads * head_dim, kv = num_kv_heads * head_dim;
  int64_t attn = hidden_size * q + 2 * hidden_size * kv + q * hidden_size;
  if (qkv_bias) attn += q + 2 * kv;
  if (o_bias) attn += hidden_size;
  if (qk_norm) attn += 2 * head_dim;
  int64_t mlp = 3 * hidden_size * intermediate_size;
  if (mlp_bias) mlp += 2 * intermediate_size + hidden_size;
  const int64_t layer = attn + mlp + 2 * hidden_size;
  const int64_t embed = vocab_size * hidden_size;
  return embed * (tie_word_embeddings ? 1 : 2) + num_layers * layer + hidden_size;
}

std::string decoder_support_error(const ModelInfo& info) {
  if (!is_supported_architecture(info.architecture))
    return "architecture " + info.architecture + " is not supported (allowed: " +
           supported_architectures() + ")";
  if (info.hidden_act != "silu")
    return "hidden_act " + info.hidden_act + " is not supported (allowed: silu)";
  const std::string& r = info.rope_scaling;
  if (!r.empty() && r != "linear" && r != "dynamic" && r != "llama3" && r != "yarn")
    return "rope_scaling type " + r + " is not supported (allowed: default, linear, dynamic, "
           "llama3, yarn)";
  if (info.head_dim % 2 != 0)
    return "head_dim " + std::to_string(info.head_dim) + " is odd: rotary embeddings need pairs";
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
