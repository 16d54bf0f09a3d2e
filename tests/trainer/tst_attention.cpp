// Block attention (math path) against a naive fp64 softmax(QK^T)V with repeated K/V heads:
// forward, lse, backward from given out/lse, the ring's split-key merge, chunking, fully
// masked rows, and finite differences through the LocalAttention autograd Function.
#include "studio/trainer/model/attention.h"

#include <torch/torch.h>

#include <QtTest>

#include "central_difference.h"

#include <cfloat>
#include <cmath>
#include <limits>

using namespace studio::trainer;

namespace {

struct Naive {
  torch::Tensor out, lse;
};

// The textbook formula in fp64: K/V repeated per query head (HF's repeat_kv), a dense mask.
Naive naive_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                      const BlockMask& m, double scale) {
  const int64_t group = q.size(1) / k.size(1);
  const torch::Tensor kr = k.to(torch::kDouble).repeat_interleave(group, 1);
  const torch::Tensor vr = v.to(torch::kDouble).repeat_interleave(group, 1);
  torch::Tensor s = torch::matmul(q.to(torch::kDouble), kr.transpose(-1, -2)) * scale;
  if (m.softcap > 0) s = torch::tanh(s / m.softcap) * m.softcap;
  const torch::Tensor qi =
      (m.positioned() ? m.q_pos : torch::arange(q.size(2)).add(m.q_start)).unsqueeze(1);
  const torch::Tensor kj =
      (m.positioned() ? m.k_pos : torch::arange(k.size(2)).add(m.k_start)).unsqueeze(0);
  const double inf = std::numeric_limits<double>::infinity();
  if (m.causal) s = s.masked_fill(kj > qi, -inf);
  if (m.window > 0) s = s.masked_fill((qi - kj) >= m.window, -inf);
  return {torch::matmul(torch::softmax(s, -1), vr), torch::logsumexp(s, -1)};
}

double max_rel_error(const torch::Tensor& got, const torch::Tensor& want) {
  const torch::Tensor g = got.to(torch::kDouble), w = want.to(torch::kDouble);
  const double scale = std::max(w.abs().max().item<double>(), 1e-300);
  return (g - w).abs().max().item<double>() / scale;
}

#define EXPECT_REL(got, want, tol)                                                  \
  do {                                                                              \
    const double err_ = max_rel_error(got, want);                                   \
    QVERIFY2(err_ <= (tol), qPrintable(QStringLiteral("%1: relative error %2 > %3") \
                                           .arg(#got)                               \
                                           .arg(err_, 0, 'g', 3)                    \
                                           .arg(double(tol), 0, 'g', 3)));          \
  } while (0)

struct Case {
  int64_t batch, q_heads, kv_heads, q_len, k_len, dim;
  BlockMask mask;
};

torch::Tensor randn(std::initializer_list<int64_t> shape) {
  return torch::randn(shape, torch::kDouble);
}

}  // namespace

Q_DECLARE_METATYPE(Case)

class TestAttention : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() { torch::manual_seed(7); }
  void forwardMatchesNaive_data();
  void forwardMatchesNaive();
  void backwardMatchesAutograd_data() { forwardMatchesNaive_data(); }
  void backwardMatchesAutograd();
  void splitKeysWithGlobalOutLseAreExact();
  void lowPrecisionAccumulatesInFp32();
  void rowsWithoutKeys();
  void finiteDifferences();
  void rejectsBadShapes();
};

