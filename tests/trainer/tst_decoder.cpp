// The decoder: Hugging Face parameter names and counts per architecture, tied embeddings,
// init, weight loading, the attention seam, notes for ignored settings, and an fp64
// finite-difference check of the whole model's gradient.
#include "studio/trainer/model/decoder.h"

#include <torch/torch.h>

#include <QtTest>

#include "central_difference.h"

#include <cmath>
#include <set>

using namespace studio::trainer;

namespace {

// A tiny config.json of `arch`; `extra` is spliced into the object.
studio::ModelInfo tiny(const QString& arch, const QString& extra = QString()) {
  const QString json = QStringLiteral(
                           R"({"architectures": ["%1"], "hidden_size": 16,
      "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4,
      "num_key_value_heads": 2, "vocab_size": 32, "max_position_embeddings": 64,
      "rms_norm_eps": 1e-6, "rope_theta": 10000.0%2})")
                           .arg(arch, extra.isEmpty() ? QString() : ", " + extra);
  std::string error;
  auto info = studio::parse_model_info(json.toStdString(), error);
  if (!info) qFatal("tiny config: %s", error.c_str());
  return *info;
}

ModelOptions quiet(torch::Dtype dtype = torch::kFloat) {
  ModelOptions o;
  o.dtype = dtype;
  o.warn = [](const std::string&) {};
  return o;
}

std::set<std::string> names_of(CausalLM& m) {
  std::set<std::string> out;
  for (const auto& [name, p] : m->hf_state()) out.insert(name);
  return out;
}

// The names transformers gives these architectures (per layer, then the rest).
std::set<std::string> expected_names(int64_t layers, const QStringList& per_layer, bool tied) {
  std::set<std::string> out = {"model.embed_tokens.weight", "model.norm.weight"};
  if (!tied) out.insert("lm_head.weight");
  for (int64_t i = 0; i < layers; ++i)
    for (const QString& n : per_layer)
      out.insert(QStringLiteral("model.layers.%1.%2").arg(i).arg(n).toStdString());
  return out;
}

const QStringList kLlamaLayer = {
    "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
    "self_attn.o_proj.weight", "mlp.gate_proj.weight",    "mlp.up_proj.weight",
    "mlp.down_proj.weight",    "input_layernorm.weight",  "post_attention_layernorm.weight"};

torch::Tensor ids_2x5() {
  return torch::tensor({{1, 5, 9, 3, 7}, {2, 0, 31, 4, 4}}, torch::kLong);
}
torch::Tensor pos_2x5() {
  return torch::arange(5).repeat({2, 1});
}

}  // namespace

class TestDecoder : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() { torch::manual_seed(3); }
  void namesAndCount_data();
  void namesAndCount();
  void tiedWeightsShareStorage();
  void logitsShape();
  void initIsDeterministic();
  void loadsHfState();
  void attentionSeam();
  void notesIgnoredSettings();
  void refusesUnsupported();
  void paddingRowGetsNoGradient();
  void finiteDifferenceGradient_data();
  void finiteDifferenceGradient();
};

