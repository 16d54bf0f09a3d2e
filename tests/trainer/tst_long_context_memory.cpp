// The memory estimate's long-sequence terms (config/memory_estimate.cpp, LongContextCosts)
// against what the engine allocates, measured on the CPU by the counting allocator
// (host_allocator.h), component by component, within 5%: one decoder layer's saved activations
// (whole, and with the MLP tiled), the checkpointed layer inputs on the device and offloaded to
// host memory, what the model keeps outside its layers, and one MLP tile's backward.
// The fused loss's own peak is held to the estimate in tst_training_data.
#include <QtTest>

#include <torch/torch.h>

#include <map>
#include <string>

#include "studio/config/memory_estimate.h"
#include "studio/model_facts/model_info.h"
#include "studio/config/run_config.h"
#include "studio/trainer/tensors/host_allocator.h"
#include "studio/trainer/model/decoder.h"

using namespace studio::trainer;

namespace {

constexpr int64_t kTokens = 2048;

// A GQA model of `layers` layers: 4 query heads over 2 K/V heads of 16, MLP 176 wide, of the
// architecture `arch` (qwen2; qwen3: an RMSNorm over each query and key head; phi3: fused
// projections, 3/4 of each head rotating; glm4: interleaved half rotary, sandwich norms;
// gemma2/gemma3: Gemma norms, sandwich norms, GELU, a 512-token window in every layer (the
// math path), soft caps (gemma2), a second RoPE for the sliding layers (gemma3); qwen2moe:
// every layer top-2 of 8 experts plus a shared expert; qwen3moe: top-4 of 16, renormalised).
studio::ModelInfo gqa(int layers, const std::string& arch = "qwen2") {
  std::string types;
  for (int i = 0; i < layers; ++i) types += std::string(i ? ", " : "") + "\"sliding_attention\"";
  const std::map<std::string, std::string> extra = {
      {"qwen2", R"("architectures": ["Qwen2ForCausalLM"])"},
      {"qwen3", R"("architectures": ["Qwen3ForCausalLM"])"},
      {"phi3", R"("architectures": ["Phi3ForCausalLM"], "partial_rotary_factor": 0.75)"},
      {"glm4", R"("architectures": ["Glm4ForCausalLM"], "attention_bias": true)"},
      {"gemma2", R"("architectures": ["Gemma2ForCausalLM"], "sliding_window": 512,
          "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "layer_types": [)" +
                     types + "]"},
      {"gemma3", R"("architectures": ["Gemma3ForCausalLM"], "sliding_window": 512,
          "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
            "full_attention": {"rope_type": "default", "rope_theta": 1000000.0}},
          "layer_types": [)" + types + "]"},
      {"qwen2moe", R"("architectures": ["Qwen2MoeForCausalLM"], "num_experts": 8,
          "num_experts_per_tok": 2, "moe_intermediate_size": 48,
          "shared_expert_intermediate_size": 96)"},
      {"qwen3moe", R"("architectures": ["Qwen3MoeForCausalLM"], "num_experts": 16,
          "num_experts_per_tok": 4, "moe_intermediate_size": 32, "norm_topk_prob": true)"}};
  const std::string json =
      "{" + extra.at(arch) + R"(, "hidden_size": 64, "intermediate_size": 176, "head_dim": 16,
      "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
      "max_position_embeddings": 65536, "rms_norm_eps": 1e-6, "num_hidden_layers": )" +
      std::to_string(layers) + "}";
  std::string error;
  auto info = studio::parse_model_info(json, error);
  if (!info) qFatal("model: %s", error.c_str());
  return *info;
}

struct Options {
  bool bf16 = false, checkpointing = false, offload = false, tiled = false;
  std::string arch = "qwen2";
  int tiled_budget_mib = 0;
};

studio::MemoryEstimate estimate(const Options& o, int layers, int64_t tokens = kTokens) {
  studio::RunConfig cfg;
  cfg.cutoff_len = tokens;
  cfg.bf16 = o.bf16;
  cfg.gradient_checkpointing = o.checkpointing;
  cfg.offload_activations = o.offload;
  cfg.tiled_mlp = o.tiled;
  cfg.tiled_mlp_budget_mib = o.tiled_budget_mib;
  studio::EstimateOptions opt;
  opt.cpu = true;  // what is measured here: the engine on the CPU
  return studio::estimate_memory(cfg, gqa(layers, o.arch), opt);
}

