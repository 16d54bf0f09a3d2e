#include "studio/trainer/model/decoder.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <iostream>
#include <stdexcept>

#include "studio/config/memory_estimate.h"
#include "studio/trainer/model/kv_cache.h"
#include "studio/trainer/model/activation_checkpoint.h"

namespace studio::trainer {

SelfAttentionImpl::SelfAttentionImpl(const studio::ModelInfo& info,
                                     const torch::TensorOptions& options, int64_t layer)
    : heads_(info.num_heads),
      kv_heads_(info.num_kv_heads),
      head_dim_(info.head_dim),
      interleaved_(info.rope_interleaved),
      scale_(info.attention_scale > 0 ? info.attention_scale
                                      : 1.0 / std::sqrt(double(info.head_dim))),
      softcap_(info.attn_logit_softcapping),
      window_(info.layer_window(layer)),
      local_rope_(info.rope_local_theta > 0 && window_ > 0) {
  const int64_t h = info.hidden_size, q = heads_ * head_dim_, kv = kv_heads_ * head_dim_;
  if (info.fused_qkv) {
    qkv_proj = register_module("qkv_proj", Linear(h, q + 2 * kv, info.qkv_bias, options));
  } else {
    q_proj = register_module("q_proj", Linear(h, q, info.qkv_bias, options));
    k_proj = register_module("k_proj", Linear(h, kv, info.qkv_bias, options));
    v_proj = register_module("v_proj", Linear(h, kv, info.qkv_bias, options));
  }
  o_proj = register_module("o_proj", Linear(q, h, info.o_bias, options));
  if (info.qk_norm) {
    q_norm = register_module("q_norm",
                             RMSNorm(head_dim_, info.rms_norm_eps, options, info.gemma_norm));
    k_norm = register_module("k_norm",
                             RMSNorm(head_dim_, info.rms_norm_eps, options, info.gemma_norm));
  }
}

torch::Tensor SelfAttentionImpl::forward(const torch::Tensor& x, const LayerContext& ctx,
                                         int64_t layer) {
  const int64_t b = x.size(0), s = x.size(1), qw = heads_ * head_dim_, kvw = kv_heads_ * head_dim_;
  torch::Tensor q, k, v;
  if (qkv_proj) {  // Phi-3: [q | k | v] along the features
    const torch::Tensor qkv = qkv_proj(x);
    q = qkv.narrow(-1, 0, qw);
    k = qkv.narrow(-1, qw, kvw);
    // Its own copy: the attention keeps v for its backward, and a view would keep all of qkv.
    v = qkv.narrow(-1, qw + kvw, kvw).contiguous();
  } else {
    q = q_proj(x), k = k_proj(x), v = v_proj(x);
  }
  q = q.reshape({b, s, heads_, head_dim_});
  k = k.reshape({b, s, kv_heads_, head_dim_});
  v = v.reshape({b, s, kv_heads_, head_dim_}).transpose(1, 2);
  if (q_norm) {  // Qwen3, Gemma 3 normalise each head before the rotation
    q = q_norm(q);
    k = k_norm(k);
  }
  const bool local = local_rope_ && ctx.cos_local.defined();
  const torch::Tensor& cos = local ? ctx.cos_local : ctx.cos;
  const torch::Tensor& sin = local ? ctx.sin_local : ctx.sin;
  q = apply_rope(q.transpose(1, 2), cos, sin, interleaved_);
  k = apply_rope(k.transpose(1, 2), cos, sin, interleaved_);
  torch::Tensor out;
  if (ctx.kv_cache) {
    const int64_t past = ctx.kv_cache->length();
    const auto [keys, values] = ctx.kv_cache->append(layer, k, v);
    // Query i (position past + i) sees keys 0 .. past + i; one new token sees them all, which
    // lets the flash kernels run.
    BlockMask mask;
    mask.causal = s > 1;
    mask.q_start = past;
    mask.window = window_;
    mask.softcap = softcap_;
    out = attention_block_forward(q, keys, values, mask, scale_).out;
  } else {
    AttentionCall call{layer, /*causal=*/true, scale_, ctx.segments};
    call.shape = ScoreShape{window_, softcap_};
    out = (*ctx.attention)(q, k, v, call);
  }
  return o_proj(out.transpose(1, 2).reshape({b, s, heads_ * head_dim_}));
}

DecoderLayerImpl::DecoderLayerImpl(const studio::ModelInfo& info,
                                   const torch::TensorOptions& options, int64_t layer) {
  using Layout = studio::ModelInfo::NormLayout;
  self_attn = register_module("self_attn", SelfAttention(info, options, layer));
  if (info.is_moe_layer(layer))
    moe = register_module("mlp", SparseMoeBlock(info, options));
  else
    mlp = register_module("mlp", MLP(info, options));
  const auto norm = [&](const char* name) {
    return register_module(
        name, RMSNorm(info.hidden_size, info.rms_norm_eps, options, info.gemma_norm));
  };
  // Registered in HF's order, so that the state dict lists them as transformers does.
  attn_in = norm("input_layernorm");
  switch (info.norm_layout) {
    case Layout::PreNorm:
      mlp_in = norm("post_attention_layernorm");
      break;
    case Layout::Glm4Sandwich:
      mlp_in = norm("post_attention_layernorm");
      attn_out = norm("post_self_attn_layernorm");
      mlp_out = norm("post_mlp_layernorm");
      break;
    case Layout::GemmaSandwich:
      attn_out = norm("post_attention_layernorm");
      mlp_in = norm("pre_feedforward_layernorm");
      mlp_out = norm("post_feedforward_layernorm");
      break;
  }
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const LayerContext& ctx,
                                        int64_t layer) {
  torch::Tensor a = self_attn(attn_in(x), ctx, layer);
  if (attn_out) a = attn_out(a);
  const torch::Tensor h = x + a;
  // MoE layers run untiled: each expert only sees the rows routed to it.
  torch::Tensor m = moe ? moe(mlp_in(h), ctx.moe_aux) : mlp(mlp_in(h), ctx.mlp_tile_tokens);
  if (mlp_out) m = mlp_out(m);
  return h + m;
}

namespace {

// HF builds nn.Embedding with padding_idx = pad_token_id, which keeps that row's gradient 0.
int64_t padding_index(const studio::ModelInfo& info) {
  if (!info.pad_token_id || *info.pad_token_id < 0 || *info.pad_token_id >= info.vocab_size)
    return -1;
  return *info.pad_token_id;
}

}  // namespace

DecoderModelImpl::DecoderModelImpl(const studio::ModelInfo& info,
                                   const torch::TensorOptions& options) {
  embed_tokens = register_module(
      "embed_tokens", Embedding(info.vocab_size, info.hidden_size, padding_index(info), options));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < info.num_layers; ++i)
    layers->push_back(DecoderLayer(info, options, i));
  norm = register_module("norm",
                         RMSNorm(info.hidden_size, info.rms_norm_eps, options, info.gemma_norm));
  embedding_multiplier_ = info.embedding_multiplier;
}

