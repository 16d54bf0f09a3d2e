// The ATen-ops RMSNorm reference (trainer) against the loop reference (kernels): two independent
// implementations of the same formula, forward and autograd backward.
#include "studio/kernels/rmsnorm_ref.h"
#include "studio/trainer/rmsnorm_reference.h"

#include <torch/torch.h>

#include <QtTest>

#include <cfloat>
#include <cmath>
#include <vector>

using studio::trainer::rms_norm_reference;

namespace {

using Vec = std::vector<double>;

Vec to_vec(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kDouble).contiguous();
  return Vec(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

struct LoopResult {
  Vec y;
  Vec dx;
  Vec dw;
};

// The kernels' double loop reference on the same values (x flattened to [rows, cols]).
LoopResult loop_reference(const at::Tensor& x, const at::Tensor& w, const at::Tensor& dy,
                          double eps) {
  const std::int64_t cols = x.size(-1);
  const studio::kernels::RowsCols s{x.numel() / cols, cols};
  const Vec xv = to_vec(x), wv = to_vec(w), dyv = to_vec(dy);
  LoopResult r{Vec(xv.size()), Vec(xv.size()), Vec(wv.size())};
  studio::kernels::rmsnorm_forward_ref(xv.data(), wv.data(), r.y.data(), nullptr, s, eps);
  studio::kernels::rmsnorm_backward_ref(dyv.data(), xv.data(), wv.data(), r.dx.data(), r.dw.data(),
                                        s, eps);
  return r;
}

void expect_close(const Vec& got, const Vec& want, double rel, double abs_floor, const char* what) {
  QCOMPARE(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double tol = rel * std::abs(want[i]) + abs_floor;
    QVERIFY2(std::abs(got[i] - want[i]) <= tol, qPrintable(QStringLiteral("%1[%2]: got %3, want %4")
                                                               .arg(what)
                                                               .arg(i)
                                                               .arg(got[i], 0, 'g', 17)
                                                               .arg(want[i], 0, 'g', 17)));
  }
}

}  // namespace

class TestRmsNormReference : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() { torch::manual_seed(1234); }
  void forward_data();
  void forward();
  void backwardMatchesLoops();
  void rejectsMismatchedWeight();
};

void TestRmsNormReference::forward_data() {
  QTest::addColumn<int>("dtype");
  QTest::addColumn<double>("rel");
  // Double: both sides accumulate in fp64, (8 + sqrt(n)) * DBL_EPSILON as in tst_rmsnorm_ref.
  QTest::newRow("float64") << int(at::kDouble) << (8 + std::sqrt(515.0)) * DBL_EPSILON;
  // Float: fp32 accumulation (ATen's mean uses pairwise/vectorised sums, no worse).
  QTest::newRow("float32") << int(at::kFloat) << (8 + std::sqrt(515.0)) * FLT_EPSILON;
  // bf16 output: one rounding to 8 significant bits dominates.
  QTest::newRow("bfloat16") << int(at::kBFloat16) << 1.0 / 256 + 1e-5;
}

void TestRmsNormReference::forward() {
  QFETCH(int, dtype);
  QFETCH(double, rel);
  const auto type = static_cast<at::ScalarType>(dtype);
  const double eps = 1e-5;
  const at::Tensor x = torch::randn({2, 3, 515}, torch::kDouble).to(type);
  const at::Tensor w = torch::randn({515}, torch::kDouble).to(type);
  const at::Tensor y = rms_norm_reference(x, w, eps);
  QCOMPARE(y.scalar_type(), type);
  QCOMPARE(y.sizes(), x.sizes());
  // The loop reference sees the same (already rounded) inputs, in double.
  const LoopResult want = loop_reference(x, w, torch::zeros_like(x), eps);
  expect_close(to_vec(y), want.y, rel, 0.0, "y");
}

void TestRmsNormReference::backwardMatchesLoops() {
  const double eps = 1e-6;
  const at::Tensor x = torch::randn({4, 37}, torch::kDouble).requires_grad_(true);
  const at::Tensor w = torch::randn({37}, torch::kDouble).requires_grad_(true);
  const at::Tensor dy = torch::randn({4, 37}, torch::kDouble);
  rms_norm_reference(x, w, eps).backward(dy);
  const LoopResult want = loop_reference(x.detach(), w.detach(), dy, eps);
  // Different but equally short formulas in fp64: a few ulps of the summed magnitudes.
  const double rel = (8 + std::sqrt(37.0)) * DBL_EPSILON;
  expect_close(to_vec(x.grad()), want.dx, rel, 1e-13, "dx");
  expect_close(to_vec(w.grad()), want.dw, rel, 1e-13, "dw");
}

void TestRmsNormReference::rejectsMismatchedWeight() {
  const at::Tensor x = torch::randn({2, 8});
  QVERIFY_THROWS_EXCEPTION(c10::Error, rms_norm_reference(x, torch::ones({7}), 1e-6));
  QVERIFY_THROWS_EXCEPTION(c10::Error, rms_norm_reference(x, torch::ones({1, 8}), 1e-6));
  QVERIFY_THROWS_EXCEPTION(c10::Error, rms_norm_reference(x, torch::ones({8}), -1.0));
}

QTEST_MAIN(TestRmsNormReference)
#include "tst_rmsnorm_reference.moc"