void TestDecoder::namesAndCount_data() {
  QTest::addColumn<QString>("arch");
  QTest::addColumn<QString>("extra");
  QTest::addColumn<QStringList>("extra_layer_names");
  QTest::addColumn<bool>("tied");
  QTest::newRow("llama") << "LlamaForCausalLM" << QString() << QStringList() << false;
  QTest::newRow("llama tied, biases")
      << "LlamaForCausalLM"
      << R"("tie_word_embeddings": true, "attention_bias": true, "mlp_bias": true)"
      << QStringList{"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias",
                     "self_attn.o_proj.bias", "mlp.gate_proj.bias",    "mlp.up_proj.bias",
                     "mlp.down_proj.bias"}
      << true;
  QTest::newRow("mistral ignores bias keys")
      << "MistralForCausalLM"
      << R"("attention_bias": true, "mlp_bias": true)" << QStringList() << false;
  QTest::newRow("qwen2: q/k/v biases")
      << "Qwen2ForCausalLM"
      << R"("tie_word_embeddings": true)"
      << QStringList{"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"}
      << true;
  QTest::newRow("qwen3: q_norm, k_norm, explicit head_dim")
      << "Qwen3ForCausalLM"
      << R"("head_dim": 8)" << QStringList{"self_attn.q_norm.weight", "self_attn.k_norm.weight"}
      << false;
  QTest::newRow("phi-3: fused projections")
      << "Phi3ForCausalLM" << QString()
      << QStringList{"self_attn.qkv_proj.weight", "self_attn.o_proj.weight",
                     "mlp.gate_up_proj.weight", "mlp.down_proj.weight",
                     "input_layernorm.weight", "post_attention_layernorm.weight"}
      << false;
  QTest::newRow("glm-4: fused MLP, q/k/v biases, sandwich norms")
      << "Glm4ForCausalLM" << R"("attention_bias": true)"
      << QStringList{"self_attn.q_proj.weight", "self_attn.k_proj.weight",
                     "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                     "self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias",
                     "mlp.gate_up_proj.weight", "mlp.down_proj.weight",
                     "input_layernorm.weight", "post_attention_layernorm.weight",
                     "post_self_attn_layernorm.weight", "post_mlp_layernorm.weight"}
      << false;
  QTest::newRow("gemma-3: q/k norms, four norms, tied")
      << "Gemma3ForCausalLM" << R"("tie_word_embeddings": true)"
      << QStringList{"self_attn.q_proj.weight", "self_attn.k_proj.weight",
                     "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                     "self_attn.q_norm.weight", "self_attn.k_norm.weight",
                     "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                     "input_layernorm.weight", "post_attention_layernorm.weight",
                     "pre_feedforward_layernorm.weight", "post_feedforward_layernorm.weight"}
      << true;
  // The checkpoints' per-expert names (transformers 5 fuses them in memory, and saves these).
  QTest::newRow("qwen2-moe: router, experts, shared expert and its gate")
      << "Qwen2MoeForCausalLM"
      << R"("num_experts": 2, "num_experts_per_tok": 1, "moe_intermediate_size": 8,
            "shared_expert_intermediate_size": 12)"
      << QStringList{"self_attn.q_proj.weight", "self_attn.k_proj.weight",
                     "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                     "self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias",
                     "mlp.gate.weight",
                     "mlp.experts.0.gate_proj.weight", "mlp.experts.0.up_proj.weight",
                     "mlp.experts.0.down_proj.weight", "mlp.experts.1.gate_proj.weight",
                     "mlp.experts.1.up_proj.weight", "mlp.experts.1.down_proj.weight",
                     "mlp.shared_expert.gate_proj.weight", "mlp.shared_expert.up_proj.weight",
                     "mlp.shared_expert.down_proj.weight", "mlp.shared_expert_gate.weight",
                     "input_layernorm.weight", "post_attention_layernorm.weight"}
      << false;
  QTest::newRow("qwen3-moe: q/k norms, router, experts")
      << "Qwen3MoeForCausalLM"
      << R"("num_experts": 2, "num_experts_per_tok": 2, "moe_intermediate_size": 8,
            "head_dim": 8)"
      << QStringList{"self_attn.q_proj.weight", "self_attn.k_proj.weight",
                     "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                     "self_attn.q_norm.weight", "self_attn.k_norm.weight", "mlp.gate.weight",
                     "mlp.experts.0.gate_proj.weight", "mlp.experts.0.up_proj.weight",
                     "mlp.experts.0.down_proj.weight", "mlp.experts.1.gate_proj.weight",
                     "mlp.experts.1.up_proj.weight", "mlp.experts.1.down_proj.weight",
                     "input_layernorm.weight", "post_attention_layernorm.weight"}
      << false;
}

void TestDecoder::namesAndCount() {
  QFETCH(QString, arch);
  QFETCH(QString, extra);
  QFETCH(QStringList, extra_layer_names);
  QFETCH(bool, tied);
  const studio::ModelInfo info = tiny(arch, extra);
  CausalLM model(info, quiet());
  // Rows naming a whole layer (their first entry is a projection) replace LLaMA's list.
  const bool whole = !extra_layer_names.isEmpty() && extra_layer_names.contains("input_layernorm.weight");
  QCOMPARE(names_of(model),
           expected_names(2, whole ? extra_layer_names : kLlamaLayer + extra_layer_names, tied));
  int64_t total = 0;
  for (const auto& [name, p] : model->hf_state()) total += p.numel();
  QCOMPARE(total, info.parameter_count());
  const auto shapes = model->expected_shapes();
  if (!info.fused_qkv)
    QCOMPARE(shapes.at("model.layers.1.self_attn.k_proj.weight"),
             (std::vector<int64_t>{info.num_kv_heads * info.head_dim, 16}));
  if (info.qk_norm)
    QCOMPARE(shapes.at("model.layers.0.self_attn.q_norm.weight"),
             (std::vector<int64_t>{info.head_dim}));
}

