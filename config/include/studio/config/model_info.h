#pragma once
// What a Hugging Face model folder's config.json says about the model: enough for validation
// (head divisibility under SP), the memory estimate and the wizard's model page.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace studio {

// config.json's rope_scaling with Hugging Face's defaults filled in (transformers'
// modeling_rope_utils.py); the type itself is ModelInfo::rope_scaling.
struct RopeScaling {
  double factor = 1.0;           // linear, dynamic, llama3, yarn: the context extension factor
  double low_freq_factor = 1.0;  // llama3: wavelengths above original/low_freq_factor are scaled
  double high_freq_factor = 4.0;  // llama3: wavelengths below original/high_freq_factor are kept
  // llama3 (required) and yarn (0 = absent: max_position_embeddings is used): the pretraining
  // context the scaling extends.
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32.0;       // yarn: rotations bounding pure extrapolation (HF: `or 32`)
  double beta_slow = 1.0;        // yarn: rotations bounding pure interpolation (HF: `or 1`)
  double mscale = 0.0;           // yarn: 0 = absent; with mscale_all_dim, the attention factor is
  double mscale_all_dim = 0.0;   //   their get_mscale ratio (DeepSeek convention)
  std::optional<double> attention_factor;  // yarn: cos/sin multiplier; absent = derived
  bool truncate = true;          // yarn: floor/ceil the correction range
};

struct ModelInfo {
  std::string architecture;  // e.g. Qwen2ForCausalLM
  std::string model_type;    // e.g. qwen2
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;     // Qwen2 always; LLaMA/Qwen3 when attention_bias
  bool o_bias = false;       // LLaMA/Qwen3 when attention_bias (Qwen2's o_proj has none)
  bool mlp_bias = false;     // LLaMA only (mlp_bias)
  bool qk_norm = false;      // Qwen3: per-head RMSNorm on q and k
  double rope_theta = 10000.0;
  // "" (none; config.json's "default" too), linear, dynamic, llama3, yarn; any other value is
  // kept as written so that the engine can name it when it refuses it.
  std::string rope_scaling;
  RopeScaling rope;          // its parameters, meaningful for the type above
  std::string torch_dtype;
  double rms_norm_eps = 1e-6;       // HF LlamaConfig/Qwen2Config default
  std::string hidden_act = "silu";  // the decoder implements silu only
  double attention_dropout = 0.0;   // training ignores it (required under SP)
  double initializer_range = 0.02;  // std of the normal init of linear and embedding weights
  // Sliding-window attention in effect (0 = none): Mistral's sliding_window, Qwen2's only with
  // use_sliding_window. The decoder attends to the full causal context and says so.
  int64_t sliding_window = 0;
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // config.json holds one id or a list
  std::optional<int64_t> pad_token_id;

  int64_t parameter_count() const;
};

// Why the engine's decoder cannot run this model, or "" when it can: architecture, hidden_act
// and rope_scaling type are checked (read_model_info accepts any of them, for validation).
std::string decoder_support_error(const ModelInfo& info);

// Architectures whose decoder the engine implements.
bool is_supported_architecture(const std::string& architecture);
std::string supported_architectures();

// Reads `dir`/config.json (or a config.json path). On failure returns nullopt and sets `error`
// to a message naming the file, and the line for malformed JSON.
std::optional<ModelInfo> read_model_info(const std::string& dir_or_file, std::string& error);
// The same from config.json's text; `error` names no file.
std::optional<ModelInfo> parse_model_info(const std::string& json_text, std::string& error);

// "7.62B", "494M", "1.2K"
std::string format_count(int64_t n);

}  // namespace studio
