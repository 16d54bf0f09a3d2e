// The per-GPU memory estimate: what studio-train's engine (trainer/) keeps on one GPU, term by
// term, ZeRO sharding and offload included (trainer/optim/zero.cpp), with the reference
// formulas (performance-anchors.md, "Memory per GPU") quoted beside. docs/MEMORY_ESTIMATE.md
// derives every term from the engine's code.
#include "studio/config/memory_estimate.h"

#include "studio/config/adapters.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace studio {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// 209032 -> "209,032"
std::string grouped(double value) {
  std::string digits = std::to_string(static_cast<long long>(value + 0.5));
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3)
    digits.insert(static_cast<size_t>(i), ",");
  return digits;
}

// The sequence-parallel grid of a config: Ulysses degree x ring degree = sp.
struct SpShape {
  int64_t sp = 1, ulysses = 1, ring = 1;
};

SpShape sp_shape(const RunConfig& c) {
  const int64_t sp = std::max<int64_t>(1, c.sequence_parallel_size);
  switch (c.sequence_parallel_mode) {
    case SpMode::ZigzagRing:
      return {sp, 1, sp};
    case SpMode::Ulysses:
      return {sp, sp, 1};
    case SpMode::Usp:
      break;
  }
  const int64_t u = std::clamp<int64_t>(c.sequence_parallel_ulysses_degree, 1, sp);
  return {sp, u, sp / u};
}

// What the global length is padded to (trainer/sp/layout.cpp sp_pad_multiple): two chunks per
// ring rank for the zigzag, one per rank for a pure Ulysses group.
int64_t pad_multiple(const SpShape& s) {
  if (s.sp == 1) return 1;
  return s.ring == 1 ? s.ulysses : 2 * s.sp;
}

// The precision settings as the engine applies them (trainer/train_setup.cpp compute_dtype,
// trainer/optim/zero.cpp): weights in the compute dtype, fp32 masters (the weights themselves
// for an unsharded fp32 model), fp32 gradients, fp32 AdamW m and v.
struct Precision {
  double value = 4;  // bytes of one activation or weight value (bf16 2, fp32 4)
  bool mixed = false;
};

Precision precision_of(const RunConfig& c) {
  if (c.bf16 || c.pure_bf16 || c.fp16) return {2, true};
  return {4, false};
}

class Estimator {
 public:
  Estimator(const RunConfig& cfg, const ModelInfo& m, const EstimateOptions& opt)
      : cfg_(cfg), m_(m), opt_(opt), p_(precision_of(cfg)), sp_(sp_shape(cfg)) {
    h_ = double(m.hidden_size);
    hq_ = double(m.num_heads * m.head_dim);
    // Ulysses with fewer K/V heads than ranks replicates each K/V head (trainer/sp/ulysses.cpp):
    // K and V are then this much larger on every rank from the all-to-all on.
    const double kv_rep = sp_.ulysses > 1 && m.num_kv_heads % sp_.ulysses != 0
                              ? double(sp_.ulysses) / double(m.num_kv_heads)
                              : 1.0;
    hkv_ = double(m.num_kv_heads * m.head_dim) * kv_rep;
    f_ = double(m.intermediate_size);
    vocab_ = double(m.vocab_size);
    layers_ = double(m.num_layers);
    // finetuning_type lora / freeze (config/adapters.h): the adapters add parameters, and only
    // the trained ones have gradients, masters and AdamW states.
    const TrainedCount counted = trained_parameter_count(cfg, m);
    params_ = double(counted.total);
    trained_ = double(counted.trained);
    // Stage rm: the value head (v_head.summary: hidden weights and a bias), trained with the rest.
    if (cfg.stage == Stage::Rm) params_ += h_ + 1, trained_ += h_ + 1;
    embeddings_trained_ = base_parameter_trained(cfg, m, "model.embed_tokens.weight");
    head_trained_ = m.tie_word_embeddings ? embeddings_trained_
                                          : base_parameter_trained(cfg, m, "lm_head.weight");
    trained_layer_params_ = double(largest_trained_layer(cfg, m));
    embed_params_ = vocab_ * h_;
    const double embeddings =
        embed_params_ * (m.tie_word_embeddings ? 1 : 2) + (cfg.stage == Stage::Rm ? h_ + 1 : 0);
    // The largest decoder layer (an MoE layer with all its experts, where there are any).
    for (int64_t i = 0; i < m.num_layers; ++i)
      layer_params_ = std::max(layer_params_, double(m.layer_parameter_count(i)));
    moe_layers_ = double(m.moe_layer_count());
    world_ = std::max(1, opt.world_size());
    zero_req_ = zero_request(cfg, opt.deepspeed);
    zero_ = std::clamp(zero_req_.stage, 0, 3);
    outer_params_ = embeddings + h_;
    // The largest unit the engine reduces or gathers at once: a decoder layer, or one of the
    // outer weights (embeddings, LM head), each a unit of its own.
    unit_params_ = std::max(layer_params_, embed_params_);
  }

  MemoryEstimate run() {
    est_.world_size = world_;
    est_.sp_size = static_cast<int>(sp_.sp);
    est_.ulysses_degree = static_cast<int>(sp_.ulysses);
    est_.ring_degree = static_cast<int>(sp_.ring);
    est_.capacity_bytes = opt_.gpu_capacity_bytes;
    model_states();
    reference();
    tokens();
    activations();
    logits();
    sp_buffers();
    zero_buffers();
    loss_beyond_backward();
    end_of_backward();
    optimizer_step();
    closing_notes();
    return est_;
  }

 private:
  void note(std::string text) { est_.notes.push_back(std::move(text)); }
  MemoryBreakdown& b() { return est_.bytes; }

