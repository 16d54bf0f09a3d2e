// Activation checkpointing: per-layer recomputation gives the gradients of the plain forward
// (bitwise here on the CPU, where the recomputation repeats the same kernels), including the
// input's and the tied embedding's, and really recomputes instead of keeping activations. The
// long-sequence options change where things are kept, not what is computed: the checkpointed
// inputs offloaded to host memory, and the MLP over sequence tiles.
#include "studio/trainer/tensors/host_allocator.h"
#include "studio/trainer/model/activation_checkpoint.h"
#include "studio/trainer/model/decoder.h"

#include <torch/torch.h>

#include <QtTest>

using namespace studio::trainer;

namespace {

studio::ModelInfo tiny(const QString& arch, bool tied) {
  const QString json = QStringLiteral(
                           R"({"architectures": ["%1"], "hidden_size": 32,
      "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4,
      "num_key_value_heads": 2, "head_dim": 8, "vocab_size": 64, "max_position_embeddings": 128,
      "tie_word_embeddings": %2})")
                           .arg(arch, tied ? "true" : "false");
  std::string error;
  auto info = studio::parse_model_info(json.toStdString(), error);
  if (!info) qFatal("tiny config: %s", error.c_str());
  return *info;
}

using Grads = std::map<std::string, torch::Tensor>;

// Loss and parameter gradients of one forward/backward with checkpointing on or off.
std::pair<torch::Tensor, Grads> run(CausalLM& model, bool checkpointing, const torch::Tensor& ids,
                                    const torch::Tensor& pos,
                                    const LongContextOptions& long_context = {}) {
  model->zero_grad();
  model->set_gradient_checkpointing(checkpointing);
  model->set_long_context(long_context);
  const torch::Tensor loss = model->logits(ids, pos).log_softmax(-1).mean().neg();
  loss.backward();
  Grads grads;
  for (const auto& [name, p] : model->hf_state()) grads[name] = p.grad().clone();
  return {loss.detach(), grads};
}

double max_rel(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item<double>();
}

}  // namespace

class TestCheckpointing : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() { torch::manual_seed(5); }
  void sameGradients_data();
  void sameGradients();
  void recomputesInBackward();
  void longContextOptionsSameGradients_data();
  void longContextOptionsSameGradients();
  void offloadKeepsInputsInHostMemory();
  void tiledMlpNeverHoldsTheWholeIntermediate();
  void inputWithoutGradStillTrainsParameters();
  void noGradModeJustRuns();
};

void TestCheckpointing::sameGradients_data() {
  QTest::addColumn<QString>("arch");
  QTest::addColumn<bool>("tied");
  QTest::addColumn<int>("dtype");
  QTest::newRow("llama fp32") << "LlamaForCausalLM" << false << int(torch::kFloat);
  QTest::newRow("qwen2 tied fp32") << "Qwen2ForCausalLM" << true << int(torch::kFloat);
  QTest::newRow("qwen3 fp64") << "Qwen3ForCausalLM" << false << int(torch::kDouble);
}

void TestCheckpointing::sameGradients() {
  QFETCH(QString, arch);
  QFETCH(bool, tied);
  QFETCH(int, dtype);
  ModelOptions options;
  options.dtype = static_cast<torch::Dtype>(dtype);
  CausalLM model(tiny(arch, tied), options);
  model->init_weights(17);
  const torch::Tensor ids = torch::randint(64, {2, 24}, torch::kLong);
  // Zigzag-like positions: two non-contiguous chunks per row.
  const torch::Tensor pos =
      torch::cat({torch::arange(0, 12), torch::arange(36, 48)}).repeat({2, 1});
  const auto [loss_plain, plain] = run(model, false, ids, pos);
  const auto [loss_ckpt, ckpt] = run(model, true, ids, pos);
  QVERIFY(torch::equal(loss_plain, loss_ckpt));
  QCOMPARE(plain.size(), ckpt.size());
  int bitwise = 0;
  for (const auto& [name, g] : plain) {
    const torch::Tensor& c = ckpt.at(name);
    QVERIFY2(
        max_rel(c, g) <= 1e-6,
        qPrintable(
            QStringLiteral("%1: relative difference %2").arg(name.c_str()).arg(max_rel(c, g))));
    bitwise += torch::equal(c, g);
  }
  qInfo("%d of %zu gradients bitwise equal", bitwise, plain.size());
}