void TestAttention::forwardMatchesNaive_data() {
  QTest::addColumn<Case>("c");
  QTest::addColumn<int64_t>("chunk");
  QTest::newRow("mha full") << Case{2, 3, 3, 5, 7, 4, {}} << int64_t(0);
  QTest::newRow("gqa causal") << Case{1, 4, 2, 6, 6, 8, {true}} << int64_t(0);
  QTest::newRow("mqa causal chunked") << Case{2, 4, 1, 9, 9, 4, {true}} << int64_t(2);
  QTest::newRow("gqa causal, chunk of 1") << Case{1, 6, 2, 7, 7, 4, {true}} << int64_t(1);
  // A later query block against an earlier, partly visible key block (ring-style offsets).
  QTest::newRow("offsets") << Case{1, 4, 2, 4, 6, 4, {true, 10, 8}} << int64_t(3);
  const auto shaped = [](BlockMask m, int64_t window, double softcap) {
    m.window = window;
    m.softcap = softcap;
    return m;
  };
  // Sliding windows (Gemma, Mistral): every row sees at most `window` keys; chunks skip the
  // keys before their first row's window.
  QTest::newRow("causal window 3, chunked")
      << Case{1, 4, 2, 9, 9, 4, shaped({true}, 3, 0)} << int64_t(2);
  QTest::newRow("window 4 with offsets") << Case{1, 4, 2, 5, 7, 4, shaped({true, 10, 6}, 4, 0)}
                                         << int64_t(2);
  QTest::newRow("soft cap 1.5, causal") << Case{2, 4, 2, 6, 6, 4, shaped({true}, 0, 1.5)}
                                        << int64_t(0);
  QTest::newRow("soft cap and window") << Case{1, 2, 1, 8, 8, 4, shaped({true}, 3, 0.8)}
                                       << int64_t(3);
  // A ring block: explicit, non-contiguous global positions (two zigzag chunks each side).
  BlockMask ring = shaped({false}, 5, 0);
  ring.q_pos = torch::tensor({8, 9, 10, 20, 21, 22}, torch::kLong);
  ring.k_pos = torch::tensor({4, 5, 6, 24, 25, 26}, torch::kLong);
  QTest::newRow("window over positions, non-causal") << Case{1, 4, 2, 6, 6, 4, ring} << int64_t(2);
  BlockMask own = shaped({true}, 4, 0);
  own.q_pos = own.k_pos = torch::tensor({0, 1, 2, 13, 14, 15}, torch::kLong);
  QTest::newRow("window over positions, causal") << Case{1, 4, 2, 6, 6, 4, own} << int64_t(0);
}

void TestAttention::forwardMatchesNaive() {
  QFETCH(Case, c);
  QFETCH(int64_t, chunk);
  const auto q = randn({c.batch, c.q_heads, c.q_len, c.dim});
  const auto k = randn({c.batch, c.kv_heads, c.k_len, c.dim});
  const auto v = randn({c.batch, c.kv_heads, c.k_len, c.dim});
  const double scale = 1.0 / std::sqrt(double(c.dim));
  const AttnBlockOut got = math_block_forward(q, k, v, c.mask, scale, chunk);
  const Naive want = naive_attention(q, k, v, c.mask, scale);
  QCOMPARE(got.out.sizes(), q.sizes());
  QCOMPARE(got.lse.sizes(), q.sizes().slice(0, 3));
  // Same fp64 arithmetic in another order: a few dozen ulps.
  EXPECT_REL(got.out, want.out, 64 * DBL_EPSILON);
  EXPECT_REL(got.lse, want.lse, 64 * DBL_EPSILON);
  // The dispatching entry point gives the same on the CPU.
  EXPECT_REL(attention_block_forward(q, k, v, c.mask, scale).out, want.out, 64 * DBL_EPSILON);
}

void TestAttention::backwardMatchesAutograd() {
  QFETCH(Case, c);
  QFETCH(int64_t, chunk);
  const auto q = randn({c.batch, c.q_heads, c.q_len, c.dim}).requires_grad_(true);
  const auto k = randn({c.batch, c.kv_heads, c.k_len, c.dim}).requires_grad_(true);
  const auto v = randn({c.batch, c.kv_heads, c.k_len, c.dim}).requires_grad_(true);
  const auto dout = randn({c.batch, c.q_heads, c.q_len, c.dim});
  const double scale = 0.37;
  naive_attention(q, k, v, c.mask, scale).out.backward(dout);
  torch::NoGradGuard no_grad;
  const AttnBlockOut fwd = math_block_forward(q, k, v, c.mask, scale, chunk);
  const AttnBlockGrads g =
      math_block_backward(dout, q, k, v, fwd.out, fwd.lse, c.mask, scale, chunk);
  EXPECT_REL(g.dq, q.grad(), 256 * DBL_EPSILON);
  EXPECT_REL(g.dk, k.grad(), 256 * DBL_EPSILON);
  EXPECT_REL(g.dv, v.grad(), 256 * DBL_EPSILON);
}