  // Per rank, as trainer/optim/zero.cpp holds them: pieces are 1/N of every parameter (N the
  // world from stage 1 on; the last piece padded, which the estimate ignores).
  void model_states() {
    const double n = zero_ >= 1 ? world_ : 1, e = p_.value, P = params_, T = trained_;
    const bool off_opt = zero_ >= 1 && zero_req_.offload_optimizer;
    const bool off_param = zero_ >= 3 && zero_req_.offload_param;
    // Weights: whole below stage 3; at stage 3 only the gathered ones: the embeddings, final
    // norm and LM head for a whole micro-batch, two decoder layers (the running one and the
    // prefetched next); DPO's reference adds its own outer weights while it runs.
    // The policy's layers are released when the reference runs; its outer weights are not.
    const double gathered = e * (outer_params_ + 2 * layer_params_) +
                            (reference_runs() && !reference_is_base() ? e * outer_params_ : 0);
    gathered_ = zero_ >= 3 ? gathered : 0;
    // Frozen weights (lora's base, freeze's frozen layers) have no master: at stage 3 their
    // pieces are kept in the compute dtype (in host memory with offload_param).
    const double frozen_pieces = zero_ >= 3 ? e * (P - T) / n : 0;
    // QLoRA: the decoder's linear weights in 4 bits (whole on every rank; ZeRO-3 is refused).
    const QuantizedBase quant = quantized_base(cfg_, m_);
    const double weights = zero_ >= 3 ? (off_param ? 0 : frozen_pieces)
                                      : e * (P - double(quant.params)) + double(quant.bytes);
    if (quant.params > 0)
      note("QLoRA: the decoder's linear weights (" + format_count(quant.params) +
           " parameters) "
           "are held in 4 bits (" +
           cfg_.quantization_type + (cfg_.double_quantization ? ", double quantization" : "") +
           "): " + format_gib(double(quant.bytes)) + " instead of " +
           format_gib(e * double(quant.params)) + "; each layer's are dequantized where it runs.");
    // Masters: an unsharded fp32 model's weights are its masters.
    const double masters = zero_ == 0 ? (p_.mixed ? 4 * T : 0) : 4 * T / n;
    const double grads = zero_ >= 2 ? 4 * T / n : 4 * T;
    const double adam = 8 * T / n;
    const double host =
        (off_opt ? masters + adam + (zero_ >= 2 ? grads : 0) : 0) + (off_param ? frozen_pieces : 0);
    b().weights = weights + (zero_ >= 3 ? gathered : 0);
    b().gradients = zero_ >= 2 && off_opt ? 0 : grads;
    b().optimizer = off_opt ? 0 : masters + adam;
    est_.zero_stage = zero_;
    est_.offloaded_bytes = host;
    // A background checkpoint's host copies (the masters of every saved tensor in fp32; each
    // rank's AdamW pieces, rank 0's alone at stage 0).
    const double saved = cfg_.finetuning_type == FinetuningType::Lora ? 4 * T : 4 * P;
    const double adam_file = cfg_.save_only_model ? 0 : 8 * T / n;
    est_.checkpoint_host_bytes_rank0 = saved + adam_file;
    est_.checkpoint_host_bytes_other = zero_ >= 1 ? adam_file : 0;
    est_.model_state_bytes = weights + b().gradients + b().optimizer;
    est_.bytes_per_param = (weights + b().gradients + b().optimizer) / P;
    if (T < P)
      note(std::string(to_string(cfg_.finetuning_type)) + ": " +
           format_count(static_cast<int64_t>(T)) + " of the " +
           format_count(static_cast<int64_t>(P)) + " parameters are trained" +
           (cfg_.finetuning_type == FinetuningType::Lora
                ? " (the adapters" + (cfg_.additional_target.empty()
                                          ? std::string(")")
                                          : std::string(" and additional_target)"))
                : std::string()) +
           ": only they have gradients, fp32 masters and AdamW states; the frozen weights are "
           "held in the compute dtype" +
           (zero_ >= 3 ? std::string(", cut into pieces at ZeRO-3") : std::string()) + ".");
    const double unsharded = e * P + (p_.mixed ? 4 * T : 0) + 4 * T + 8 * T;
    if (cfg_.bf16 || cfg_.fp16 || cfg_.pure_bf16)
      note(std::string(cfg_.fp16 ? "fp16 (which studio-train refuses: it has no loss scaling; "
                                   "estimated as bf16)"
                       : cfg_.pure_bf16 ? "pure_bf16 (which studio-train refuses: it keeps fp32 "
                                          "masters and states; estimated as bf16)"
                                        : "bf16") +
           ": bf16 weights (2 B/param), fp32 gradients (4, summed over micro-batches and ranks "
           "in fp32), fp32 masters and AdamW m and v (12): 18 B/param unsharded; the reference "
           "formula (bf16 gradients) says 16.");
    else
      note(
          "fp32: the weights are the masters (4 B/param), gradients 4, AdamW m and v 8: "
          "16 B/param unsharded, and every activation value takes 4 B.");
    if (zero_ == 0) {
      if (world_ > 1)
        note("No ZeRO: each of the " + std::to_string(world_) +
             " ranks holds the whole model "
             "states (" +
             format_gib(unsharded) +
             "); zero_stage (or a DeepSpeed JSON) shards them "
             "over the ranks.");
      return;
    }
    const std::string N = std::to_string(world_);
    const char* what = zero_ == 1 ? "the masters and AdamW states are"
                       : zero_ == 2
                           ? "the masters, AdamW states and gradients are"
                           : "the weights (as their fp32 masters), gradients and AdamW states are";
    note("ZeRO-" + std::to_string(zero_) + ": " + what + " cut into " + N +
         " pieces, one per "
         "rank of the whole world (data x sequence parallel): " +
         grouped(est_.bytes_per_param * 100) + "/100 B/param on the GPU" +
         (host > 0 ? " and " + format_gib(host) + " in host memory" : std::string()) +
         " (unsharded: " + format_gib(unsharded) + " per rank).");
    if (zero_ >= 3)
      note(
          "ZeRO-3 gathers weights in the compute dtype as they are used: the embeddings, final "
          "norm and LM head (" +
          format_count(static_cast<int64_t>(outer_params_)) +
          " parameters) for each micro-batch, and two decoder layers at a time (" +
          format_count(static_cast<int64_t>(layer_params_)) + " parameters each)" +
          (reference_runs() && !reference_is_base()
               ? std::string("; while the reference runs, its own embeddings and head and "
                             "two of its layers")
               : std::string()) +
          ": " + format_gib(gathered) + ", counted in the weights.");
    if (off_opt)
      note(std::string("offload_optimizer: the fp32 masters, AdamW states") +
           (zero_ >= 2 ? " and gradient pieces" : "") +
           " live in pinned host memory and the update runs there (studio-train's CPU AdamW)" +
           (zero_ == 1 ? "; the whole fp32 gradients stay on the GPU until the step" : "") + ".");
    if (off_param)
      note(
          "offload_param: the weight pieces are the fp32 masters, already in host memory; only "
          "the gathered layers are on the GPU.");
  }

