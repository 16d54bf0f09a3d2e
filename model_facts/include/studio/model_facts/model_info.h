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
  // longrope (Phi-3 128k, Phi-4-mini): per-frequency divisors, the long set for sequences
  // longer than original_max_position_embeddings (required), the short set otherwise; the
  // attention factor defaults to sqrt(1 + ln(factor) / ln(original)), factor to
  // max_position_embeddings / original.
  std::vector<double> short_factor, long_factor;
};

// config.json's quantization_config: how a checkpoint quantized on disk stores its weights
// (transformers' save_pretrained of a quantized model). method "" = not quantized.
struct DiskQuantization {
  std::string method;         // quant_method: bitsandbytes, gptq, awq, aqlm, hqq, fp8, ...
  int bits = 0;               // bitsandbytes: 4 (load_in_4bit) or 8 (load_in_8bit); others' "bits"
  std::string quant_type;     // bitsandbytes 4-bit: bnb_4bit_quant_type (nf4 | fp4)
  bool double_quant = false;  // bitsandbytes 4-bit: bnb_4bit_use_double_quant
  std::string storage = "uint8";  // bitsandbytes 4-bit: bnb_4bit_quant_storage
  // llm_int8_skip_modules: patterns of module names left unquantized (transformers'
  // should_convert_module). When the config has none (null), transformers leaves the output
  // embeddings (lm_head) unquantized; a list given replaces that default.
  std::vector<std::string> skip_modules;
  bool skip_modules_given = false;
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
  bool qk_norm = false;      // Qwen3, Gemma 3: per-head RMSNorm on q and k
  // Phi-3/Phi-4 keep q, k and v in one qkv_proj [q + 2 kv, hidden]; Phi-3 and GLM keep gate and
  // up in one gate_up_proj [2 intermediate, hidden] (gate first). Parameter names are HF's.
  bool fused_qkv = false;
  bool fused_gate_up = false;
  // The share of each head's dimensions that rotates (HF partial_rotary_factor: GLM 0.5,
  // Phi-4-mini 0.75); the first rotary_dim() dimensions rotate, the rest pass unchanged.
  double partial_rotary_factor = 1.0;
  // GLM: dimension pairs (2i, 2i+1) rotate together (HF's interleaved rotate_half), not halves.
  bool rope_interleaved = false;
  // Where each layer normalises (HF module names in brackets):
  //   PreNorm (LLaMA, Mistral, Qwen, Phi-3, GLM): x + attn(ln(x)) [input_layernorm], then
  //     h + mlp(ln(h)) [post_attention_layernorm];
  //   Glm4Sandwich: x + ln(attn(ln(x))) [input_layernorm, post_self_attn_layernorm], then
  //     h + ln(mlp(ln(h))) [post_attention_layernorm, post_mlp_layernorm];
  //   GemmaSandwich: the same order, named input_layernorm, post_attention_layernorm,
  //     pre_feedforward_layernorm, post_feedforward_layernorm.
  enum class NormLayout { PreNorm, Glm4Sandwich, GemmaSandwich };
  NormLayout norm_layout = NormLayout::PreNorm;
  // Gemma: every RMSNorm computes (x * rsqrt(mean(x^2) + eps)) * (1 + weight) in fp32 and its
  // weights start at 0; the embeddings are multiplied by sqrt(hidden_size) (in their dtype).
  bool gemma_norm = false;
  double embedding_multiplier = 1.0;
  // Attention scores are q k^T * attention_scale (0: head_dim^-0.5; Gemma:
  // query_pre_attn_scalar^-0.5), then, when attn_logit_softcapping > 0 (Gemma 2), c * tanh(s / c).
  double attention_scale = 0.0;
  double attn_logit_softcapping = 0.0;
  // Gemma 2: the LM head's logits become c * tanh(logits / c), in the loss too.
  double final_logit_softcapping = 0.0;
  // Gemma 2/3 layer_types: which layers attend through the sliding window (true) and which to
  // the whole context. Empty: every layer uses sliding_window (when > 0).
  std::vector<bool> sliding_layers;
  // Gemma 3: the sliding layers' own RoPE base (default rope, no scaling); 0: as the others.
  double rope_local_theta = 0.0;
  double rope_theta = 10000.0;
  // "" (none; config.json's "default" too), linear, dynamic, llama3, yarn; any other value is
  // kept as written so that the engine can name it when it refuses it.
  std::string rope_scaling;
  RopeScaling rope;          // its parameters, meaningful for the type above
  std::string torch_dtype;
  double rms_norm_eps = 1e-6;       // HF LlamaConfig/Qwen2Config default
  std::string hidden_act = "silu";  // silu, or gelu_pytorch_tanh (Gemma's hidden_activation)
  double attention_dropout = 0.0;   // training ignores it (required under SP)
  double initializer_range = 0.02;  // std of the normal init of linear and embedding weights
  // Sliding-window attention in effect (0 = none): Mistral's, Phi-3's and Gemma's
  // sliding_window, Qwen2's only with use_sliding_window. Query i sees key j iff
  // i - window < j <= i (HF's sliding mask), in every layer or those of sliding_layers.
  int64_t sliding_window = 0;
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // config.json holds one id or a list
  std::optional<int64_t> pad_token_id;
  // Mixture of experts (Qwen2MoeForCausalLM, Qwen3MoeForCausalLM); num_experts 0: dense. An MoE
  // layer's `mlp` is a router (`gate`, [num_experts, hidden]) picking num_experts_per_tok
  // experts per token by softmax probability (renormalised over the picked ones with
  // norm_topk_prob), each a gated MLP of moe_intermediate_size; Qwen2-MoE adds a shared expert
  // of shared_expert_intermediate_size scaled by sigmoid(shared_expert_gate(x)). Layer i is an
  // MoE layer unless it is in mlp_only_layers or (i + 1) % decoder_sparse_step != 0; the others
  // keep a dense MLP of intermediate_size.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0;  // Qwen2-MoE only (0: none)
  bool norm_topk_prob = false;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  // The auxiliary load-balancing loss transformers adds when output_router_logits is true
  // (LLaMA-Factory's moe_aux_loss_coef sets both): router_aux_loss_coef x aux.
  bool output_router_logits = false;
  double router_aux_loss_coef = 0.001;
  DiskQuantization quantization;  // quantization_config (method "" = none)