// What the zigzag ring does: attend q to two key blocks separately, merge (out, lse) in full
// precision, then run each block's backward with the MERGED out and lse. The gradients must be
// those of attention over the whole key range.
void TestAttention::splitKeysWithGlobalOutLseAreExact() {
  const int64_t split = 5, k_len = 12;
  const auto q = randn({2, 4, 8, 8}), k = randn({2, 2, k_len, 8}), v = randn({2, 2, k_len, 8});
  const auto dout = randn({2, 4, 8, 8});
  const double scale = 0.3;
  // Queries at positions 6..13 against keys 0..11, causal: the mask cuts through both blocks.
  const BlockMask whole{true, 6, 0}, first{true, 6, 0}, second{true, 6, split};
  const auto k1 = k.narrow(2, 0, split), v1 = v.narrow(2, 0, split);
  const auto k2 = k.narrow(2, split, k_len - split), v2 = v.narrow(2, split, k_len - split);

  AttnBlockOut merged = math_block_forward(q, k1, v1, first, scale);
  const AttnBlockOut b2 = math_block_forward(q, k2, v2, second, scale);
  merge_attention_blocks(merged.out, merged.lse, b2.out, b2.lse);
  const AttnBlockOut full = math_block_forward(q, k, v, whole, scale);
  EXPECT_REL(merged.out, full.out, 64 * DBL_EPSILON);
  EXPECT_REL(merged.lse, full.lse, 64 * DBL_EPSILON);

  const AttnBlockGrads g1 =
      math_block_backward(dout, q, k1, v1, merged.out, merged.lse, first, scale);
  const AttnBlockGrads g2 =
      math_block_backward(dout, q, k2, v2, merged.out, merged.lse, second, scale);
  const AttnBlockGrads want = math_block_backward(dout, q, k, v, full.out, full.lse, whole, scale);
  EXPECT_REL(g1.dq + g2.dq, want.dq, 256 * DBL_EPSILON);
  EXPECT_REL(torch::cat({g1.dk, g2.dk}, 2), want.dk, 256 * DBL_EPSILON);
  EXPECT_REL(torch::cat({g1.dv, g2.dv}, 2), want.dv, 256 * DBL_EPSILON);

  // With each block's OWN lse instead, the block gradients are not the global ones: the test
  // above would catch a backward that ignored the given out/lse.
  const AttnBlockOut own = math_block_forward(q, k1, v1, first, scale);
  const AttnBlockGrads wrong = math_block_backward(dout, q, k1, v1, own.out, own.lse, first, scale);
  QVERIFY(max_rel_error(wrong.dk, want.dk.narrow(2, 0, split)) > 1e-3);
}

// bf16 inputs: scores and sums in fp32, out in bf16, grads in fp32. The error against fp64 on
// the same (rounded) inputs is that of one bf16 rounding of the output, not of bf16 arithmetic.
void TestAttention::lowPrecisionAccumulatesInFp32() {
  const auto q = randn({1, 4, 64, 16}).to(torch::kBFloat16);
  const auto k = randn({1, 2, 64, 16}).to(torch::kBFloat16);
  const auto v = randn({1, 2, 64, 16}).to(torch::kBFloat16);
  const auto dout = randn({1, 4, 64, 16}).to(torch::kBFloat16);
  const BlockMask causal{true};
  const AttnBlockOut got = math_block_forward(q, k, v, causal, 0.25, 16);
  QCOMPARE(got.out.scalar_type(), torch::kBFloat16);
  QCOMPARE(got.lse.scalar_type(), torch::kFloat);
  const Naive want = naive_attention(q, k, v, causal, 0.25);
  EXPECT_REL(got.out, want.out, 1.0 / 256);  // bf16: 8 significant bits
  EXPECT_REL(got.lse, want.lse, 64 * FLT_EPSILON);

  const auto qd = q.to(torch::kDouble).requires_grad_(true);
  const auto kd = k.to(torch::kDouble).requires_grad_(true);
  const auto vd = v.to(torch::kDouble).requires_grad_(true);
  naive_attention(qd, kd, vd, causal, 0.25).out.backward(dout.to(torch::kDouble));
  // Given the exact out/lse, only fp32 arithmetic separates the grads from fp64.
  const AttnBlockGrads g = math_block_backward(dout, q, k, v, want.out.to(torch::kBFloat16),
                                               want.lse.to(torch::kFloat), causal, 0.25, 16);
  QCOMPARE(g.dq.scalar_type(), torch::kFloat);
  // D = rowsum(dout * out) sees out rounded to bf16: the error of one bf16 rounding.
  EXPECT_REL(g.dq, qd.grad(), 1.0 / 128);
  EXPECT_REL(g.dk, kd.grad(), 1.0 / 128);
  EXPECT_REL(g.dv, vd.grad(), 64 * FLT_EPSILON);
}