  // A frozen reference model runs next to the policy: DPO's (unless its log-probs are
  // precomputed; orpo and simpo have none) and ASFT's.
  bool asft() const { return cfg_.stage == Stage::Sft && cfg_.use_asft_loss; }
  bool reference_runs() const {
    return cfg_.uses_reference() && (asft() || !cfg_.precompute_ref_logps);
  }
  // finetuning_type lora without ref_model or additional_target: the reference is the policy
  // with its adapters off (trainer/train_setup.cpp), no second copy.
  bool reference_is_base() const {
    return cfg_.finetuning_type == FinetuningType::Lora && !cfg_.ref_model &&
           cfg_.additional_target.empty();
  }

  void reference() {
    if (cfg_.stage == Stage::Dpo && !cfg_.uses_reference()) {
      note("pref_loss: " + std::string(to_string(cfg_.pref_loss)) +
           " needs no reference model: 0 B.");
      return;
    }
    if (!cfg_.uses_reference()) return;
    if ((cfg_.stage == Stage::Dpo || cfg_.stage == Stage::Kto) && cfg_.precompute_ref_logps) {
      note(
          "precompute_ref_logps: the reference model computes its log-probs before training "
          "and is then dropped: 0 B during training.");
      return;
    }
    if (reference_is_base()) {
      note(std::string(asft()                     ? "ASFT"
                       : cfg_.stage == Stage::Kto ? "KTO"
                                                  : "DPO") +
           " reference: the base model with the LoRA adapters switched off (PEFT's "
           "disable_adapter): no second copy of the weights, 0 B.");
      return;
    }
    const bool sharded = zero_ >= 3, offloaded = sharded && zero_req_.offload_param;
    // The reference has no adapters: the base model's parameters.
    const double base = cfg_.finetuning_type == FinetuningType::Lora
                            ? params_ - double(lora_parameter_count(cfg_, m_))
                            : params_;
    // A quantized run's reference copy is quantized too.
    const QuantizedBase quant = quantized_base(cfg_, m_);
    const double whole = p_.value * (base - double(quant.params)) + double(quant.bytes);
    const double bytes = sharded ? p_.value * base / world_ : whole;
    b().reference = offloaded ? 0 : bytes;
    est_.model_state_bytes += b().reference;
    if (offloaded) est_.offloaded_bytes += bytes;
    note(std::string(asft()                     ? "ASFT"
                     : cfg_.stage == Stage::Kto ? "KTO"
                                                : "DPO") +
         " reference model: a frozen copy in the compute dtype (" + grouped(p_.value) +
         " B/param)" +
         (offloaded ? std::string(", its ZeRO-3 pieces in host memory like the weights")
          : sharded ? std::string(", cut into pieces like the weights under ZeRO-3")
                    : std::string()) +
         ".");
  }

  // dynamic_padding_free (SFT): each micro-batch is one row of up to batch x cutoff_len tokens,
  // its samples isolated.
  bool packed_micro_batches() const {
    return cfg_.stage == Stage::Sft && cfg_.batching_strategy == Batching::DynamicPaddingFree;
  }

  void tokens() {
    const int64_t batch = std::max<int64_t>(1, cfg_.per_device_train_batch_size);
    const int64_t rows = packed_micro_batches() ? 1 : batch * (cfg_.pairwise() ? 2 : 1);
    const int64_t multiple = pad_multiple(sp_);
    const int64_t cutoff =
        std::max<int64_t>(1, cfg_.cutoff_len) * (packed_micro_batches() ? batch : 1);
    const int64_t padded = (cutoff + multiple - 1) / multiple * multiple;
    tokens_ = rows * padded / sp_.sp;
    est_.tokens_per_rank = tokens_;
    std::string text = "Tokens per rank: " + std::to_string(rows) + " row" + (rows > 1 ? "s" : "") +
                       (packed_micro_batches() ? " of per_device_train_batch_size x cutoff_len "
                                               : " of cutoff_len ") +
                       std::to_string(cutoff);
    if (padded != cutoff)
      text += " (padded to " + std::to_string(padded) + ", a multiple of " +
              std::to_string(multiple) + ", as the engine pads for sequence parallelism)";
    if (sp_.sp > 1) text += " / SP " + std::to_string(sp_.sp);
    text += " = " + grouped(double(tokens_)) + "; every row is taken as full-length";
    if (cfg_.pairwise())
      text += std::string(" (") + (cfg_.stage == Stage::Dpo ? "DPO" : "RM") +
              ": the chosen and rejected rows of each pair)";
    if (cfg_.stage == Stage::Kto)
      text +=
          " (KTO: the example's row; its KL row runs without gradients, as do the "
          "reference's)";
    if (cfg_.stage == Stage::Sft && cfg_.dynamic_batching())
      text += std::string(" (") + std::string(to_string(cfg_.batching_strategy)) +
              ": each micro-batch holds at most per_device_train_batch_size x cutoff_len = " +
              grouped(double(batch * std::max<int64_t>(1, cfg_.cutoff_len))) + " tokens" +
              (packed_micro_batches() ? ", packed into one row" : ", padded") + ")";
    note(text + ".");
  }

  // Bytes one decoder layer keeps for its backward per local token: what autograd saves in
  // trainer/model/decoder.cpp and layers.cpp.
  double layer_bytes() const {
    const double e = p_.value;
    // RMSNorm (trainer/model/layers.cpp RmsNormFunction) keeps its input, in its dtype, and an
    // fp32 1/rms per token; the backward recomputes the normalised rows.
    // Gemma's norm (1 + w) runs as autograd ops in fp32: its fp32 input and normalised rows.
    const double norm = m_.gemma_norm ? 8 * h_ + 4 : e * h_ + 4;
    // input_layernorm and post_attention_layernorm, plus the sandwich layouts' two more (GLM-4,
    // Gemma) on the attention and MLP outputs.
    double bytes =
        m_.norms_per_layer() * norm + 2 * e * h_  // the inputs of q/k/v_proj and of gate/up_proj
        + e * (hq_ + 2 * hkv_)                    // q, k after RoPE and v, as attention keeps them
        + e * hq_ +
        4 * double(m_.num_heads)  // its output and fp32 log-sum-exp
        // o_proj's input: the flash kernels return the output as [B, S, heads, D],
        // which o_proj reads as it is; the math path (fp32 on CUDA, samples
        // isolated by packing) returns [B, heads, S, D], copied for o_proj
        + (math_attention() ? e * hq_ : 0) + 4 * e * f_;  // gate, silu(gate), up and their product
    if (m_.qk_norm)  // Qwen3, Gemma 3: an RMSNorm over each head of q and k
      bytes += double(m_.num_heads + m_.num_kv_heads) *
               (m_.gemma_norm ? 8 * double(m_.head_dim) + 4 : e * double(m_.head_dim) + 4);
    return bytes;
  }

