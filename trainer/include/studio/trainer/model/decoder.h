#pragma once
// The Hugging Face decoder family the engine trains, built from config.json's ModelInfo:
// LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM (q/k/v biases), Qwen3ForCausalLM
// (per-head q_norm/k_norm before RoPE), Phi3ForCausalLM (Phi-3, Phi-4: fused qkv_proj and
// gate_up_proj, partial rotary, longrope), GlmForCausalLM and Glm4ForCausalLM (fused
// gate_up_proj, interleaved partial rotary; GLM-4 with sandwich norms), Gemma2ForCausalLM and
// Gemma3ForCausalLM (text): Gemma norms (1 + w), scaled embeddings, GELU-tanh MLP, sandwich
// norms, sliding-window and global layers (Gemma 3 with their own RoPE base), Gemma 2's
// attention and final logit soft-capping. Sliding windows apply wherever config.json sets them.
// Module and parameter names are Hugging Face's, so named_parameters() is the checkpoint's
// state dict: model.embed_tokens.weight, model.layers.{i}.self_attn.q_proj.weight, ...,
// model.norm.weight, lm_head.weight (absent when tie_word_embeddings).

#include <torch/torch.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "studio/model_facts/model_info.h"
#include "studio/trainer/model/activation_checkpoint.h"
#include "studio/trainer/model/attention.h"
#include "studio/trainer/model/layers.h"
#include "studio/trainer/model/mlp.h"
#include "studio/trainer/model/moe.h"
#include "studio/trainer/model/rope.h"

namespace studio::trainer {

struct ModelOptions {
  torch::Dtype dtype = torch::kFloat;  // parameters and activations (bf16 for training)
  torch::Device device = torch::kCPU;
  // Stage rm: a value head (v_head.summary) on the final hidden states, as TRL's
  // AutoModelForCausalLMWithValueHead that LLaMA-Factory's rm stage trains.
  bool value_head = false;
  // Receives each note about config.json settings the decoder does not apply
  // (attention_dropout), once, at construction. Unset: printed to stderr.
  std::function<void(const std::string&)> warn;
};

// Called around every decoder layer (sharded training, optim/zero.h): before and after its
// forward, and, when the forward records gradients, before its backward starts and once it is
// done (on the autograd thread). Called in layer order forward and reverse order backward, the
// same on every rank: the hooks may run collectives.
class LayerHooks {
 public:
  virtual ~LayerHooks() = default;
  virtual void before_forward(int64_t layer) = 0;
  virtual void after_forward(int64_t layer) = 0;
  virtual void before_backward(int64_t layer) = 0;
  virtual void after_backward(int64_t layer) = 0;
};

class KVCache;  // studio/trainer/model/kv_cache.h

// Everything a layer's forward needs besides its input, shared by all layers of one forward.
struct LayerContext {
  torch::Tensor cos{}, sin{};  // [B, S, rotary_dim] in the activation dtype
  // Gemma 3: the sliding layers' own cos/sin (rope_local_theta); undefined: cos/sin above.
  torch::Tensor cos_local{}, sin_local{};
  const AttentionFn* attention = nullptr;
  torch::Tensor segments{};  // neat packing: AttentionCall::segments
  LayerHooks* hooks = nullptr;
  int64_t mlp_tile_tokens = 0;  // tiled_mlp: rows per MLP tile (0: untiled)
  std::shared_ptr<ActivationOffload> offload{};  // checkpointed inputs in host memory (or null)
  // Incremental decoding (inference only): each layer appends its keys/values (after RoPE) and
  // attends to everything cached; the attention seam is bypassed. Null: none.
  KVCache* kv_cache = nullptr;
  // MoE models: the auxiliary loss of this forward (active between its begin and end), or null.
  MoeAuxLoss* moe_aux = nullptr;
};

// The long-sequence options of the forward (docs/LONG_CONTEXT.md).
struct LongContextOptions {
  bool offload_activations = false;  // with gradient checkpointing only
  bool tiled_mlp = false;
  double tiled_mlp_budget_bytes = 0;  // 0: the layer input's bytes (studio::tiled_mlp_tile_tokens)
};

class SelfAttentionImpl : public torch::nn::Module {
 public:
  SelfAttentionImpl(const studio::ModelInfo& info, const torch::TensorOptions& options,
                    int64_t layer);
  torch::Tensor forward(const torch::Tensor& x, const LayerContext& ctx, int64_t layer);

  Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  Linear qkv_proj{nullptr};                  // Phi-3: q, k, v in one (then the three are null)
  RMSNorm q_norm{nullptr}, k_norm{nullptr};  // Qwen3, Gemma 3 only