void TestDecoder::tiedWeightsShareStorage() {
  CausalLM model(tiny("Qwen2ForCausalLM", R"("tie_word_embeddings": true)"), quiet());
  model->init_weights(1);
  QVERIFY(!model->lm_head);
  QCOMPARE(model->lm_head_weight().data_ptr(), model->model->embed_tokens->weight.data_ptr());
  // The gradient of the shared weight collects both uses: the embedding rows of the inputs
  // and the LM head. Untie by hand and the two parts sum to the tied gradient.
  model->logits(ids_2x5(), pos_2x5()).pow(2).sum().backward();
  const torch::Tensor tied_grad = model->model->embed_tokens->weight.grad().clone();
  CausalLM untied(tiny("Qwen2ForCausalLM"), quiet());
  untied->load_hf_state([&](const std::string& n) {
    return n == "lm_head.weight" ? model->lm_head_weight().detach()
                                 : model->named_parameters()[n].detach();
  });
  untied->logits(ids_2x5(), pos_2x5()).pow(2).sum().backward();
  const torch::Tensor sum =
      untied->model->embed_tokens->weight.grad() + untied->lm_head->weight.grad();
  QVERIFY(torch::allclose(tied_grad, sum, 1e-5, 1e-6));
}

void TestDecoder::logitsShape() {
  CausalLM model(tiny("Qwen3ForCausalLM", R"("head_dim": 8)"), quiet(torch::kBFloat16));
  model->init_weights(2);
  const torch::Tensor logits = model->logits(ids_2x5(), pos_2x5());
  QCOMPARE(logits.sizes(), (std::vector<int64_t>{2, 5, 32}));
  QCOMPARE(logits.scalar_type(), torch::kBFloat16);
  QCOMPARE(model->hidden_states(ids_2x5(), pos_2x5()).sizes(), (std::vector<int64_t>{2, 5, 16}));
  QVERIFY(torch::isfinite(logits).all().item<bool>());
}

void TestDecoder::initIsDeterministic() {
  const auto info = tiny("LlamaForCausalLM", R"("attention_bias": true, "pad_token_id": 3)");
  CausalLM a(info, quiet()), b(info, quiet()), c(info, quiet(torch::kDouble));
  a->init_weights(42);
  b->init_weights(42);
  c->init_weights(42);
  for (const auto& [name, p] : a->hf_state()) {
    const torch::Tensor q = b->named_parameters()[name];
    QVERIFY2(torch::equal(p, q), name.c_str());
    // Same values in another dtype: drawn in fp32, then converted.
    QVERIFY2(torch::equal(p, c->named_parameters()[name].to(torch::kFloat)), name.c_str());
  }
  b->init_weights(43);
  QVERIFY(!torch::equal(a->lm_head->weight, b->lm_head->weight));
  const torch::Tensor w = a->lm_head->weight;
  QVERIFY(std::abs(w.std().item<double>() - 0.02) < 0.003);
  QVERIFY(torch::equal(a->model->norm->weight, torch::ones({16})));
  QCOMPARE(a->model->layers->ptr<DecoderLayerImpl>(0)
               ->self_attn->o_proj->bias.abs()
               .sum()
               .item<double>(),
           0.0);
  QCOMPARE(a->model->embed_tokens->weight[3].abs().sum().item<double>(), 0.0);  // padding row
}

void TestDecoder::loadsHfState() {
  const auto info = tiny("Qwen2ForCausalLM");
  CausalLM src(info, quiet(torch::kDouble)), dst(info, quiet(torch::kBFloat16));
  src->init_weights(5);
  std::map<std::string, torch::Tensor> store;
  for (const auto& [name, p] : src->hf_state()) store[name] = p.detach();
  dst->load_hf_state([&](const std::string& n) { return store.at(n); });
  for (const auto& [name, p] : dst->hf_state()) {
    QCOMPARE(p.scalar_type(), torch::kBFloat16);
    QVERIFY2(torch::equal(p, store[name].to(torch::kBFloat16)), name.c_str());
  }
  store["model.norm.weight"] = torch::ones({15});
  try {
    dst->load_hf_state([&](const std::string& n) { return store.at(n); });
    QFAIL("a wrong shape was accepted");
  } catch (const std::runtime_error& e) {
    QVERIFY2(QString(e.what()).contains("model.norm.weight is [15]"), e.what());
  }
  store.erase("model.norm.weight");
  QVERIFY_THROWS_EXCEPTION(std::out_of_range,
                           dst->load_hf_state([&](const std::string& n) { return store.at(n); }));
}