  // Score shapes the flash kernels cannot express: Gemma 2's soft-capping, and a sliding window
  // shorter than the sequence (attention.cpp runs the math path wherever the window cuts).
  bool shaped_scores() const {
    return m_.attn_logit_softcapping > 0 ||
           (m_.sliding_window > 0 && m_.sliding_window < cfg_.cutoff_len);
  }

  // Whether the layers' attention runs on the math path (trainer/model/attention.h); for a
  // model whose windows cut only some layers, every layer is counted so (an upper bound).
  bool math_attention() const {
    const bool segmented = (cfg_.neat_packing && cfg_.stage != Stage::Pt) ||
                           (cfg_.stage == Stage::Dpo && cfg_.packing) || packed_micro_batches();
    return segmented || shaped_scores() || (!p_.mixed && !opt_.cpu);
  }

  // What an MoE layer's `mlp` keeps per local token instead of the dense MLP's 4 e f
  // (trainer/model/moe.cpp SparseMoeBlock): the router's fp32 probabilities (softmax's output)
  // and the top-k indices (int64), with norm_topk_prob the fp32 picked probabilities and their
  // sum; the sort order, the token of each (token, expert) slot and the order back (int64
  // each); per slot the expert's input row, gate, SiLU's output, up and their product, its
  // output row and the routing weight; the shared expert's (Qwen2-MoE) MLP set, output row and
  // sigmoid gate.
  double moe_mlp_bytes() const {
    const double e = p_.value, k = double(m_.num_experts_per_tok);
    const double fe = double(m_.moe_intermediate_size),
                 fs = double(m_.shared_expert_intermediate_size);
    double bytes = 4 * double(m_.num_experts) + 8 * k + (m_.norm_topk_prob ? 4 * k + 4 : 0) +
                   24 * k + k * (2 * e * h_ + 4 * e * fe + e);
    if (fs > 0) bytes += 4 * e * fs + e * h_ + e;
    return bytes;
  }

  void activations() {
    const double e = p_.value, t = double(tokens_);
    LongContextCosts& lc = est_.long_context;
    // The dense MLP's share of a layer: gate, SiLU's output, up and their product (4 e f per
    // token); an MoE layer keeps moe_mlp_bytes() instead, untiled.
    const double mlp = 4 * e * f_;
    const double moe_layer = layer_bytes() - mlp + (moe_layers_ > 0 ? moe_mlp_bytes() : 0);
    const double dense_layers = layers_ - moe_layers_;
    const double full_layer = dense_layers > 0 ? layer_bytes() : moe_layer;
    const bool tiled = cfg_.tiled_mlp && dense_layers > 0;  // MoE layers are never tiled
    if (tiled) {
      // trainer/model/decoder.cpp TiledMlp: the layer keeps the MLP's input only; one tile at a
      // time recomputes its activations in the backward.
      lc.mlp_tile_tokens =
          tiled_mlp_tile_tokens(tokens_, m_.hidden_size, m_.intermediate_size, static_cast<int>(e),
                                double(cfg_.tiled_mlp_budget_mib) * 1024 * 1024);
      // In a tile's backward: the recomputed gate, SiLU's output and up, the gradients of the
      // product, of SiLU's output and of up, and the tile's output (6 e f + e h per token).
      lc.mlp_tile = double(lc.mlp_tile_tokens) * (6 * e * f_ + e * h_);
      lc.layer = t * (layer_bytes() - mlp);
    } else {
      lc.layer = t * full_layer;
    }
    // The layers' sets as kept: the dense ones lc.layer each, the MoE ones t x moe_layer each;
    // lc.layer becomes the largest one's (the one a backward or a recompute holds at a time).
    const double all_layers = dense_layers * lc.layer + moe_layers_ * t * moe_layer;
    if (moe_layers_ > 0) lc.layer = std::max(lc.layer, t * moe_layer);
    // CUDA's FlashAttention-2 backward (at::_scaled_dot_product_flash_attention_backward,
    // flash_api.cpp mha_bwd) allocates, while one layer's attention backward runs: an fp32 dq
    // accumulator [S, heads, D]; under GQA the gradients of K and V expanded to every query
    // head [S, heads, D] each (the model dtype), summed per group afterwards; its fp32
    // softmax_d [heads, S]. Per local token (Ulysses: S x heads / SP is the same product).
    if (!opt_.cpu && !math_attention())
      lc.attention_backward = t * (4 * hq_ + (m_.num_kv_heads < m_.num_heads ? 2 * e * hq_ : 0) +
                                   4 * double(m_.num_heads));
    // One layer's whole set while its backward runs, and the larger of a tile's MLP backward
    // and the attention backward's workspace (they run one after the other).
    const double running = lc.layer + std::max(lc.mlp_tile, lc.attention_backward);
    // Outside the layers: RoPE's cos and sin of every position, the final norm and the hidden
    // states it returns (read by the LM head).
    // (The rotating dimensions only; Gemma 3's sliding layers have a second cos/sin pair, and
    // Gemma's final norm keeps fp32 rows.)
    const double rope = 2 * e * double(m_.rotary_dim()) * (m_.rope_local_theta > 0 ? 2 : 1);
    const double final_norm = m_.gemma_norm ? 8 * h_ + 4 : e * h_ + 4;
    const double outside = t * (rope + final_norm + e * h_);
    lc.outside = outside;
    const bool offload = cfg_.gradient_checkpointing && cfg_.offload_activations;
    if (cfg_.gradient_checkpointing) {
      const double inputs = layers_ * e * h_ * t;
      // offload_activations: the inputs wait in host memory; in the backward the running
      // layer's input and the next one's (prefetched) are back on the device.
      lc.checkpoints = offload ? 0 : inputs;
      // CUDA's pinned host allocator rounds each input up to a power of two.
      const double input = e * h_ * t;
      const double host_input = opt_.cpu ? input : std::exp2(std::ceil(std::log2(input)));
      lc.offloaded_activations = offload ? layers_ * host_input : 0;
      b().activations = lc.checkpoints + (offload ? 2 * e * h_ * t : 0) + running + outside;
      recompute_ = running;
    } else {
      b().activations = all_layers + std::max(lc.mlp_tile, lc.attention_backward) + outside;
    }
    est_.host_activation_bytes = lc.offloaded_activations;
    const double model_hkv = double(m_.num_kv_heads * m_.head_dim);
    const double reference_layer =
        e / 2 * (12 * h_ + 4 * model_hkv + 6 * f_) + 4 * double(m_.num_heads + 2);
    note("Activations of one layer per local token: " + grouped(full_layer) +
         " B (studio-train's decoder keeps SiLU's output besides its input); the reference "
         "formula for fused kernels, 12h + 4h_kv + 6f + 4(heads + 2), gives " +
         grouped(reference_layer) + " B.");
    if (moe_layers_ > 0)
      note("Mixture of experts: " + grouped(moe_layers_) + " of the " + grouped(layers_) +
           " layers route each token to " + std::to_string(m_.num_experts_per_tok) + " of " +
           std::to_string(m_.num_experts) + " experts and keep " + grouped(moe_layer) +
           " B per local token (the router's probabilities, each picked expert's input, MLP "
           "activations and output" +
           (m_.shared_expert_intermediate_size > 0 ? ", the shared expert's" : "") + ")" +
           (cfg_.tiled_mlp ? ", untiled" : "") +
           "; every expert's weights, gradients "
           "and optimizer states count in the model states (" +
           format_count(m_.parameter_count()) + " parameters, " +
           format_count(m_.active_parameter_count()) + " active per token).");
    if (tiled)
      note("tiled_mlp: the MLP runs over tiles of " + grouped(double(lc.mlp_tile_tokens)) +
           " tokens, so a layer keeps " + grouped(full_layer - mlp) +
           " B per token and one tile's MLP activations and gradients (" + format_gib(lc.mlp_tile) +
           ") exist at a time, instead of " + format_gib(t * mlp) +
           " kept for the whole sequence.");
    if (lc.attention_backward > 0)
      note("FlashAttention-2's backward works in " + format_gib(lc.attention_backward) +
           " while one layer's attention backward runs (an fp32 dq accumulator" +
           std::string(m_.num_kv_heads < m_.num_heads
                           ? " and the K and V gradients of every query head before they are "
                             "summed per KV head"
                           : "") +
           ").");
    if (cfg_.gradient_checkpointing)
      note("gradient_checkpointing: each of the " + grouped(layers_) +
           " layers keeps only its input (" + grouped(e * h_) + " B per token" +
           (offload ? ", " + format_gib(lc.offloaded_activations) +
                          " in all, in host memory (offload_activations); two are back on the "
                          "GPU during the backward"
                    : std::string()) +
           "), plus one layer's full set while it is recomputed in the backward.");
    else
      note("No gradient checkpointing: all " + grouped(layers_) +
           " layers keep their full set until the backward.");
  }