namespace {

// An identity in the forward whose backward calls a layer hook: placed on a layer's output it
// runs before the layer's backward (before_backward), on its input once the layer's backward is
// done, its parameters' gradients accumulated (after_backward: autograd accumulates leaf
// gradients as soon as they are ready).
struct HookBoundary : torch::autograd::Function<HookBoundary> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               int64_t hooks, int64_t layer, bool before) {
    ctx->saved_data["hooks"] = hooks;
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["before"] = before;
    return x.view_as(x);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto* hooks = reinterpret_cast<LayerHooks*>(ctx->saved_data["hooks"].toInt());
    const int64_t layer = ctx->saved_data["layer"].toInt();
    if (ctx->saved_data["before"].toBool()) hooks->before_backward(layer);
    else hooks->after_backward(layer);
    return {grads[0], torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

torch::Tensor boundary(const torch::Tensor& x, LayerHooks* hooks, int64_t layer, bool before) {
  if (!hooks || !torch::GradMode::is_enabled() || !x.requires_grad()) return x;
  return HookBoundary::apply(x, static_cast<int64_t>(reinterpret_cast<intptr_t>(hooks)), layer,
                             before);
}

}  // namespace

torch::Tensor DecoderModelImpl::forward(const torch::Tensor& input_ids, const LayerContext& ctx,
                                        bool checkpoint_layers) {
  torch::Tensor h = embed_tokens(input_ids);
  // Gemma: times sqrt(hidden_size), a scalar first rounded to the embeddings' dtype (HF's
  // embed_scale buffer, fp32, .to(weight.dtype)).
  if (embedding_multiplier_ != 1.0)
    h = h * torch::scalar_tensor(embedding_multiplier_, torch::kFloat)
                .to(h.scalar_type())
                .to(h.device());
  for (size_t i = 0; i < layers->size(); ++i) {
    const auto layer = layers->ptr<DecoderLayerImpl>(i);
    const auto index = static_cast<int64_t>(i);
    if (ctx.hooks) ctx.hooks->before_forward(index);
    h = boundary(h, ctx.hooks, index, /*before=*/false);
    if (!checkpoint_layers) {
      h = layer->forward(h, ctx, index);
    } else {
      // The recompute runs during backward: it owns what it needs, the attention fn included,
      // so that a set_attention in between cannot change what is recomputed.
      h = checkpoint(
          [layer, attention = *ctx.attention, cos = ctx.cos, sin = ctx.sin,
           cos_local = ctx.cos_local, sin_local = ctx.sin_local, segments = ctx.segments,
           tile = ctx.mlp_tile_tokens, aux = ctx.moe_aux, index](const torch::Tensor& x) {
            LayerContext c{cos, sin, cos_local, sin_local, &attention, segments};
            c.mlp_tile_tokens = tile;
            c.moe_aux = aux;
            return layer->forward(x, c, index);
          },
          h, ctx.offload, index);
    }
    h = boundary(h, ctx.hooks, index, /*before=*/true);
    if (ctx.hooks) ctx.hooks->after_forward(index);
  }
  return norm(h);
}

namespace {

void check_supported(const studio::ModelInfo& info) {
  if (const std::string why = studio::decoder_support_error(info); !why.empty())
    throw std::invalid_argument("cannot build the decoder: " + why);
}

// Settings of config.json that training does not apply, said once per model.
void report_ignored(const studio::ModelInfo& info, const ModelOptions& options) {
  auto warn = options.warn ? options.warn : [](const std::string& text) {
    std::cerr << "studio-train: warning: " << text << '\n';
  };
  if (info.attention_dropout > 0)
    warn("attention_dropout " + std::to_string(info.attention_dropout) +
         " from config.json is ignored: training runs attention without dropout (sequence "
         "parallelism needs identical recomputation)");
}

}  // namespace

CausalLMImpl::CausalLMImpl(const studio::ModelInfo& info, const ModelOptions& options)
    : info_((check_supported(info), info)),
      dtype_(options.dtype),
      attention_(default_attention()),
      freqs_(rope_depends_on_length(info) ? RopeFrequencies{} : rope_frequencies(info)),
      local_freqs_(info.rope_local_theta > 0 ? rope_local_frequencies(info) : RopeFrequencies{}) {
  const auto topts = torch::TensorOptions().dtype(options.dtype).device(options.device);
  if (info.is_moe()) moe_aux_ = std::make_unique<MoeAuxLoss>();
  model = register_module("model", DecoderModel(info, topts));
  if (!info.tie_word_embeddings)
    lm_head = register_module("lm_head", Linear(info.hidden_size, info.vocab_size, false, topts));
  if (options.value_head) v_head = register_module("v_head", ValueHead(info.hidden_size, topts));
  report_ignored(info, options);
}

ValueHeadImpl::ValueHeadImpl(int64_t hidden, const torch::TensorOptions& options) {
  summary = register_module("summary", Linear(hidden, 1, true, options));
}

void ValueHeadImpl::reset(uint64_t seed) {
  torch::NoGradGuard no_grad;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  // kaiming_uniform_(a=sqrt(5)) over fan_in = hidden is U(-1/sqrt(hidden), 1/sqrt(hidden)), and
  // so is the bias's bound.
  const double bound = 1.0 / std::sqrt(static_cast<double>(summary->weight.size(1)));
  summary->weight.copy_(torch::empty(summary->weight.sizes(), torch::kFloat).uniform_(-bound, bound, gen));
  summary->bias.copy_(torch::empty(summary->bias.sizes(), torch::kFloat).uniform_(-bound, bound, gen));
}

torch::Tensor ValueHeadImpl::forward(const torch::Tensor& rows) {
  return torch::linear(rows.to(torch::kFloat), summary->weight.to(torch::kFloat),
                       summary->bias.to(torch::kFloat))
      .squeeze(-1);
}

const RopeFrequencies& CausalLMImpl::frequencies(const torch::Tensor& position_ids) {
  if (!rope_depends_on_length(info_)) return freqs_;
  const int64_t len = rope_seq_len_ > 0 ? rope_seq_len_ : position_ids.max().item<int64_t>() + 1;
  if (len != freqs_len_) freqs_ = rope_frequencies(info_, len), freqs_len_ = len;
  return freqs_;
}

torch::Tensor CausalLMImpl::hidden_states(const torch::Tensor& input_ids,
                                          const torch::Tensor& position_ids) {
  TORCH_CHECK(input_ids.dim() == 2 && input_ids.sizes() == position_ids.sizes(),
              "CausalLM: input_ids ", input_ids.sizes(), " and position_ids ", position_ids.sizes(),
              " must both be [B, S]");
  const auto act = model->embed_tokens->weight.scalar_type();
  LayerContext ctx;
  fill_rope(ctx, position_ids, act);
  ctx.attention = &attention_;
  ctx.segments = segments_.defined() ? segments_.to(input_ids.device()) : segments_;
  ctx.hooks = hooks_;
  ctx.moe_aux = moe_aux_ && moe_aux_->active() ? moe_aux_.get() : nullptr;
  if (long_context_.tiled_mlp)
    ctx.mlp_tile_tokens = studio::tiled_mlp_tile_tokens(
        input_ids.numel(), info_.hidden_size, info_.intermediate_size,
        static_cast<int>(c10::elementSize(act)), long_context_.tiled_mlp_budget_bytes);
  if (checkpointing_ && long_context_.offload_activations && torch::GradMode::is_enabled())
    ctx.offload = std::make_shared<ActivationOffload>();
  return model->forward(input_ids, ctx, checkpointing_);
}

void CausalLMImpl::fill_rope(LayerContext& ctx, const torch::Tensor& position_ids,
                             c10::ScalarType act) {
  // cos/sin once per forward, in fp32, then in the activation dtype as HF hands them on.
  auto [cos, sin] = rope_cos_sin(frequencies(position_ids), position_ids);
  if (info_.rope_interleaved) cos = interleave_cos_sin(cos), sin = interleave_cos_sin(sin);
  ctx.cos = cos.to(act);
  ctx.sin = sin.to(act);
  if (local_freqs_.inv_freq.defined()) {
    auto [cl, sl] = rope_cos_sin(local_freqs_, position_ids);
    ctx.cos_local = cl.to(act);
    ctx.sin_local = sl.to(act);
  }
}

namespace {

// Gemma 2: c * tanh(logits / c) (HF: in the logits' dtype).
torch::Tensor soft_cap(const torch::Tensor& logits, double cap) {
  return cap > 0 ? torch::tanh(logits / cap) * cap : logits;
}

}  // namespace

torch::Tensor CausalLMImpl::logits(const torch::Tensor& input_ids,
                                   const torch::Tensor& position_ids) {
  return soft_cap(torch::linear(hidden_states(input_ids, position_ids), lm_head_weight()),
                  info_.final_logit_softcapping);
}

torch::Tensor CausalLMImpl::decode_step(const torch::Tensor& input_ids, KVCache& cache) {
  TORCH_CHECK(input_ids.dim() == 2 && input_ids.size(1) > 0, "decode_step: input_ids ",
              input_ids.sizes(), " must be [B, S] with S > 0");
  TORCH_CHECK(cache.layers() == info_.num_layers, "decode_step: the cache has ", cache.layers(),
              " layers, the model ", info_.num_layers);
  torch::NoGradGuard no_grad;
  const int64_t s = input_ids.size(1), past = cache.length();
  const torch::Tensor position_ids =
      torch::arange(past, past + s, input_ids.options().dtype(torch::kLong))
          .unsqueeze(0)
          .expand({input_ids.size(0), s});
  const auto act = model->embed_tokens->weight.scalar_type();
  LayerContext ctx;
  fill_rope(ctx, position_ids, act);
  ctx.attention = &attention_;
  ctx.kv_cache = &cache;
  const torch::Tensor h = model->forward(input_ids, ctx, /*checkpoint_layers=*/false);
  cache.advance(s);
  return soft_cap(torch::linear(h.select(1, s - 1), lm_head_weight()),
                  info_.final_logit_softcapping)
      .to(torch::kFloat);
}

torch::Tensor CausalLMImpl::lm_head_weight() const {
  return lm_head ? lm_head->weight : model->embed_tokens->weight;
}

std::vector<std::pair<std::string, torch::Tensor>> CausalLMImpl::hf_state() {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : named_parameters(/*recurse=*/true))
    if (!is_adapter_parameter(item.key())) out.emplace_back(item.key(), item.value());
  return out;
}