 private:
  int64_t heads_, kv_heads_, head_dim_;
  bool interleaved_;
  double scale_;
  double softcap_;   // Gemma 2 attn_logit_softcapping (0: none)
  int64_t window_;   // this layer's sliding window (0: the whole causal context)
  bool local_rope_;  // Gemma 3 sliding layer: LayerContext::cos_local/sin_local
};
TORCH_MODULE(SelfAttention);

// A residual block per sublayer, the norms as ModelInfo::NormLayout says:
// x + [attn_out](attn(attn_in(x))), then h + [mlp_out](mlp(mlp_in(h))).
class DecoderLayerImpl : public torch::nn::Module {
 public:
  DecoderLayerImpl(const studio::ModelInfo& info, const torch::TensorOptions& options,
                   int64_t layer);
  torch::Tensor forward(const torch::Tensor& x, const LayerContext& ctx, int64_t layer);

  SelfAttention self_attn{nullptr};
  MLP mlp{nullptr};
  SparseMoeBlock moe{nullptr};  // MoE layers (registered as `mlp`; then mlp is null)
  // Under their HF names: input_layernorm, post_attention_layernorm (PreNorm: before the MLP;
  // Gemma: after attention), post_self_attn_layernorm and post_mlp_layernorm (GLM-4),
  // pre_feedforward_layernorm and post_feedforward_layernorm (Gemma). Null where absent.
  RMSNorm attn_in{nullptr}, attn_out{nullptr}, mlp_in{nullptr}, mlp_out{nullptr};
};
TORCH_MODULE(DecoderLayer);

// HF's `model`: embeddings, layers, final norm.
class DecoderModelImpl : public torch::nn::Module {
 public:
  DecoderModelImpl(const studio::ModelInfo& info, const torch::TensorOptions& options);
  // Final-normed hidden states [B, S, hidden]; each layer is checkpointed when asked.
  torch::Tensor forward(const torch::Tensor& input_ids, const LayerContext& ctx,
                        bool checkpoint_layers);

  Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  RMSNorm norm{nullptr};

 private:
  double embedding_multiplier_ = 1.0;  // Gemma: sqrt(hidden_size)
};
TORCH_MODULE(DecoderModel);

// TRL's ValueHead without its dropout (the objective applies that, objective_rm.cpp): `summary`,
// a Linear(hidden, 1) with a bias; parameters v_head.summary.weight [1, hidden] and
// v_head.summary.bias [1].
class ValueHeadImpl : public torch::nn::Module {
 public:
  ValueHeadImpl(int64_t hidden, const torch::TensorOptions& options);
  // TRL's default: nn.Linear's own initialisation, U(-1/sqrt(hidden), 1/sqrt(hidden)) for the
  // weight and the bias, drawn on the CPU in fp32 from `seed`.
  void reset(uint64_t seed);
  // The scores of hidden rows [..., hidden], in fp32 whatever their dtype (TRL upcasts to the
  // head's fp32): [...].
  torch::Tensor forward(const torch::Tensor& rows);

  Linear summary{nullptr};
};
TORCH_MODULE(ValueHead);

// Whether a parameter name is a LoRA adapter's (lora_A, lora_B, DoRA's magnitude).
bool is_adapter_parameter(const std::string& name);

class CausalLMImpl : public torch::nn::Module {
 public:
  // Throws std::invalid_argument when decoder_support_error(info) names a problem.
  CausalLMImpl(const studio::ModelInfo& info, const ModelOptions& options = {});