// Count the attention calls: a checkpointed backward runs every layer's forward once more.
void TestCheckpointing::recomputesInBackward() {
  CausalLM model(tiny("LlamaForCausalLM", false), ModelOptions{});
  model->init_weights(1);
  int calls = 0;
  model->set_attention([&](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           const AttentionCall& call) {
    ++calls;
    return local_attention(q, k, v, call.causal, call.scale);
  });
  const torch::Tensor ids = torch::randint(64, {1, 8}, torch::kLong);
  const torch::Tensor pos = torch::arange(8).view({1, 8});
  model->set_gradient_checkpointing(true);
  const torch::Tensor loss = model->logits(ids, pos).sum();
  QCOMPARE(calls, 2);
  loss.backward();
  QCOMPARE(calls, 4);
  model->set_gradient_checkpointing(false);
  model->logits(ids, pos).sum().backward();
  QCOMPARE(calls, 6);
}

void TestCheckpointing::longContextOptionsSameGradients_data() {
  QTest::addColumn<bool>("checkpointing");
  QTest::addColumn<bool>("offload");
  QTest::addColumn<int>("tile");  // tiled_mlp: rows per tile (0: untiled)
  QTest::newRow("offload") << true << true << 0;
  QTest::newRow("tiled, tile 5 of 48 rows") << true << false << 5;
  QTest::newRow("tiled, tile 1") << true << false << 1;
  QTest::newRow("tiled without checkpointing") << false << false << 7;
  QTest::newRow("offload and tiled") << true << true << 16;
}

// Against the plain forward, in fp64: the same loss and every parameter's gradient within
// rounding (tiles change the order of the weights' gradient sums).
void TestCheckpointing::longContextOptionsSameGradients() {
  QFETCH(bool, checkpointing);
  QFETCH(bool, offload);
  QFETCH(int, tile);
  ModelOptions options;
  options.dtype = torch::kDouble;
  CausalLM model(tiny("Qwen3ForCausalLM", false), options);
  model->init_weights(23);
  const torch::Tensor ids = torch::randint(64, {2, 24}, torch::kLong);
  const torch::Tensor pos = torch::arange(24).repeat({2, 1});
  const auto [loss_plain, plain] = run(model, false, ids, pos);
  LongContextOptions lc;
  lc.offload_activations = offload;
  lc.tiled_mlp = tile > 0;
  // The budget for `tile` rows: 4 intermediate values per row (studio::tiled_mlp_tile_tokens).
  lc.tiled_mlp_budget_bytes = 4.0 * 48 * 8 * tile;
  const auto [loss, grads] = run(model, checkpointing, ids, pos, lc);
  QVERIFY(std::fabs(loss.item<double>() - loss_plain.item<double>()) < 1e-12);
  for (const auto& [name, g] : plain)
    QVERIFY2(max_rel(grads.at(name), g) <= 1e-10,
             qPrintable(QStringLiteral("%1: relative difference %2")
                            .arg(name.c_str())
                            .arg(max_rel(grads.at(name), g))));
}

// Between the forward and the backward every layer's input lies in host memory, counted apart
// from the "device" bytes by the counting allocator; the backward takes them all back.
void TestCheckpointing::offloadKeepsInputsInHostMemory() {
  install_counting_host_allocator();
  CausalLM model(tiny("LlamaForCausalLM", false), ModelOptions{});
  model->init_weights(4);
  const torch::Tensor ids = torch::randint(64, {1, 40}, torch::kLong);
  const torch::Tensor pos = torch::arange(40).view({1, 40});
  model->set_gradient_checkpointing(true);
  LongContextOptions lc;
  lc.offload_activations = true;
  model->set_long_context(lc);
  const int64_t before = host_allocator_stats().offloaded;
  torch::Tensor loss = model->logits(ids, pos).sum();
  // Two layers, one [1, 40, 32] fp32 input each.
  QCOMPARE(host_allocator_stats().offloaded - before, int64_t(2 * 40 * 32 * 4));
  loss.backward();
  QCOMPARE(host_allocator_stats().offloaded, before);
  // Without grad nothing is stored.
  torch::NoGradGuard no_grad;
  model->logits(ids, pos);
  QCOMPARE(host_allocator_stats().offloaded, before);
}

