#pragma once
// What a Hugging Face model folder's config.json says about the model: enough for validation
// (head divisibility under SP), the memory estimate and the wizard's model page.
#include <cstdint>
#include <optional>
#include <string>

namespace studio {

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
  bool mlp_bias = false;
  bool qk_norm = false;      // Qwen3: per-head RMSNorm on q and k
  double rope_theta = 10000.0;
  std::string rope_scaling;  // "", linear, dynamic, llama3, yarn, ...
  std::string torch_dtype;

  int64_t parameter_count() const;
};

// Architectures whose decoder the engine implements.
bool is_supported_architecture(const std::string& architecture);
std::string supported_architectures();

// Reads `dir`/config.json (or a config.json path). On failure returns nullopt and sets `error`
// to a message naming the file, and the line for malformed JSON.
std::optional<ModelInfo> read_model_info(const std::string& dir_or_file, std::string& error);

// "7.62B", "494M", "1.2K"
std::string format_count(int64_t n);

}  // namespace studio