  // trainer/loss.cpp: the fused LM head and loss over chunks of loss_chunk_tokens rows.
  void logits() {
    const double t = double(tokens_), e = p_.value;
    LongContextCosts& lc = est_.long_context;
    if (cfg_.stage == Stage::Rm) {
      // trainer/objective_rm.cpp: no LM head runs; the value head reads each sequence's last
      // row. Its backward scatters that row's gradient into a zero tensor shaped like the final
      // hidden states, which the last layer's backward then reads.
      lc.loss_chunk_tokens = 0;
      lc.loss_held = 0;
      lc.loss_peak = e * h_ * t;
      b().logits = lc.loss_peak;
      note(
          "Stage rm: no LM head and no logits: the value head scores each sequence at its last "
          "token; its backward forms the gradient of the final hidden states (" +
          format_gib(lc.loss_peak) + ").");
      return;
    }
    lc.loss_chunk_tokens = loss_chunk_tokens(tokens_, m_.hidden_size, m_.vocab_size);
    // ASFT holds three [chunk x vocab] buffers (trainer/loss.cpp): a third of the chunk.
    if (asft()) lc.loss_chunk_tokens = std::max<int64_t>(1, lc.loss_chunk_tokens / 3);
    // One chunk's logits in fp32 (and, under bf16, in the compute dtype as the GEMM returns them
    // and as the gradient GEMMs take them).
    // Gemma 2's final soft cap keeps tanh of the chunk's logits (fp32) for the gradient.
    // ASFT: the reference's logits (fp32, from a GEMM in the compute dtype) and probabilities.
    const double low = e < 4 ? e : 0;
    const double chunk =
        double(lc.loss_chunk_tokens) * vocab_ *
        (4 + low + (m_.final_logit_softcapping > 0 ? 4 : 0) + (asft() ? 8 + low : 0));
    // ASFT: the reference's final hidden states and the rows of them the loss reads.
    const double reference_rows = asft() ? 2 * e * h_ * t : 0;
    // The head's fp32 gradient only when the head trains (lora and freeze leave it frozen).
    const double head_grad = head_trained_ ? 4 * vocab_ * h_ : 0, hidden_grad = e * h_ * t,
                 rows = e * h_ * t + reference_rows;
    // SFT forms both gradients in its forward and keeps them; DPO keeps the rows it read and
    // forms the gradients in its backward (the upstream gradient differs per sequence). Either
    // way the peak holds the rows, both gradients and one chunk.
    lc.loss_held =
        cfg_.stage != Stage::Dpo && cfg_.stage != Stage::Kto ? head_grad + hidden_grad : rows;
    lc.loss_peak = head_grad + hidden_grad + rows + chunk;
    b().logits = lc.loss_peak;
    note("Logits: the LM head and its loss are fused and run over " +
         grouped(double(lc.loss_chunk_tokens)) +
         " tokens at a time: no [tokens x vocab] tensor exists; at its peak the loss holds the "
         "head's fp32 gradient (" +
         format_gib(head_grad) +
         "), the gradient of the hidden "
         "states and the rows it reads (" +
         format_gib(hidden_grad + rows) +
         ") and one chunk's "
         "logits (" +
         format_gib(chunk) +
         "); an unfused loss (2 + 4 + 4 B x vocab per token) "
         "would take " +
         format_gib(10 * vocab_ * t) + ".");
    if (cfg_.stage == Stage::Pt) note("Stage pt: every token is a target.");
    if (cfg_.stage == Stage::Sft)
      note(
          "Every local token is taken to have a target; masked prompt tokens skip the LM head "
          "and need no logits.");
    if (asft())
      note(
          "use_asft_loss: the reference model runs forward on every micro-batch; the loss "
          "reads its final hidden states (" +
          format_gib(reference_rows) +
          " with the rows "
          "taken from them) and forms its logits and probabilities next to the policy's, over "
          "a third as many tokens at a time.");
  }