  // input_ids and position_ids [B, S] (long). Position ids are global positions: under SP a
  // rank passes those of its own tokens. Returns the final-normed hidden states [B, S, hidden]
  // so that a chunked LM-head loss can run outside.
  torch::Tensor hidden_states(const torch::Tensor& input_ids, const torch::Tensor& position_ids);
  // hidden_states @ lm_head_weight^T: [B, S, vocab] in the model dtype; Gemma 2 soft-caps them
  // (final_logit_softcapping, which the losses take as well).
  torch::Tensor logits(const torch::Tensor& input_ids, const torch::Tensor& position_ids);
  // lm_head.weight, or model.embed_tokens.weight itself when tied.
  torch::Tensor lm_head_weight() const;
  // Incremental decoding, under no-grad: input_ids [B, S] continue the sequences `cache` holds
  // (positions cache.length() ...), which then holds them too. Returns the fp32 logits of the
  // last position [B, vocab]. Equal to logits() of the whole sequence at that position.
  torch::Tensor decode_step(const torch::Tensor& input_ids, KVCache& cache);

  // HF names -> parameters, in HF's state-dict order; no lm_head entry when tied. The LoRA
  // adapters' parameters (lora.h) are not among them: adapter_state() lists those, under the
  // names PEFT gives them in its files less the "base_model.model." prefix
  // (model.layers.0.self_attn.q_proj.lora_A.weight, ...).
  std::vector<std::pair<std::string, torch::Tensor>> hf_state();
  std::vector<std::pair<std::string, torch::Tensor>> adapter_state();
  std::map<std::string, std::vector<int64_t>> expected_shapes();
  // Copies every parameter from get(name) (any dtype/device; converted). `get` throws for a
  // missing tensor; a shape mismatch throws std::runtime_error naming the tensor.
  void load_hf_state(const std::function<torch::Tensor(const std::string& name)>& get);
  // HF's _init_weights: linear and embedding weights ~ N(0, initializer_range) (the padding
  // row zeroed), norms 1, biases 0. Deterministic for a seed, whatever the device and dtype.
  void init_weights(uint64_t seed);

  void set_gradient_checkpointing(bool on) { checkpointing_ = on; }
  bool gradient_checkpointing() const { return checkpointing_; }
  // Installs the attention every layer calls (SP modes, kernels); an empty fn restores local.
  void set_attention(AttentionFn fn);
  // dynamic rope_scaling only: the global sequence length the frequencies are stretched to
  // (0: max(position_ids) + 1, which is right without SP only).
  void set_rope_sequence_length(int64_t global_len) { rope_seq_len_ = global_len; }
  // Neat packing: the sample index of every token of the global batch [B, S_global] (-1 on
  // padding), which every attention call isolates samples by; undefined: no isolation.
  void set_attention_segments(torch::Tensor segments) { segments_ = std::move(segments); }
  // Sharded training: called around every layer (null: none). Not owned.
  void set_layer_hooks(LayerHooks* hooks) { hooks_ = hooks; }
  void set_long_context(const LongContextOptions& options) { long_context_ = options; }
  const LongContextOptions& long_context() const { return long_context_; }

  const studio::ModelInfo& info() const { return info_; }
  // MoE models: the auxiliary loss every forward between its begin() and end() records (the
  // trainer drives it); null for dense models.
  MoeAuxLoss* moe_aux() { return moe_aux_.get(); }

  DecoderModel model{nullptr};
  Linear lm_head{nullptr};  // null when tied
  ValueHead v_head{nullptr};  // ModelOptions::value_head only

 private:
  const RopeFrequencies& frequencies(const torch::Tensor& position_ids);
  // cos/sin of both RoPE kinds (the local ones only for Gemma 3) for a forward.
  void fill_rope(LayerContext& ctx, const torch::Tensor& position_ids, c10::ScalarType act);

  studio::ModelInfo info_;
  torch::Dtype dtype_;
  AttentionFn attention_;
  RopeFrequencies freqs_, local_freqs_;
  int64_t freqs_len_ = -1;  // the dynamic length freqs_ was computed for
  int64_t rope_seq_len_ = 0;
  torch::Tensor segments_;
  LayerHooks* hooks_ = nullptr;
  std::unique_ptr<MoeAuxLoss> moe_aux_;
  bool checkpointing_ = false;
  LongContextOptions long_context_;
};
TORCH_MODULE(CausalLM);

}  // namespace studio::trainer