void TestDecoder::attentionSeam() {
  CausalLM model(tiny("LlamaForCausalLM"), quiet(torch::kDouble));
  model->init_weights(9);
  const torch::Tensor want = model->logits(ids_2x5(), pos_2x5());
  std::vector<int64_t> layers;
  model->set_attention([&](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           const AttentionCall& call) {
    layers.push_back(call.layer);
    if (!call.causal || std::abs(call.scale - 0.5) > 1e-15) throw std::logic_error("bad call");
    if (q.sizes() != torch::IntArrayRef{2, 4, 5, 4} || k.sizes() != torch::IntArrayRef{2, 2, 5, 4})
      throw std::logic_error("bad shapes");
    return local_attention(q, k, v, call.causal, call.scale);
  });
  QVERIFY(torch::equal(model->logits(ids_2x5(), pos_2x5()), want));
  QCOMPARE(layers, (std::vector<int64_t>{0, 1}));
  // An attention that ignores causality changes the result: the seam is really used.
  model->set_attention(
      [](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
         const AttentionCall& call) { return local_attention(q, k, v, false, call.scale); });
  QVERIFY(!torch::allclose(model->logits(ids_2x5(), pos_2x5()), want));
  model->set_attention(nullptr);
  QVERIFY(torch::equal(model->logits(ids_2x5(), pos_2x5()), want));
}

void TestDecoder::notesIgnoredSettings() {
  std::vector<std::string> notes;
  ModelOptions o = quiet();
  o.warn = [&](const std::string& s) { notes.push_back(s); };
  // The sliding window is applied (docs/MODELS.md), so only the dropout is noted.
  CausalLM mistral(
      tiny("MistralForCausalLM", R"("sliding_window": 4096, "attention_dropout": 0.1)"), o);
  QCOMPARE(notes.size(), size_t(1));
  QVERIFY(QString::fromStdString(notes[0]).contains("attention_dropout 0.1"));
  QCOMPARE(mistral->info().layer_window(1), int64_t(4096));
  notes.clear();
  // Qwen2's sliding_window is inert unless use_sliding_window, and then from max_window_layers.
  CausalLM qwen(tiny("Qwen2ForCausalLM", R"("sliding_window": 4096, "use_sliding_window": false)"),
                o);
  QVERIFY(notes.empty());
  QCOMPARE(qwen->info().layer_window(1), int64_t(0));
  CausalLM qwen_sw(tiny("Qwen2ForCausalLM", R"("sliding_window": 64, "use_sliding_window": true,
                                              "max_window_layers": 1)"),
                   o);
  QCOMPARE(qwen_sw->info().layer_window(0), int64_t(0));
  QCOMPARE(qwen_sw->info().layer_window(1), int64_t(64));
}

void TestDecoder::refusesUnsupported() {
  try {
    CausalLM m(tiny("LlamaForCausalLM", R"("hidden_act": "gelu")"), quiet());
    QFAIL("gelu was accepted");
  } catch (const std::invalid_argument& e) {
    QVERIFY2(QString(e.what()).contains(
                 "hidden_act gelu is not supported (allowed: silu, gelu_pytorch_tanh)"),
             e.what());
  }
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, CausalLM(tiny("GemmaForCausalLM"), quiet()));
}

// nn.Embedding(padding_idx=pad_token_id) semantics: the pad row never learns.
void TestDecoder::paddingRowGetsNoGradient() {
  CausalLM model(tiny("LlamaForCausalLM", R"("pad_token_id": 4)"), quiet());
  model->init_weights(4);
  model->hidden_states(ids_2x5(), pos_2x5()).sum().backward();
  const torch::Tensor g = model->model->embed_tokens->weight.grad();
  QCOMPARE(g[4].abs().sum().item<double>(), 0.0);
  QVERIFY(g[7].abs().sum().item<double>() > 0);
}