  void sp_buffers() {
    const double e = p_.value, t = double(tokens_);
    double per_token = 0;
    if (sp_.ring > 1) {
      // Forward: the fp32 out accumulator, the block's output (and its fp32 copy), the merge's
      // temporaries, and the K/V block in use plus the one arriving.
      const double fwd = 4 * hq_ + e * hq_ + (e < 4 ? 4 * hq_ : 0) + 8 * hq_ + 4 * e * hkv_;
      // Backward: the fp32 dq accumulator, one block's fp32 dq, dk, dv, the fp32 dK/dV on the
      // gradient ring (sent, arrived, next receive buffer), and two K/V blocks.
      const double bwd = 4 * hq_ + (4 * hq_ + 8 * hkv_) + 24 * hkv_ + 4 * e * hkv_;
      const double ring = std::max(fwd, bwd);
      per_token += ring;
      note("Ring attention (degree " + std::to_string(sp_.ring) +
           ") of the layer in flight: " + grouped(ring) +
           " B per local token, the larger of its forward (fp32 out accumulator "
           "and merge temporaries, two K/V blocks: " +
           grouped(fwd) +
           " B) and its backward (fp32 dq, one block's fp32 gradients, three fp32 dK/dV "
           "buffers, two K/V blocks: " +
           grouped(bwd) + " B).");
    }
    if (sp_.ulysses > 1) {
      const double ulysses = 2 * e * (2 * hq_ + 2 * hkv_);
      per_token += ulysses;
      note("Ulysses (degree " + std::to_string(sp_.ulysses) +
           "): send and receive buffers of the q, k, v and output all-to-alls of one layer: " +
           grouped(ulysses) + " B per local token" +
           (hkv_ > double(m_.num_kv_heads * m_.head_dim)
                ? ", each of the " + std::to_string(m_.num_kv_heads) + " K/V heads repeated " +
                      grouped(hkv_ / double(m_.num_kv_heads * m_.head_dim)) + " times"
                : std::string()) +
           ".");
    }
    b().sp_buffers = t * per_token;
    const bool isolated = (cfg_.neat_packing && cfg_.stage != Stage::Pt) ||
                          (cfg_.stage == Stage::Dpo && cfg_.packing) || packed_micro_batches();
    if (isolated || shaped_scores()) {
      // Sample-isolated, windowed or soft-capped attention blocks run on the math path
      // (trainer/model/attention_block.cpp): fp32 scores of at most 2^25 elements per query
      // chunk, with their probabilities and, in the backward, dP and dS alongside (and, soft-
      // capped, tanh of the scores).
      const double elements = std::min(std::pow(2.0, 25), double(m_.num_heads) * t * t);
      const double workspace = (m_.attn_logit_softcapping > 0 ? 5 : 4) * 4 * elements;
      b().sp_buffers += workspace;
      const std::string why =
          isolated ? "Packing with isolated samples: masked attention"
          : m_.attn_logit_softcapping > 0
              ? "Soft-capped attention scores (attn_logit_softcapping): attention"
              : "Sliding window of " + grouped(double(m_.sliding_window)) +
                    " tokens, shorter than cutoff_len: the windowed layers' attention";
      note(why +
           " runs on the math path, whose fp32 score workspace (scores, probabilities, "
           "dP, dS of one query chunk) takes up to " +
           format_gib(workspace) + ".");
    }
  }

  // Gradient reductions in the backward (trainer/optim/zero.cpp reduce_unit). While the layers
  // run backward: a layer's gradients in the compute dtype, their fp32 copy and its flat buffer,
  // and at stages 2-3 up to two earlier layers' reduce-scatters in flight (input and piece). At
  // its end, when the activations are gone: the embeddings' gradient (its own unit) in the
  // compute dtype, in fp32 and (stages 2-3) its piece: counted where it exceeds the backward.
  // A reduce-scatter sums in its own input (Group::reduce_scatter_sum_consuming_async): Gloo
  // (every CPU run) all-reduces it in place and the piece is a view of it; NCCL writes the piece
  // apart. Stage 3 releases a unit's gathered weights before reducing its gradients.
  void zero_buffers() {
    if (world_ == 1 && !p_.mixed) return;
    // Only trained weights have gradients to reduce.
    const double e = p_.value, L = trained_layer_params_,
                 E = embeddings_trained_ ? embed_params_ : 0;
    const double n = zero_ >= 2 ? world_ : 1;
    const bool scatter = world_ > 1 && zero_ >= 2;
    const double piece = scatter && !opt_.cpu ? 4 / n : 0;  // B per parameter
    // The LM head's gradient in the compute dtype waits from the loss's backward to its unit's
    // reduction at the end; a layer's reduction runs meanwhile.
    head_grad_ = head_trained_ ? e * vocab_ * h_ : 0;
    zero_layers_ = (e + 8) * L + (scatter ? 2 * (4 + piece) * L : 0) + head_grad_;
    // The compute-dtype gradient is held while it is converted into the fp32 input, then freed;
    // the piece comes with the reduction. At stage 3 the weights gathered for the micro-batch
    // (counted in the model states) are released by then.
    // An fp32 gradient is its own input (no conversion) unless stages 0-1 add it to what
    // earlier micro-batches accumulated.
    const bool own = e == 4 && (zero_ >= 2 || cfg_.gradient_accumulation_steps == 1);
    end_reduction_ = std::max(0.0, ((own ? 0 : e) + 4 + piece) * E - (zero_ >= 3 ? gathered_ : 0));
    b().zero_buffers = zero_layers_;
    scatter_ = scatter;
  }