struct Held {
  double device = 0, host = 0;  // bytes the forward left allocated, outside / inside offload
};

// What one forward with grad leaves allocated for its backward (the returned hidden states
// included), then runs the backward so that nothing stays behind.
Held forward_held(const Options& o, int layers) {
  ModelOptions mo;
  mo.dtype = o.bf16 ? torch::kBFloat16 : torch::kFloat;
  mo.warn = [](const std::string&) {};
  CausalLM model(gqa(layers, o.arch), mo);
  model->init_weights(3);
  model->set_gradient_checkpointing(o.checkpointing);
  LongContextOptions lc;
  lc.offload_activations = o.offload;
  lc.tiled_mlp = o.tiled;
  model->set_long_context(lc);
  const torch::Tensor ids = torch::randint(512, {1, kTokens}, torch::kLong);
  const torch::Tensor pos = torch::arange(kTokens).view({1, kTokens});
  const auto before = host_allocator_stats();
  torch::Tensor h = model->hidden_states(ids, pos);
  const auto after = host_allocator_stats();
  h.sum().backward();
  return {double((after.allocated - after.offloaded) - (before.allocated - before.offloaded)),
          double(after.offloaded - before.offloaded)};
}

void compare(const char* what, double measured, double predicted) {
  qInfo("%s: measured %.0f B, estimated %.0f B (%+.1f%%)", what, measured, predicted,
        100.0 * (predicted - measured) / std::max(measured, 1.0));
  QVERIFY2(std::fabs(measured - predicted) <= 0.05 * std::fabs(measured),
           qPrintable(QString("%1: measured %2 B, estimated %3 B")
                          .arg(what)
                          .arg(measured, 0, 'f', 0)
                          .arg(predicted, 0, 'f', 0)));
}

}  // namespace

class TestLongContextMemory : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() {
    install_counting_host_allocator();
    torch::manual_seed(1);
  }
  void layerActivations_data();
  void layerActivations();
  void checkpointedInputs_data();
  void checkpointedInputs();
  void outsideTheLayers_data();
  void outsideTheLayers();
  void mlpTileBackward_data();
  void mlpTileBackward();
};

void TestLongContextMemory::layerActivations_data() {
  QTest::addColumn<bool>("bf16");
  QTest::addColumn<bool>("tiled");
  QTest::addColumn<QString>("arch");
  QTest::newRow("fp32") << false << false << "qwen2";
  QTest::newRow("fp32 tiled MLP") << false << true << "qwen2";
  QTest::newRow("bf16") << true << false << "qwen2";
  QTest::newRow("bf16 tiled MLP") << true << true << "qwen2";
  QTest::newRow("bf16 Qwen3 (q/k norms)") << true << false << "qwen3";
  QTest::newRow("bf16 Phi-3 (fused, partial rotary)") << true << false << "phi3";
  QTest::newRow("bf16 GLM-4 (sandwich norms)") << true << false << "glm4";
  QTest::newRow("fp32 GLM-4 tiled MLP") << false << true << "glm4";
  QTest::newRow("bf16 Gemma 2 (window, soft caps)") << true << false << "gemma2";
  QTest::newRow("fp32 Gemma 3 tiled MLP") << false << true << "gemma3";
  QTest::newRow("bf16 Qwen2-MoE (shared expert)") << true << false << "qwen2moe";
  QTest::newRow("fp32 Qwen3-MoE (renormalised top-k), tiled_mlp on") << false << true << "qwen3moe";
}

// One layer's saved set: a 3-layer model's forward keeps two layers' more than a 1-layer one.
void TestLongContextMemory::layerActivations() {
  QFETCH(bool, bf16);
  QFETCH(bool, tiled);
  QFETCH(QString, arch);
  Options o;
  o.bf16 = bf16;
  o.tiled = tiled;
  o.arch = arch.toStdString();
  const double measured = (forward_held(o, 3).device - forward_held(o, 1).device) / 2;
  compare("one layer's activations", measured, estimate(o, 1).long_context.layer);
}

void TestLongContextMemory::checkpointedInputs_data() {
  QTest::addColumn<bool>("bf16");
  QTest::addColumn<bool>("offload");
  QTest::newRow("fp32") << false << false;
  QTest::newRow("bf16") << true << false;
  QTest::newRow("fp32 offloaded") << false << true;
  QTest::newRow("bf16 offloaded") << true << true;
}

