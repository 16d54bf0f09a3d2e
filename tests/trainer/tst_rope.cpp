// RoPE against values derived by hand from Hugging Face's formulas (modeling_rope_utils.py),
// rope_scaling parsing, HF's rotate_half convention, and position-id invariance (a rank's
// non-contiguous positions give the rows of the full sequence at those positions).
#include "studio/trainer/model/rope.h"

#include <torch/torch.h>

#include <QtTest>

#include <cfloat>
#include <cmath>

using namespace studio::trainer;

namespace {

// A tiny config.json; `rope` is spliced in as its rope_scaling.
studio::ModelInfo config(int64_t head_dim, double theta, const QString& rope,
                         int64_t max_positions = 2048) {
  const QString json = QStringLiteral(
                           R"({"architectures": ["LlamaForCausalLM"], "hidden_size": %1,
      "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 1,
      "vocab_size": 8, "max_position_embeddings": %2, "rope_theta": %3%4})")
                           .arg(head_dim)
                           .arg(max_positions)
                           .arg(theta, 0, 'g', 17)
                           .arg(rope.isEmpty() ? QString() : ", \"rope_scaling\": " + rope);
  std::string error;
  auto info = studio::parse_model_info(json.toStdString(), error);
  if (!info) qFatal("config: %s", error.c_str());
  return *info;
}

}  // namespace

class TestRope : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void inverseFrequencies_data();
  void inverseFrequencies();
  void parsesRopeScaling_data();
  void parsesRopeScaling();
  void rotateHalfConvention();
  void cosSinAreFp32AndScaled();
  void positionIdInvariance();
  void refusesUnknownType();
};

void TestRope::inverseFrequencies_data() {
  QTest::addColumn<int>("head_dim");
  QTest::addColumn<double>("theta");
  QTest::addColumn<QString>("rope");
  QTest::addColumn<int>("seq_len");
  QTest::addColumn<QList<double>>("inv_freq");
  QTest::addColumn<double>("attention");

  // default: inv_freq[i] = theta^(-2i/d); d = 8, theta = 1e4: 10^(-i).
  QTest::newRow("default") << 8 << 1e4 << QString() << 0 << QList<double>{1, 0.1, 0.01, 0.001}
                           << 1.0;
  QTest::newRow("default type") << 8 << 1e4 << R"({"rope_type": "default"})" << 0
                                << QList<double>{1, 0.1, 0.01, 0.001} << 1.0;
  // linear: inv_freq / factor (positions / factor).
  QTest::newRow("linear") << 8 << 1e4 << R"({"type": "linear", "factor": 4.0})" << 0
                          << QList<double>{0.25, 0.025, 0.0025, 0.00025} << 1.0;
  // llama3, theta = 1e6, d = 8: inv = 1, 10^-1.5, 1e-3, 10^-4.5; wavelengths 2*pi/inv = 6.28,
  // 198.7, 6283, 198692. With original 8192, low 1, high 4: wavelengths < 8192/4 = 2048 keep
  // their frequency, > 8192/1 are divided by factor 8, and 6283 is blended:
  // s = (8192/6283.19 - 1) / (4 - 1) = 0.101266, inv = (1 - s) * 1e-3 / 8 + s * 1e-3.
  QTest::newRow("llama3")
      << 8 << 1e6
      << R"({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})"
      << 0 << QList<double>{1.0, 0.03162277660168379, 0.00021360754402756864, 3.952847075210474e-06}
      << 1.0;
  // yarn, theta = 1e4, d = 16, factor 4, original context 4096. Correction dims
  // d * ln(4096 / (beta * 2 pi)) / (2 ln 1e4): beta_fast 32 -> 2.618 (floor 2), beta_slow 1 ->
  // 5.628 (ceil 6). ramp_i = clamp((i - 2) / 4, 0, 1); inv_i = e_i / 4 * ramp_i +
  // e_i * (1 - ramp_i) with e_i = 10^(-i/2). Attention factor 0.1 * ln 4 + 1.
  QTest::newRow("yarn")
      << 16 << 1e4
      << R"({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096})" << 0
      << QList<double>{1.0,     0.31622776601683794,  0.1,     0.02569350598886808,
                       0.00625, 0.001383496476323666, 0.00025, 7.905694150420948e-05}
      << 1.138629436111989;
  // Without truncation the ramp runs from 2.61806 to 5.62836.
  QTest::newRow("yarn untruncated")
      << 16 << 1e4
      << R"({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096, "truncate": false})"
      << 0
      << QList<double>{1.0,
                       0.31622776601683794,
                       0.1,
                       0.02861360881198889,
                       0.006556971521129435,
                       0.0012856320307266882,
                       0.00025,
                       7.905694150420948e-05}
      << 1.138629436111989;
  // No original_max_position_embeddings: the context is max_position_embeddings (2048).
  // beta_fast 16 -> 16 ln(2048 / (32 pi)) / (2 ln 1e4) = 2.618 (floor 2), beta_slow 2 -> 4.424
  // (ceil 5): ramp_i = clamp((i - 2) / 3, 0, 1).
  QTest::newRow("yarn betas, context from max_position_embeddings")
      << 16 << 1e4 << R"({"type": "yarn", "factor": 4.0, "beta_fast": 16, "beta_slow": 2})" << 0
      << QList<double>{1.0,
                       0.31622776601683794,
                       0.1,
                       0.023717082451262847,
                       0.005000000000000001,
                       0.0007905694150420948,
                       0.00025,
                       7.905694150420948e-05}
      << 1.138629436111989;
  // mscale and mscale_all_dim: attention = get_mscale(4, 2) / get_mscale(4, 1)
  // = (0.2 ln 4 + 1) / (0.1 ln 4 + 1); equal ones cancel to 1 (DeepSeek-V3's config).
  QTest::newRow("yarn mscale ratio")
      << 16 << 1e4
      << R"({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096, "mscale": 2, "mscale_all_dim": 1})"
      << 0 << QList<double>{1.0,     0.31622776601683794,  0.1,     0.02569350598886808,
                            0.00625, 0.001383496476323666, 0.00025, 7.905694150420948e-05}
      << 1.121751143713058;
  QTest::newRow("yarn explicit attention_factor")
      << 16 << 1e4
      << R"({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096, "attention_factor": 0.5})"
      << 0 << QList<double>{1.0,     0.31622776601683794,  0.1,     0.02569350598886808,
                            0.00625, 0.001383496476323666, 0.00025, 7.905694150420948e-05}
      << 0.5;
  // dynamic NTK up to max_position_embeddings (2048): the default frequencies.
  QTest::newRow("dynamic short") << 8 << 1e4 << R"({"type": "dynamic", "factor": 2.0})" << 1000
                                 << QList<double>{1, 0.1, 0.01, 0.001} << 1.0;
  // At seq_len 4096: base' = 1e4 * (2 * 4096 / 2048 - 1)^(8 / 6) = 1e4 * 3^(4/3), so
  // inv_i = 10^(-i) * 3^(-i/3).
  QTest::newRow("dynamic long") << 8 << 1e4 << R"({"type": "dynamic", "factor": 2.0})" << 4096
                                << QList<double>{1.0, 0.06933612743506347, 0.004807498567691361,
                                                 0.0003333333333333334}
                                << 1.0;
}