  // At the end of the backward, when the activations are gone: the embeddings' reduction,
  // counted where it exceeds the backward's parts.
  void end_of_backward() {
    if (world_ == 1 && !p_.mixed) return;
    const double backward = b().activations + b().logits + b().sp_buffers + zero_layers_;
    b().zero_buffers += std::max(0.0, end_reduction_ - backward);
    note(
        "Gradient reductions during the backward: the LM head's gradient waiting for its "
        "reduction (" +
        format_gib(head_grad_) + "), one decoder layer's gradients (" +
        format_count(static_cast<int64_t>(trained_layer_params_)) +
        " parameters) in the compute "
        "dtype and fp32 with its flat buffer" +
        (scatter_ ? std::string(", two earlier layers' reduce-scatters in flight")
                  : std::string()) +
        " (" + format_gib(zero_layers_) + " in all); then the embeddings' (" +
        format_gib(end_reduction_) + ", after the activations are freed" +
        (zero_ >= 3 ? std::string(", beyond the gathered weights released before it")
                    : std::string()) +
        ")" + (end_reduction_ > backward ? ", the larger, counted" : std::string()) + ".");
  }

  // The loss runs (and frees all it took) before the first layer's backward: its peak and the
  // backward's working set (the layer being recomputed, its SP exchanges, its gradient
  // reductions, the inputs brought back from host memory) are never held together. The logits
  // part is what the loss needs beyond that working set, so that the parts add up to the peak
  // of the two phases (as the optimizer step's part does with the backward).
  void loss_beyond_backward() {
    const double e = p_.value, t = double(tokens_);
    const bool offload = cfg_.gradient_checkpointing && cfg_.offload_activations;
    const double backward =
        recompute_ + b().sp_buffers + zero_layers_ + (offload ? 2 * e * h_ * t : 0);
    const double peak = est_.long_context.loss_peak;
    b().logits = std::max(0.0, peak - backward);
    note("The loss's peak (" + format_gib(peak) +
         ") comes before the layers' backward, whose "
         "working set (the layer recomputed, its SP and gradient buffers" +
         (offload ? std::string(", the inputs brought back") : std::string()) + ": " +
         format_gib(backward) + ") is freed by then: the logits part is the " +
         format_gib(b().logits) + " the loss needs beyond it.");
  }

  // The largest unit whose update is gathered at stages 1-2: a layer's trained weights, or a
  // trained outer weight (frozen weights are whole on every rank and not gathered).
  double trained_unit_params() const {
    if (trained_ >= params_) return unit_params_;
    return std::max(trained_layer_params_,
                    embeddings_trained_ || head_trained_ ? embed_params_ : 0.0);
  }

  void optimizer_step() {
    const bool off_opt = zero_ >= 1 && zero_req_.offload_optimizer;
    // AdamW updates in place and needs nothing more: on the GPU one fused multi-tensor kernel
    // per unit (at::_fused_adamw_), on the host one vectorised pass (trainer/optim/zero.cpp).
    // Stages 1-2 gather the updated pieces into the weights, two units in flight.
    const double gather = zero_ == 1 || zero_ == 2
                              ? 2 * p_.value * trained_unit_params() * (1 + 1 / double(world_))
                              : 0;
    const double step = gather;
    const double backward = b().activations + b().logits + b().sp_buffers + b().zero_buffers;
    b().optimizer_step = std::max(0.0, step - backward);
    note("The optimizer step needs " + format_gib(step) + " beyond the model states (" +
         (gather > 0 ? std::string("the all-gather of the updated pieces, two units at a time; ")
                     : std::string()) +
         (off_opt ? std::string("the update itself runs on the CPU")
                  : std::string("AdamW updates in place, in one fused kernel per unit")) +
         ") once the backward's " + format_gib(backward) + " are freed" +
         (b().optimizer_step > 0 ? ": the step is the peak, and the difference is counted"
                                 : ": the backward is the peak") +
         ".");
  }

  void closing_notes() {
    est_.process_host_bytes = kProcessHostBytes;
    if (opt_.cpu)
      note(
          "Not counted above: each process's own resident memory beyond its tensors (LibTorch's "
          "libraries and operator registry, its threads, what the C library keeps for reuse "
          "after frees): about " +
          format_gib(kProcessHostBytes) +
          " per process, given "
          "apart; and the short-lived temporaries of single operations.");
    else
      note(
          "Not counted: the CUDA context and library workspaces (about 0.5-1 GiB), allocator "
          "fragmentation, and the short-lived temporaries of single operations; in host "
          "memory, each process's own (LibTorch's libraries and operator registry: about " +
          format_gib(kProcessHostBytes) +
          " measured on CPU runs, more with the CUDA "
          "context's host side).");
    if (opt_.gpu_capacity_bytes <= 0) note("GPU capacity unknown: whether it fits is not judged.");
  }

  const RunConfig& cfg_;
  const ModelInfo& m_;
  const EstimateOptions& opt_;
  const Precision p_;
  const SpShape sp_;
  double h_ = 0, hq_ = 0, hkv_ = 0, f_ = 0, vocab_ = 0, layers_ = 0;
  double params_ = 0, embed_params_ = 0, layer_params_ = 0;
  double trained_ = 0, trained_layer_params_ = 0;  // lora / freeze: what has gradients
  bool embeddings_trained_ = true, head_trained_ = true;
  double moe_layers_ = 0;  // MoE decoder layers (ModelInfo::is_moe_layer)
  int world_ = 1;
  ZeroRequest zero_req_;
  int zero_ = 0;
  double outer_params_ = 0, unit_params_ = 0;
  int64_t tokens_ = 0;
  double recompute_ = 0;      // checkpointing: the layer recomputed in the backward
  double zero_layers_ = 0;    // zero_buffers: what the layers' gradient reductions hold
  double end_reduction_ = 0;  // the embeddings' reduction at the end of the backward
  double gathered_ = 0;       // stage 3: the weights gathered for a micro-batch
  double head_grad_ = 0;      // the LM head's gradient, held through the layers' backward
  bool scatter_ = false;      // stages 2-3 over several ranks: reduce-scatters in flight
  MemoryEstimate est_;
};

}  // namespace

MemoryEstimate estimate_memory(const RunConfig& cfg, const ModelInfo& model,
                               const EstimateOptions& opt) {
  if (model.hidden_size <= 0 || model.num_layers <= 0 || model.num_heads <= 0 ||
      model.num_kv_heads <= 0 || model.head_dim <= 0 || model.vocab_size <= 0) {
    MemoryEstimate none;
    none.capacity_bytes = opt.gpu_capacity_bytes;
    none.notes.push_back("No estimate: the model's shapes are unknown (read its config.json).");
    return none;
  }
  return Estimator(cfg, model, opt).run();
}