// With checkpointing a layer keeps its input: on the device, or offloaded to host memory
// (nothing per layer left on the device).
void TestLongContextMemory::checkpointedInputs() {
  QFETCH(bool, bf16);
  QFETCH(bool, offload);
  Options o;
  o.bf16 = bf16;
  o.checkpointing = true;
  o.offload = offload;
  const Held four = forward_held(o, 4), one = forward_held(o, 1);
  const auto e4 = estimate(o, 4).long_context, e1 = estimate(o, 1).long_context;
  if (!offload) {
    compare("three checkpointed inputs", four.device - one.device, e4.checkpoints - e1.checkpoints);
    QCOMPARE(four.host, 0.0);
  } else {
    compare("four offloaded inputs", four.host, e4.offloaded_activations);
    QVERIFY2(std::fabs(four.device - one.device) <= 0.05 * one.device,
             "offloaded inputs take nothing per layer on the device");
  }
}

void TestLongContextMemory::outsideTheLayers_data() {
  QTest::addColumn<bool>("bf16");
  QTest::addColumn<QString>("arch");
  QTest::newRow("fp32") << false << "qwen2";
  QTest::newRow("bf16") << true << "qwen2";
  QTest::newRow("bf16 Phi-3 (partial rotary)") << true << "phi3";
  QTest::newRow("bf16 Gemma 3 (two RoPEs, Gemma norm)") << true << "gemma3";
}

// A 1-layer checkpointed model keeps its one input and what lies outside the layers.
void TestLongContextMemory::outsideTheLayers() {
  QFETCH(bool, bf16);
  QFETCH(QString, arch);
  Options o;
  o.bf16 = bf16;
  o.arch = arch.toStdString();
  o.checkpointing = true;
  const auto lc = estimate(o, 1).long_context;
  compare("outside the layers", forward_held(o, 1).device - lc.checkpoints, lc.outside);
}

void TestLongContextMemory::mlpTileBackward_data() {
  QTest::addColumn<bool>("bf16");
  QTest::addColumn<int>("budget_mib");  // 0: the default (the layer input's size)
  QTest::newRow("fp32") << false << 0;
  QTest::newRow("bf16") << true << 0;
  QTest::newRow("fp32, 1 MiB tiles") << false << 1;
  QTest::newRow("bf16, 1 MiB tiles") << true << 1;
}

// The tiled MLP's backward: above what it holds before, one tile's recomputed activations and
// their gradients at a time.
void TestLongContextMemory::mlpTileBackward() {
  QFETCH(bool, bf16);
  QFETCH(int, budget_mib);
  Options o;
  o.bf16 = bf16;
  o.tiled = true;
  o.tiled_budget_mib = budget_mib;
  // Long enough that the weights' own gradient temporaries (a bf16 weight's new gradient
  // before it is accumulated) are small beside a tile's working set, as they are in practice.
  const int64_t tokens = 4 * kTokens;
  const auto lc = estimate(o, 1, tokens).long_context;
  const auto info = gqa(1);
  const auto dtype = bf16 ? torch::kBFloat16 : torch::kFloat;
  MLP mlp(info, torch::TensorOptions().dtype(dtype));
  {
    torch::NoGradGuard no_grad;
    for (auto& p : mlp->parameters()) p.normal_(0, 0.02);
  }
  const torch::Tensor x = torch::randn({1, tokens, 64}).to(dtype).requires_grad_();
  const torch::Tensor g = torch::randn({1, tokens, 64}).to(dtype);
  // A first backward gives the weights their gradients, which later ones accumulate into (the
  // model states' part of the estimate, not the MLP's working set).
  mlp->forward(x, lc.mlp_tile_tokens).backward(g);
  x.mutable_grad() = torch::Tensor();
  torch::Tensor y = mlp->forward(x, lc.mlp_tile_tokens);
  const int64_t before = host_allocator_stats().allocated;
  reset_host_allocator_peak();
  y.backward(g);
  // The input's gradient is the backward's result, not its working set.
  const double result = double(x.numel()) * double(c10::elementSize(dtype));
  compare("one MLP tile's backward", double(host_allocator_stats().peak - before) - result,
          lc.mlp_tile);
}

QTEST_MAIN(TestLongContextMemory)
#include "tst_long_context_memory.moc"