// Query positions 0..3 against keys at 2..5: rows 0 and 1 see nothing.
void TestAttention::rowsWithoutKeys() {
  const auto q = randn({1, 2, 4, 4}), k = randn({1, 1, 4, 4}), v = randn({1, 1, 4, 4});
  const BlockMask m{true, 0, 2};
  const AttnBlockOut r = math_block_forward(q, k, v, m, 0.5, 1);
  QVERIFY(std::isinf(r.lse[0][0][0].item<double>()) && r.lse[0][0][0].item<double>() < 0);
  QCOMPARE(r.out.narrow(2, 0, 2).abs().max().item<double>(), 0.0);
  const Naive want = naive_attention(q.narrow(2, 2, 2), k, v, BlockMask{true, 2, 2}, 0.5);
  EXPECT_REL(r.out.narrow(2, 2, 2), want.out, 64 * DBL_EPSILON);
  const AttnBlockGrads g =
      math_block_backward(randn({1, 2, 4, 4}), q, k, v, r.out, r.lse, m, 0.5, 1);
  QVERIFY(torch::isfinite(g.dq).all().item<bool>() && torch::isfinite(g.dk).all().item<bool>());
  QCOMPARE(g.dq.narrow(2, 0, 2).abs().max().item<double>(), 0.0);
  // A block nobody sees merges as a no-op.
  torch::Tensor out = r.out.clone(), lse = r.lse.clone();
  merge_attention_blocks(out, lse, torch::zeros_like(out), torch::full_like(lse, -INFINITY));
  QCOMPARE(max_rel_error(out, r.out), 0.0);
}

// Central differences of L = sum(out * w) through the autograd Function, every input element.
void TestAttention::finiteDifferences() {
  const auto q = randn({1, 2, 3, 4}).requires_grad_(true);
  const auto k = randn({1, 1, 3, 4}).requires_grad_(true);
  const auto v = randn({1, 1, 3, 4}).requires_grad_(true);
  const auto w = randn({1, 2, 3, 4});
  auto loss = [&] { return (local_attention(q, k, v, true, 0.5) * w).sum(); };
  loss().backward();
  torch::NoGradGuard no_grad;
  const double h = 1e-6;
  for (const torch::Tensor& x : {q, k, v}) {
    const torch::Tensor flat = x.view({-1});
    const torch::Tensor grad = x.grad().view({-1});
    for (int64_t i = 0; i < flat.numel(); ++i) {
      const double numeric = central_difference(flat, i, h, loss);
      const double analytic = grad[i].item<double>();
      // Central differences: O(h^2) truncation plus eps/h rounding, ~1e-9 here.
      QVERIFY2(std::abs(numeric - analytic) <= 1e-7 * std::max(1.0, std::abs(analytic)),
               qPrintable(QStringLiteral("element %1: numeric %2, analytic %3")
                              .arg(i)
                              .arg(numeric, 0, 'g', 12)
                              .arg(analytic, 0, 'g', 12)));
    }
  }
}

void TestAttention::rejectsBadShapes() {
  const auto q = randn({1, 3, 4, 4}), k = randn({1, 2, 4, 4});
  QVERIFY_THROWS_EXCEPTION(c10::Error, math_block_forward(q, k, k, {}, 1.0));
  QVERIFY_THROWS_EXCEPTION(
      c10::Error, math_block_forward(randn({1, 2, 4, 4}), k, randn({1, 2, 5, 4}), {}, 1.0));
}

QTEST_MAIN(TestAttention)
#include "tst_attention.moc"