std::vector<std::pair<std::string, torch::Tensor>> CausalLMImpl::adapter_state() {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : named_parameters(/*recurse=*/true))
    if (is_adapter_parameter(item.key())) out.emplace_back(item.key(), item.value());
  return out;
}

bool is_adapter_parameter(const std::string& name) {
  return name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos ||
         name.find(".lora_magnitude_vector") != std::string::npos;
}

std::map<std::string, std::vector<int64_t>> CausalLMImpl::expected_shapes() {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& [name, p] : hf_state()) out[name] = p.sizes().vec();
  return out;
}

void CausalLMImpl::load_hf_state(const std::function<torch::Tensor(const std::string&)>& get) {
  torch::NoGradGuard no_grad;
  for (auto& [name, p] : hf_state()) {
    const torch::Tensor t = get(name);
    if (t.sizes() != p.sizes())
      throw std::runtime_error("load_hf_state: " + name + " is " + c10::str(t.sizes()) +
                               " in the checkpoint, the model expects " + c10::str(p.sizes()));
    p.copy_(t);
  }
}

void CausalLMImpl::init_weights(uint64_t seed) {
  torch::NoGradGuard no_grad;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const double std_dev = info_.initializer_range;
  // Drawn on the CPU in fp32 and then converted, so the values do not depend on the device.
  auto normal = [&](torch::Tensor& w) {
    w.copy_(torch::empty(w.sizes(), torch::kFloat).normal_(0.0, std_dev, gen));
  };
  for (const auto& item : named_modules()) {
    const auto& m = item.value();
    if (auto* lin = m->as<LinearImpl>()) {
      normal(lin->weight);
      if (lin->bias.defined()) lin->bias.zero_();
    } else if (auto* emb = m->as<EmbeddingImpl>()) {
      normal(emb->weight);
      if (emb->padding_idx >= 0) emb->weight[emb->padding_idx].zero_();
    } else if (auto* norm = m->as<RMSNormImpl>()) {
      norm->weight.fill_(norm->unit_offset ? 0.0 : 1.0);  // Gemma's (1 + w) starts at 0
    }
  }
}

void CausalLMImpl::set_attention(AttentionFn fn) {
  attention_ = fn ? std::move(fn) : default_attention();
}

}  // namespace studio::trainer
