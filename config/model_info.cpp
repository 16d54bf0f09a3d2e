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
  if (m.architecture == "Qwen2ForCausalLM") m.qkv_bias = true;
  m.qk_norm = m.architecture == "Qwen3ForCausalLM";
  if (auto rs = j.find("rope_scaling"); rs != j.end() && rs->is_object()) {
    auto t = rs->find("rope_type");
    if (t == rs->end()) t = rs->find("type");
    if (t != rs->end() && t->is_string()) m.rope_scaling = t->get<std::string>();
  }
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
  if (qk_norm) attn += 2 * head_dim;
  int64_t mlp = 3 * hidden_size * intermediate_size;
  if (mlp_bias) mlp += 2 * intermediate_size + hidden_size;
  const int64_t layer = attn + mlp + 2 * hidden_size;
  const int64_t embed = vocab_size * hidden_size;
  return embed * (tie_word_embeddings ? 1 : 2) + num_layers * layer + hidden_size;
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