void TestRope::inverseFrequencies() {
  QFETCH(int, head_dim);
  QFETCH(double, theta);
  QFETCH(QString, rope);
  QFETCH(int, seq_len);
  QFETCH(QList<double>, inv_freq);
  QFETCH(double, attention);
  const RopeFrequencies f = rope_frequencies(config(head_dim, theta, rope), seq_len);
  QCOMPARE(f.inv_freq.scalar_type(), torch::kFloat);
  QCOMPARE(f.inv_freq.numel(), int64_t(inv_freq.size()));
  for (int i = 0; i < inv_freq.size(); ++i) {
    const double got = f.inv_freq[i].item<double>();
    // fp32 pow and reciprocal against exact values: a few fp32 ulps.
    QVERIFY2(std::abs(got - inv_freq[i]) <= 8 * FLT_EPSILON * inv_freq[i],
             qPrintable(QStringLiteral("inv_freq[%1]: got %2, want %3")
                            .arg(i)
                            .arg(got, 0, 'g', 9)
                            .arg(inv_freq[i], 0, 'g', 9)));
  }
  QVERIFY(std::abs(f.attention_scaling - attention) <= 1e-15);
}

void TestRope::parsesRopeScaling_data() {
  QTest::addColumn<QString>("rope");
  QTest::addColumn<QString>("fragment");  // of the parse error; empty: parses
  QTest::newRow("llama3 needs low_freq_factor")
      << R"({"rope_type": "llama3", "factor": 8.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})"
      << "'low_freq_factor' is missing";
  QTest::newRow("linear needs factor") << R"({"type": "linear"})"
                                       << "'factor' is missing";
  QTest::newRow("factor must be positive") << R"({"type": "linear", "factor": 0})"
                                           << "must be positive";
  QTest::newRow("longrope needs both factor lists")
      << R"({"type": "longrope", "long_factor": [1], "original_max_position_embeddings": 4})"
      << "'short_factor' is missing";
  QTest::newRow("longrope factors: one per rotating pair")
      << R"({"type": "longrope", "long_factor": [1], "short_factor": [1],
             "original_max_position_embeddings": 4})"
      << "need 4 values each";
  QTest::newRow("unknown types are kept")
      << R"({"type": "ntk-by-parts", "factor": 2})" << QString();
}