  // At least one MoE layer (num_experts > 0 and not every layer dense).
  bool is_moe() const { return moe_layer_count() > 0; }
  bool is_moe_layer(int64_t layer) const;
  int64_t moe_layer_count() const;

  // Every parameter (all experts, for memory).
  int64_t parameter_count() const;
  // The parameters one token passes through (MoE: num_experts_per_tok experts per layer);
  // parameter_count() for dense models.
  int64_t active_parameter_count() const;
  // The parameters of decoder layer `layer` (an MoE layer with all its experts).
  int64_t layer_parameter_count(int64_t layer) const;
  // Rotating dimensions of a head: head_dim * partial_rotary_factor (HF's int()).
  int64_t rotary_dim() const;
  // The window layer `layer` attends through (0: the whole causal context).
  int64_t layer_window(int64_t layer) const;
  // Norms per decoder layer (2, or 4 with a sandwich layout).
  int norms_per_layer() const { return norm_layout == NormLayout::PreNorm ? 2 : 4; }
  bool quantized_on_disk() const { return !quantization.method.empty(); }
  // bitsandbytes' 4-bit format (nf4/fp4), the one quantized checkpoint the engine loads.
  bool bnb_4bit_on_disk() const {
    return quantization.method == "bitsandbytes" && quantization.bits == 4;
  }
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
// The model's size as people quote it: "7.62B"; MoE: "30.5B (3.35B active, top-8 of 128
// experts)".
std::string format_size(const ModelInfo& m);

}  // namespace studio