// The MLP's [rows x intermediate] activations exist one tile at a time, in the forward of a
// checkpointed layer (no grad) and in its backward: the peak stays far below one whole set.
void TestCheckpointing::tiledMlpNeverHoldsTheWholeIntermediate() {
  install_counting_host_allocator();
  const QString json = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 16,
      "intermediate_size": 4096, "num_hidden_layers": 1, "num_attention_heads": 2,
      "num_key_value_heads": 1, "vocab_size": 16, "max_position_embeddings": 4096})";
  std::string error;
  auto info = studio::parse_model_info(json.toStdString(), error);
  QVERIFY(info);
  CausalLM model(*info, ModelOptions{});
  model->init_weights(6);
  const int64_t rows = 1024, whole = rows * 4096 * 4;  // one [rows x intermediate] fp32 tensor
  const torch::Tensor ids = torch::randint(16, {1, rows}, torch::kLong);
  const torch::Tensor pos = torch::arange(rows).view({1, rows});
  model->set_gradient_checkpointing(true);
  auto peak_of_step = [&](bool tiled) {
    LongContextOptions lc;
    lc.tiled_mlp = tiled;
    lc.tiled_mlp_budget_bytes = 4.0 * 4096 * 4 * 64;  // tiles of 64 rows
    model->set_long_context(lc);
    model->zero_grad();
    const int64_t base = host_allocator_stats().allocated;
    reset_host_allocator_peak();
    model->logits(ids, pos).sum().backward();
    return host_allocator_stats().peak - base;
  };
  const int64_t untiled = peak_of_step(false), tiled = peak_of_step(true);
  qInfo("step peak above the start: untiled %lld B, tiled %lld B (one [rows x f] tensor: %lld B)",
        static_cast<long long>(untiled), static_cast<long long>(tiled),
        static_cast<long long>(whole));
  QVERIFY2(untiled > 4 * whole, "the untiled MLP keeps gate, SiLU, up and their product");
  QVERIFY2(tiled < whole, "no whole [rows x intermediate] tensor under tiling");
}

// A frozen embedding makes the first layer's input a non-grad tensor; the layer's own
// parameters must still be trained.
void TestCheckpointing::inputWithoutGradStillTrainsParameters() {
  Linear lin(4, 3, true, torch::TensorOptions());
  {
    torch::NoGradGuard g;
    lin->weight.normal_();
    lin->bias.normal_();
  }
  const torch::Tensor x = torch::randn({5, 4});
  checkpoint([&](const torch::Tensor& in) { return lin->forward(in).tanh(); }, x).sum().backward();
  const torch::Tensor ckpt_w = lin->weight.grad().clone(), ckpt_b = lin->bias.grad().clone();
  lin->zero_grad();
  lin->forward(x).tanh().sum().backward();
  QVERIFY(torch::equal(ckpt_w, lin->weight.grad()));
  QVERIFY(torch::equal(ckpt_b, lin->bias.grad()));
}

void TestCheckpointing::noGradModeJustRuns() {
  CausalLM model(tiny("Qwen2ForCausalLM", true), ModelOptions{});
  model->init_weights(2);
  const torch::Tensor ids = torch::randint(64, {1, 6}, torch::kLong);
  const torch::Tensor pos = torch::arange(6).view({1, 6});
  const torch::Tensor want = model->logits(ids, pos);
  model->set_gradient_checkpointing(true);
  torch::NoGradGuard g;
  const torch::Tensor got = model->logits(ids, pos);
  QVERIFY(!got.requires_grad());
  QVERIFY(torch::equal(got, want));
}

QTEST_MAIN(TestCheckpointing)
#include "tst_checkpointing.moc"