void TestRope::parsesRopeScaling() {
  QFETCH(QString, rope);
  QFETCH(QString, fragment);
  const QString json =
      QStringLiteral(
          R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 8, "intermediate_size": 8,
      "num_hidden_layers": 1, "num_attention_heads": 1, "vocab_size": 8, "rope_scaling": %1})")
          .arg(rope);
  std::string error;
  const auto info = studio::parse_model_info(json.toStdString(), error);
  if (fragment.isEmpty()) {
    QVERIFY2(info.has_value(), error.c_str());
    QCOMPARE(QString::fromStdString(studio::decoder_support_error(*info)),
             QStringLiteral("rope_scaling type ntk-by-parts is not supported (allowed: default, "
                            "linear, dynamic, llama3, yarn, longrope)"));
    return;
  }
  QVERIFY(!info.has_value());
  QVERIFY2(QString::fromStdString(error).contains(fragment), error.c_str());
}

// HF: q * cos + rotate_half(q) * sin with rotate_half([x1, x2]) = [-x2, x1]: dimension i pairs
// with i + d/2 and rotates by position * inv_freq[i].
void TestRope::rotateHalfConvention() {
  const RopeFrequencies f = rope_frequencies(config(4, 1e4, QString()));  // inv = 1, 0.01
  const torch::Tensor pos = torch::tensor({{3}}, torch::kLong);
  auto [cos, sin] = rope_cos_sin(f, pos);
  const torch::Tensor x = torch::tensor({1.0, 2.0, 3.0, 4.0}, torch::kDouble).view({1, 1, 1, 4});
  const torch::Tensor y = apply_rope(x, cos.to(torch::kDouble), sin.to(torch::kDouble)).view({4});
  const double a0 = 3.0 * 1.0, a1 = 3.0 * double(0.01f);
  const double want[4] = {1 * std::cos(a0) - 3 * std::sin(a0), 2 * std::cos(a1) - 4 * std::sin(a1),
                          3 * std::cos(a0) + 1 * std::sin(a0), 4 * std::cos(a1) + 2 * std::sin(a1)};
  for (int i = 0; i < 4; ++i)  // the angles went through fp32 cos/sin
    QVERIFY2(
        std::abs(y[i].item<double>() - want[i]) <= 1e-6,
        qPrintable(
            QStringLiteral("y[%1] = %2, want %3").arg(i).arg(y[i].item<double>()).arg(want[i])));
}

void TestRope::cosSinAreFp32AndScaled() {
  const studio::ModelInfo info = config(
      16, 1e4, R"({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096})");
  const RopeFrequencies f = rope_frequencies(info);
  auto [cos, sin] = rope_cos_sin(f, torch::zeros({2, 3}, torch::kLong));
  QCOMPARE(cos.scalar_type(), torch::kFloat);
  QCOMPARE(cos.sizes(), (std::vector<int64_t>{2, 3, 16}));
  // Position 0: cos = attention factor, sin = 0 (yarn scales both).
  QVERIFY(torch::allclose(cos, torch::full_like(cos, f.attention_scaling)));
  QCOMPARE(sin.abs().max().item<double>(), 0.0);
}

// Zigzag SP: rank 0 of 2 holds chunks 0 and 3 of 4. Its cos/sin and rotated q must be exactly
// the full sequence's rows at those positions; two batch rows may hold different positions.
void TestRope::positionIdInvariance() {
  const RopeFrequencies f = rope_frequencies(config(
      8, 5e5,
      R"({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64})"));
  const int64_t seq = 16;
  const torch::Tensor full_pos = torch::arange(seq).view({1, seq});
  auto [cos_full, sin_full] = rope_cos_sin(f, full_pos);
  const torch::Tensor q = torch::randn({1, 2, seq, 8});
  const torch::Tensor q_full = apply_rope(q, cos_full, sin_full);

  const torch::Tensor local = torch::tensor({0, 1, 2, 3, 12, 13, 14, 15}, torch::kLong);
  auto [cos_l, sin_l] = rope_cos_sin(f, local.view({1, -1}));
  QVERIFY(torch::equal(cos_l, cos_full.index_select(1, local)));
  QVERIFY(torch::equal(sin_l, sin_full.index_select(1, local)));
  const torch::Tensor q_l = apply_rope(q.index_select(2, local), cos_l, sin_l);
  QVERIFY(torch::equal(q_l, q_full.index_select(2, local)));

  const torch::Tensor two_rows = torch::stack({local, local.flip(0) + 100});
  auto [cos2, sin2] = rope_cos_sin(f, two_rows);
  auto [cos_far, sin_far] = rope_cos_sin(f, (local.flip(0) + 100).view({1, -1}));
  QVERIFY(torch::equal(cos2[0], cos_l[0]) && torch::equal(cos2[1], cos_far[0]));
  QVERIFY(torch::equal(sin2[1], sin_far[0]));
}

void TestRope::refusesUnknownType() {
  studio::ModelInfo info = config(8, 1e4, QString());
  info.rope_scaling = "ntk-by-parts";
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, rope_frequencies(info));
}

QTEST_MAIN(TestRope)
#include "tst_rope.moc"