std::vector<int> valid_sp_sizes(const RunConfig& cfg, const ModelInfo& model, int world_size) {
  std::vector<int> out;
  for (int sp : divisors(std::max(1, world_size))) {
    // usp always has a factorisation: Ulysses degree 1, a pure ring.
    const bool heads_fit = cfg.sequence_parallel_mode != SpMode::Ulysses ||
                           ulysses_heads(model, sp) == UlyssesHeads::Ok;
    if (heads_fit) out.push_back(sp);
  }
  return out;
}

std::optional<int> smallest_fitting_sp(const RunConfig& cfg, const ModelInfo& model,
                                       const EstimateOptions& opt) {
  if (opt.gpu_capacity_bytes <= 0) return std::nullopt;
  for (int sp : valid_sp_sizes(cfg, model, opt.world_size())) {
    RunConfig c = cfg;
    c.sequence_parallel_size = sp;
    if (c.sequence_parallel_mode == SpMode::Usp) {
      c.sequence_parallel_ulysses_degree = largest_ulysses_degree(model, sp);
      c.sequence_parallel_ring_degree = sp / c.sequence_parallel_ulysses_degree;
    }
    if (estimate_memory(c, model, opt).fits()) return sp;
  }
  return std::nullopt;
}

std::vector<MemoryPart> memory_parts(const MemoryBreakdown& b) {
  return {{"weights", "weights", b.weights},
          {"gradients", "gradients", b.gradients},
          {"optimizer", "optimizer states", b.optimizer},
          {"reference", "reference model", b.reference},
          {"activations", "activations", b.activations},
          {"logits", "logits", b.logits},
          {"sp_buffers", "SP buffers", b.sp_buffers},
          {"zero_buffers", "gradient buffers", b.zero_buffers},
          {"optimizer_step", "optimizer step", b.optimizer_step}};
}

int64_t loss_chunk_tokens(int64_t tokens, int64_t hidden, int64_t vocab) {
  if (tokens <= 0 || hidden <= 0 || vocab <= 0) return 0;
  const int64_t vocab_per_hidden = (vocab + hidden - 1) / hidden;
  const int64_t want = (tokens + vocab_per_hidden - 1) / vocab_per_hidden;
  int64_t pow2 = 1;
  while (pow2 < want) pow2 *= 2;
  int64_t floor_rows = 1;  // the most rows whose fp32 logits fit kLossChunkLogitsFloorBytes
  while (floor_rows * 2 * vocab * 4 <= kLossChunkLogitsFloorBytes) floor_rows *= 2;
  return std::min(std::max(pow2, floor_rows), tokens);
}

std::optional<int64_t> longest_fitting_cutoff(const RunConfig& cfg, const ModelInfo& model,
                                              const EstimateOptions& opt) {
  if (opt.gpu_capacity_bytes <= 0) return std::nullopt;
  const int64_t step = std::max<int64_t>(1024, pad_multiple(sp_shape(cfg)));
  auto fits = [&](int64_t units) {
    RunConfig c = cfg;
    c.cutoff_len = units * step;
    return estimate_memory(c, model, opt).fits();
  };
  if (!fits(1)) return std::nullopt;
  // Memory grows with the length: the largest fitting multiple, by doubling then bisection.
  const int64_t most = (int64_t(1) << 26) / step;
  int64_t lo = 1, hi = 2;
  while (hi <= most && fits(hi)) lo = hi, hi *= 2;
  hi = std::min(hi, most + 1);
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo * step;
}

int64_t tiled_mlp_tile_tokens(int64_t tokens, int64_t hidden, int64_t intermediate, int value_bytes,
                              double budget_bytes) {
  if (tokens <= 0) return 1;
  const double per_token = 4.0 * double(intermediate) * double(value_bytes);
  const double budget =
      budget_bytes > 0 ? budget_bytes : double(tokens) * double(hidden) * double(value_bytes);
  return std::clamp<int64_t>(static_cast<int64_t>(budget / per_token), 1, tokens);
}

std::string format_gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / kGiB);
  return buf;
}

std::string format_estimate_text(const MemoryEstimate& est) {
  const MemoryBreakdown& b = est.bytes;
  std::string out = "Memory per GPU: world " + std::to_string(est.world_size) +
                    ", sequence parallel " + std::to_string(est.sp_size);
  if (est.ulysses_degree > 1 && est.ring_degree > 1)
    out += " (usp: ulysses " + std::to_string(est.ulysses_degree) + " x ring " +
           std::to_string(est.ring_degree) + ")";
  else if (est.sp_size > 1)
    out += est.ring_degree > 1 ? " (zigzag-ring)" : " (ulysses)";
  out += ", " + grouped(double(est.tokens_per_rank)) + " tokens per rank\n";
  char line[96];
  for (const MemoryPart& part : memory_parts(b)) {
    std::snprintf(line, sizeof line, "  %-18s %10.2f GiB\n", part.label, part.bytes / kGiB);
    out += line;
  }
  std::snprintf(line, sizeof line, "  %-18s %10.2f GiB", "total", b.total() / kGiB);
  out += line;
  if (est.capacity_bytes > 0) {
    const double spare = est.capacity_bytes - b.total();
    out +=
        " of " + format_gib(est.capacity_bytes) + ": " +
        (spare >= 0 ? "fits, " + format_gib(spare) + " spare" : "short by " + format_gib(-spare));
  } else {
    out += " (GPU capacity unknown)";
  }
  std::snprintf(line, sizeof line, "\n  (model states: %.2f B/param on the GPU, ZeRO stage %d)\n",
                est.bytes_per_param, est.zero_stage);
  out += line;
  if (est.offloaded_bytes > 0)
    out += "  host memory per rank (offloaded model states): " + format_gib(est.offloaded_bytes) +
           "\n";
  if (est.host_activation_bytes > 0)
    out +=
        "  host memory per rank (offloaded activations): " + format_gib(est.host_activation_bytes) +
        "\n";
  out += "  host memory per process (its own, beyond tensors): about " +
         format_gib(est.process_host_bytes) + "\n";
  out += "Notes:\n";
  for (const auto& n : est.notes) out += "  - " + n + "\n";
  return out;
}

}  // namespace studio