void TestDecoder::finiteDifferenceGradient_data() {
  QTest::addColumn<QString>("arch");
  QTest::addColumn<QString>("extra");
  QTest::newRow("llama, yarn")
      << "LlamaForCausalLM"
      << R"("rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16})";
  QTest::newRow("qwen2 tied") << "Qwen2ForCausalLM"
                              << R"("tie_word_embeddings": true)";
  QTest::newRow("qwen3") << "Qwen3ForCausalLM"
                         << R"("head_dim": 8)";
  // Windows of 3 over 5 tokens, both soft caps (their tanh derivatives), Gemma norms.
  QTest::newRow("gemma-2") << "Gemma2ForCausalLM"
                           << R"("head_dim": 8, "query_pre_attn_scalar": 6, "sliding_window": 3,
                                "attn_logit_softcapping": 2.0, "final_logit_softcapping": 3.0)";
  QTest::newRow("gemma-3") << "Gemma3ForCausalLM"
                           << R"("head_dim": 8, "sliding_window": 2,
                                "layer_types": ["sliding_attention", "full_attention"],
                                "rope_parameters": {"sliding_attention": {"rope_theta": 10.0},
                                  "full_attention": {"rope_theta": 1000.0}})";
  QTest::newRow("phi-3, partial longrope") << "Phi3ForCausalLM"
      << R"("head_dim": 8, "sliding_window": 4, "rope_parameters": {"rope_type": "longrope",
            "partial_rotary_factor": 0.5, "short_factor": [1.0, 2.0], "long_factor": [2.0, 3.0],
            "original_max_position_embeddings": 4, "rope_theta": 100.0})";
  QTest::newRow("glm-4") << "Glm4ForCausalLM" << R"("head_dim": 8, "attention_bias": true)";
  // The loss adds 0.7 x the auxiliary loss (a padding token left out of it); its gradient
  // reaches the routers inside the layers' backward.
  QTest::newRow("qwen2-moe + aux loss") << "Qwen2MoeForCausalLM"
      << R"("num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 8,
            "shared_expert_intermediate_size": 12, "mlp_only_layers": [0])";
  QTest::newRow("qwen3-moe + aux loss") << "Qwen3MoeForCausalLM"
      << R"("num_experts": 4, "num_experts_per_tok": 3, "moe_intermediate_size": 8,
            "norm_topk_prob": true, "head_dim": 8)";
}

// L = sum(logits * W) in fp64; dL/dp for a few random elements of several parameters by
// central differences. Truncation O(h^2) and rounding O(eps/h) both stay far below 1e-6.
void TestDecoder::finiteDifferenceGradient() {
  QFETCH(QString, arch);
  QFETCH(QString, extra);
  CausalLM model(tiny(arch, extra), quiet(torch::kDouble));
  model->init_weights(11);
  // A larger init than 0.02 so that every path carries a visible gradient.
  {
    torch::NoGradGuard g;
    for (auto& [name, p] : model->hf_state()) p.add_(torch::randn_like(p) * 0.3);
  }
  const torch::Tensor ids = ids_2x5(), pos = torch::tensor({{0, 1, 2, 3, 4}, {7, 8, 9, 10, 11}});
  const torch::Tensor w = torch::randn({2, 5, 32}, torch::kDouble);
  MoeAuxLoss* aux = model->moe_aux();
  const torch::Tensor mask = torch::tensor({{1, 1, 1, 1, 1}, {1, 1, 1, 1, 0}});
  auto loss = [&] {
    if (!aux) return (model->logits(ids, pos) * w).sum();
    aux->begin(mask);  // stays active through the backward that may follow
    const torch::Tensor l = (model->logits(ids, pos) * w).sum();
    return l + 0.7 * aux->finish(0.7, {});
  };
  loss().backward();
  auto params = model->named_parameters();
  torch::NoGradGuard no_grad;
  const double h = 1e-5;
  for (const char* name :
       {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
        "model.layers.0.self_attn.k_proj.weight", "model.layers.1.self_attn.v_proj.weight",
        "model.layers.1.mlp.down_proj.weight", "model.layers.0.input_layernorm.weight",
        "model.norm.weight", "model.layers.1.self_attn.q_norm.weight",
        "model.layers.0.self_attn.q_proj.bias", "model.layers.1.mlp.gate.weight",
        "model.layers.0.mlp.gate.weight", "model.layers.1.mlp.experts.2.up_proj.weight",
        "model.layers.1.mlp.shared_expert_gate.weight"}) {
    if (!params.contains(name)) continue;
    torch::Tensor flat = params[name].view({-1});
    const torch::Tensor grad = params[name].grad().view({-1});
    for (int trial = 0; trial < 3; ++trial) {
      // Embedding rows of ids that occur, so the element matters.
      const int64_t i = std::string(name) == "model.embed_tokens.weight"
                            ? 9 * 16 + trial
                            : torch::randint(flat.numel(), {1}).item<int64_t>();
      const double numeric = central_difference(flat, i, h, loss);
      const double analytic = grad[i].item<double>();
      QVERIFY2(std::abs(numeric - analytic) <= 1e-6 * std::max(std::abs(analytic), 1e-2),
               qPrintable(QStringLiteral("%1[%2]: numeric %3, analytic %4")
                              .arg(name)
                              .arg(i)
                              .arg(numeric, 0, 'g', 12)
                              .arg(analytic, 0, 'g', 12)));
    }
  }
}

QTEST_MAIN(TestDecoder)
#include "tst_decoder.moc"
