// The MFU formula (studio/model_facts/model_flops.h) on published model shapes, the peak table by the
// device names CUDA reports, and the new event fields (total_steps, device_name, peak_tflops,
// model_tflops, mfu, gpus[].util_percent/power_w/power_limit_w) written and read back.
#include <QtTest>

#include <cmath>

#include "studio/runs/events.h"
#include "studio/model_facts/model_flops.h"
#include "studio/model_facts/model_info.h"

using namespace studio;

namespace {

ModelInfo qwen25_7b() {
  std::string error;
  const auto info = read_model_info(STUDIO_TEST_FIXTURES_DIR "/models/qwen2.5-7b-shape", error);
  if (!info) qFatal("%s", error.c_str());
  return *info;
}

}  // namespace

class TestModelFlops : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void matmulWeightsAreTheModelLessLookupsNormsAndBiases();
  void forwardAndTrainingFlops();
  void spansOfPackedRows();
  void peakByDeviceName_data();
  void peakByDeviceName();
  void peakFromTheEnvironment();
  void eventFieldsRoundTrip();
  void mixtureOfExpertsCountsAllAndActiveParameters_data();
  void mixtureOfExpertsCountsAllAndActiveParameters();
};

// Qwen2.5-7B has 7,615,616,512 parameters; of them the embedding (152064 x 3584), 57 norms
// and the q/k/v biases take part in no matrix product, while the untied LM head does.
void TestModelFlops::matmulWeightsAreTheModelLessLookupsNormsAndBiases() {
  const ModelInfo m = qwen25_7b();
  QCOMPARE(m.parameter_count(), int64_t(7'615'616'512));
  const double embedding = 152064.0 * 3584, norms = 57.0 * 3584, biases = 28.0 * (3584 + 2 * 512);
  QCOMPARE(matmul_parameters(m), double(m.parameter_count()) - embedding - norms - biases);
}

void TestModelFlops::forwardAndTrainingFlops() {
  const ModelInfo m = qwen25_7b();
  const double n = matmul_parameters(m);
  // One 32k sequence: 2 N S + 2 L Hq D S (S + 1), with D = 3584 / 28 = 128.
  const double s = 32768;
  const double spans = attention_span_term({32768});
  QCOMPARE(spans, s * (s + 1));
  const double fwd = 2 * n * s + 2 * 28 * 28 * 128 * s * (s + 1);
  QCOMPARE(forward_flops(m, s, spans), fwd);
  QCOMPARE(training_flops(m, s, spans, false), 3 * fwd);
  QCOMPARE(training_flops(m, s, spans, true), 4 * fwd);
  // At 32k the attention is a third of the work per token for this model: the formula is not
  // the 6N rule of thumb.
  const double per_token = training_flops(m, s, spans, false) / s;
  QVERIFY(per_token > 1.4 * 6 * n && per_token < 1.6 * 6 * n);
}

void TestModelFlops::spansOfPackedRows() {
  QCOMPARE(attention_span_term({}), 0.0);
  QCOMPARE(attention_span_term({3, 5}), 3.0 * 4 + 5.0 * 6);
  // Sliding windows (Gemma 2: every other layer, window 4): the mean over the layers; a span of
  // 10 in a windowed layer sees 1 + 2 + 3 + 4 + 4 x 6 keys = (4 x 5 + 2 x 4 x 6) / 2.
  ModelInfo gemma;
  gemma.num_layers = 2;
  gemma.sliding_window = 4;
  gemma.sliding_layers = {true, false};
  QCOMPARE(attention_span_term({10, 3}, &gemma),
           ((10.0 * 11 + 3.0 * 4) + (4.0 * 5 + 2 * 4.0 * 6 + 3.0 * 4)) / 2);
}

void TestModelFlops::peakByDeviceName_data() {
  QTest::addColumn<QString>("name");
  QTest::addColumn<QString>("dtype");
  QTest::addColumn<double>("peak");  // 0: unknown
  QTest::newRow("H100 SXM") << "NVIDIA H100 80GB HBM3" << "bfloat16" << 989.4;
  QTest::newRow("H100 PCIe") << "NVIDIA H100 PCIe" << "bfloat16" << 756.5;
  QTest::newRow("H100 NVL") << "NVIDIA H100 NVL" << "float16" << 835.0;
  QTest::newRow("H100 fp32") << "NVIDIA H100 80GB HBM3" << "float32" << 66.9;
  QTest::newRow("H200") << "NVIDIA H200" << "bfloat16" << 989.4;
  QTest::newRow("GH200") << "NVIDIA GH200 480GB" << "bfloat16" << 989.4;
  QTest::newRow("A100 SXM") << "NVIDIA A100-SXM4-80GB" << "bfloat16" << 312.0;
  QTest::newRow("A100 PCIe") << "NVIDIA A100 80GB PCIe" << "bfloat16" << 312.0;
  QTest::newRow("L40S") << "NVIDIA L40S" << "bfloat16" << 362.05;
  QTest::newRow("L40") << "NVIDIA L40" << "bfloat16" << 181.05;
  QTest::newRow("L4") << "NVIDIA L4" << "bfloat16" << 121.0;
  QTest::newRow("A10G") << "NVIDIA A10G" << "bfloat16" << 70.0;
  QTest::newRow("RTX 4090") << "NVIDIA GeForce RTX 4090" << "bfloat16" << 165.2;
  QTest::newRow("B200") << "NVIDIA B200" << "bfloat16" << 2250.0;
  QTest::newRow("V100 has no bf16") << "Tesla V100-SXM2-32GB" << "bfloat16" << 0.0;
  QTest::newRow("cpu") << "cpu" << "float32" << 0.0;
  QTest::newRow("unknown GPU") << "NVIDIA Quadro P1000" << "float16" << 0.0;
}

void TestModelFlops::peakByDeviceName() {
  QFETCH(QString, name);
  QFETCH(QString, dtype);
  QFETCH(double, peak);
  qunsetenv("STUDIO_PEAK_TFLOPS");
  const auto got = peak_tflops(name.toStdString(), dtype.toStdString());
  if (peak == 0) QVERIFY2(!got, qPrintable(QString::number(got.value_or(-1))));
  else QCOMPARE(got.value_or(-1), peak);
}

void TestModelFlops::peakFromTheEnvironment() {
  qputenv("STUDIO_PEAK_TFLOPS", "1.5");
  QCOMPARE(peak_tflops("cpu", "float32").value_or(-1), 1.5);
  QCOMPARE(peak_tflops("NVIDIA H100 80GB HBM3", "bfloat16").value_or(-1), 1.5);
  qputenv("STUDIO_PEAK_TFLOPS", "fast");  // not a number: the table
  QCOMPARE(peak_tflops("NVIDIA H100 80GB HBM3", "bfloat16").value_or(-1), 989.4);
  qunsetenv("STUDIO_PEAK_TFLOPS");
}

void TestModelFlops::eventFieldsRoundTrip() {
  StartEvent start;
  start.total_steps = 1200;
  start.device_name = "NVIDIA H100 80GB HBM3";
  start.peak_tflops = 989.4;
  const StartEvent s2 = nlohmann::json(start).get<StartEvent>();
  QCOMPARE(s2.total_steps, int64_t(1200));
  QCOMPARE(s2.device_name, start.device_name);
  QCOMPARE(s2.peak_tflops, 989.4);
  StartEvent unknown;  // peak not known: written as null, read as NaN
  QVERIFY(nlohmann::json(unknown)["peak_tflops"].is_null() ||
          std::isnan(nlohmann::json(unknown)["peak_tflops"].get<double>()));

  StepEvent step;
  step.step = 7;
  step.model_tflops = 412.5;
  step.mfu = 0.4169;
  GpuMemory g;
  g.util_percent = 97;
  g.power_w = 652.25;
  g.power_limit_w = 700;
  step.gpus = {g, GpuMemory{}};
  const nlohmann::json j = step;
  QVERIFY(!j["gpus"][1].contains("util_percent"));  // not measured: not written
  const StepEvent back = j.get<StepEvent>();
  QCOMPARE(back.model_tflops, 412.5);
  QCOMPARE(back.mfu, 0.4169);
  QCOMPARE(back.gpus[0].util_percent, 97.0);
  QCOMPARE(back.gpus[0].power_w, 652.25);
  QCOMPARE(back.gpus[0].power_limit_w, 700.0);
  QVERIFY(std::isnan(back.gpus[1].power_w));
  StepEvent none;
  none.step = 1;
  QVERIFY(!nlohmann::json(none).contains("mfu"));
}

// The published sizes of Qwen3-30B-A3B (30.5B parameters, 3.3B active) and Qwen1.5-MoE-A2.7B
// (14.3B, 2.7B), exactly as their checkpoints hold them. The MFU counts the active ones' matrix
// products: the router, the picked experts, the shared expert and its gate, attention, the head.
void TestModelFlops::mixtureOfExpertsCountsAllAndActiveParameters_data() {
  QTest::addColumn<QString>("model");
  QTest::addColumn<qint64>("all");
  QTest::addColumn<qint64>("active");
  QTest::addColumn<qint64>("lookups_norms_biases");
  // Embedding 151936 x 2048, 97 norms of 2048, 48 x 2 q/k norms of 128.
  QTest::newRow("Qwen3-30B-A3B") << "qwen3-30b-a3b-shape" << qint64(30532122624)
                                 << qint64(3353032704)
                                 << qint64(151936LL * 2048 + 97 * 2048 + 96 * 128);
  // Embedding, 49 norms, 24 x q/k/v biases of 2048 each.
  QTest::newRow("Qwen1.5-MoE-A2.7B") << "qwen1.5-moe-a2.7b-shape" << qint64(14315784192)
                                     << qint64(2689173504)
                                     << qint64(151936LL * 2048 + 49 * 2048 + 24 * 3 * 2048);
}

void TestModelFlops::mixtureOfExpertsCountsAllAndActiveParameters() {
  QFETCH(QString, model);
  QFETCH(qint64, all);
  QFETCH(qint64, active);
  QFETCH(qint64, lookups_norms_biases);
  std::string error;
  const auto info =
      read_model_info((QStringLiteral(STUDIO_TEST_FIXTURES_DIR "/models/") + model).toStdString(), error);
  QVERIFY2(info, error.c_str());
  QVERIFY(info->is_moe());
  QCOMPARE(info->moe_layer_count(), info->num_layers);
  QCOMPARE(info->parameter_count(), all);
  QCOMPARE(info->active_parameter_count(), active);
  QCOMPARE(matmul_parameters(*info), double(active - lookups_norms_biases));
  QCOMPARE(info->sliding_window, int64_t(0));  // use_sliding_window: false

  // transformers 5 saves Qwen3-MoE's expert count as num_local_experts; an MoE architecture
  // whose every layer is dense (mlp_only_layers) is a dense model.
  const std::string shape = R"({"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 16,
      "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 2,
      "vocab_size": 32, "moe_intermediate_size": 8, "num_experts_per_tok": 2, )";
  const auto local = parse_model_info(shape + R"("num_local_experts": 4})", error);
  QVERIFY2(local, error.c_str());
  QCOMPARE(local->num_experts, int64_t(4));
  const auto dense = parse_model_info(shape + R"("num_experts": 4, "mlp_only_layers": [0, 1]})", error);
  QVERIFY2(dense, error.c_str());
  QVERIFY(!dense->is_moe());
  QCOMPARE(dense->parameter_count(), dense->active_parameter_count());
}

QTEST_GUILESS_MAIN(TestModelFlops)
#include "tst_model_flops.moc"
