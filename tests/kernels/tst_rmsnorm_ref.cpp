// The CPU reference for RMSNorm against (1) an independent extended-precision evaluation,
// (2) values worked out by hand, and (3) finite differences for the backward.
//
// Tolerances. Naive summation of n non-negative terms in precision u (unit roundoff; machine
// epsilon eps = 2u) has a relative error bounded by (n-1)u, but for rounding errors that behave
// like independent random variables it is about u*sqrt(n)/3 (Higham, Accuracy and Stability of
// Numerical Algorithms, ch. 4). The division, square root and the two products after the sum add
// a few u. So a per-element relative bound of (8 + sqrt(n)) * eps is about six standard
// deviations above the typical error and yet far below what a real bug costs (e.g. dividing by
// n - 1 instead of n is a 1/(2n) relative error, ~70x the bound at n = 4097).
#include "studio/kernels/rmsnorm_ref.h"

#include <QtTest>

#include <cfloat>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

using studio::kernels::rmsnorm_backward_ref;
using studio::kernels::rmsnorm_forward_ref;
using studio::kernels::RowsCols;

namespace {

using Vec = std::vector<double>;

// Uniform in [-scale, scale], rounded to float so that the float and double references (and the
// extended evaluation) all see exactly the same input values.
Vec random_floats(std::size_t n, double scale, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(-scale, scale);
  Vec v(n);
  for (auto& e : v) e = static_cast<float>(dist(gen));
  return v;
}

std::vector<float> to_float(const Vec& v) {
  return std::vector<float>(v.begin(), v.end());
}

double sum_tolerance(std::int64_t n, double machine_eps) {
  return (8.0 + std::sqrt(static_cast<double>(n))) * machine_eps;
}

// Independent forward in long double (64-bit mantissa on x86-64) and written differently from
// the reference: divides by the root mean square instead of multiplying by its reciprocal.
struct Extended {
  Vec y;
  Vec rstd;
};

Extended extended_forward(const Vec& x, const Vec& w, RowsCols s, double eps) {
  Extended out{Vec(x.size()), Vec(static_cast<std::size_t>(s.rows))};
  for (std::int64_t r = 0; r < s.rows; ++r) {
    long double sum_sq = 0;
    for (std::int64_t c = 0; c < s.cols; ++c) {
      const long double v = x[r * s.cols + c];
      sum_sq += v * v;
    }
    const long double rms = std::sqrt(sum_sq / s.cols + static_cast<long double>(eps));
    out.rstd[r] = static_cast<double>(1.0L / rms);
    for (std::int64_t c = 0; c < s.cols; ++c) {
      out.y[r * s.cols + c] = static_cast<double>(x[r * s.cols + c] / rms * w[c]);
    }
  }
  return out;
}

template <typename T>
void expect_close(const std::vector<T>& got, const Vec& want, double rel_tol, const char* what) {
  QCOMPARE(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - want[i]);
    if (err > rel_tol * std::abs(want[i])) {
      QFAIL(qPrintable(QStringLiteral("%1[%2]: got %3, want %4 (rel tol %5)")
                           .arg(what)
                           .arg(i)
                           .arg(static_cast<double>(got[i]), 0, 'g', 17)
                           .arg(want[i], 0, 'g', 17)
                           .arg(rel_tol)));
    }
  }
}

// sum(dy * y) for the double reference: the scalar whose gradient the backward computes.
double loss(const Vec& dy, const Vec& x, const Vec& w, RowsCols s, double eps) {
  Vec y(x.size());
  rmsnorm_forward_ref(x.data(), w.data(), y.data(), nullptr, s, eps);
  double l = 0;
  for (std::size_t i = 0; i < y.size(); ++i) l += dy[i] * y[i];
  return l;
}

// Central difference of loss() along one coordinate of `v` (x or w, passed by reference so the
// perturbation is seen by loss()). Step ~ cbrt(eps) * |v| balances truncation (h^2) against
// cancellation (eps / h): both end near 1e-10 relative for the sizes used here.
template <typename Loss>
double central_difference(Vec& v, std::size_t i, Loss&& f) {
  const double saved = v[i];
  const double h = 6e-6 * std::max(1.0, std::abs(saved));
  v[i] = saved + h;
  const double up = f();
  v[i] = saved - h;
  const double down = f();
  v[i] = saved;
  return (up - down) / (2 * h);
}

double max_abs(const Vec& v) {
  double m = 0;
  for (double e : v) m = std::max(m, std::abs(e));
  return m;
}

}  // namespace

class TestRmsNormRef : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void forwardMatchesExtended_data();
  void forwardMatchesExtended();
  void handComputed_data();
  void handComputed();
  void backwardMatchesFiniteDifferences_data();
  void backwardMatchesFiniteDifferences();
  void backwardFloatMatchesDouble_data();
  void backwardFloatMatchesDouble();
  void optionalOutputs();
  void rejectsBadArguments();
};

void TestRmsNormRef::forwardMatchesExtended_data() {
  QTest::addColumn<qint64>("rows");
  QTest::addColumn<qint64>("cols");
  QTest::addColumn<double>("scale");
  QTest::addColumn<double>("eps");
  QTest::newRow("1x1") << qint64(1) << qint64(1) << 1.0 << 1e-6;
  QTest::newRow("one row, 4096 cols") << qint64(1) << qint64(4096) << 1.0 << 1e-6;
  QTest::newRow("odd 7x33") << qint64(7) << qint64(33) << 2.0 << 1e-5;
  QTest::newRow("odd 3x4097") << qint64(3) << qint64(4097) << 1.0 << 1e-6;
  QTest::newRow("large values 1e15") << qint64(4) << qint64(513) << 1e15 << 1e-6;
  QTest::newRow("tiny values, eps dominates") << qint64(5) << qint64(64) << 1e-5 << 1e-2;
  QTest::newRow("tiny values, eps = 0") << qint64(5) << qint64(64) << 1e-5 << 0.0;
  QTest::newRow("eps comparable to mean(x^2)") << qint64(2) << qint64(100) << 1.0 << 0.3;
}

void TestRmsNormRef::forwardMatchesExtended() {
  QFETCH(qint64, rows);
  QFETCH(qint64, cols);
  QFETCH(double, scale);
  QFETCH(double, eps);
  const RowsCols s{rows, cols};
  const Vec x = random_floats(static_cast<std::size_t>(rows * cols), scale, 1);
  const Vec w = random_floats(static_cast<std::size_t>(cols), 1.0, 2);
  const float eps_f = static_cast<float>(eps);

  // The float reference is judged on the float-rounded eps it actually used.
  const Extended want_f = extended_forward(x, w, s, eps_f);
  std::vector<float> y_f(x.size()), rstd_f(static_cast<std::size_t>(rows));
  const auto xf = to_float(x), wf = to_float(w);
  rmsnorm_forward_ref(xf.data(), wf.data(), y_f.data(), rstd_f.data(), s, eps_f);
  expect_close(y_f, want_f.y, sum_tolerance(cols, FLT_EPSILON), "float y");
  expect_close(rstd_f, want_f.rstd, sum_tolerance(cols, FLT_EPSILON), "float rstd");

  const Extended want_d = extended_forward(x, w, s, eps);
  Vec y_d(x.size()), rstd_d(static_cast<std::size_t>(rows));
  rmsnorm_forward_ref(x.data(), w.data(), y_d.data(), rstd_d.data(), s, eps);
  expect_close(y_d, want_d.y, sum_tolerance(cols, DBL_EPSILON), "double y");
  expect_close(rstd_d, want_d.rstd, sum_tolerance(cols, DBL_EPSILON), "double rstd");
}

void TestRmsNormRef::handComputed_data() {
  QTest::addColumn<qint64>("rows");
  QTest::addColumn<Vec>("x");
  QTest::addColumn<Vec>("w");
  QTest::addColumn<double>("eps");
  QTest::addColumn<Vec>("y");
  QTest::addColumn<Vec>("rstd");
  // mean(x^2) = 1, rstd = 1: y is the weight.
  QTest::newRow("unit row") << qint64(1) << Vec{1, 1, 1, 1} << Vec{1, 2, 3, 4} << 0.0
                            << Vec{1, 2, 3, 4} << Vec{1};
  // mean = 9, rms = 3.
  QTest::newRow("single spike") << qint64(1) << Vec{6, 0, 0, 0} << Vec{1, 1, 1, 1} << 0.0
                                << Vec{2, 0, 0, 0} << Vec{1.0 / 3};
  // mean = (9 + 16) / 2 = 12.5, rstd = sqrt(0.08).
  QTest::newRow("3-4") << qint64(1) << Vec{3, 4} << Vec{1, 1} << 0.0
                       << Vec{0.84852813742385702, 1.1313708498984760} << Vec{0.28284271247461901};
  // Odd cols: mean = (1 + 4 + 4) / 3 = 3, rstd = 1/sqrt(3).
  QTest::newRow("odd cols") << qint64(1) << Vec{1, 2, 2} << Vec{1, 1, -1} << 0.0
                            << Vec{0.57735026918962576, 1.1547005383792515, -1.1547005383792515}
                            << Vec{0.57735026918962576};
  // Rows are independent: means 4 and 0.25.
  QTest::newRow("two rows") << qint64(2) << Vec{2, -2, 0.5, 0.5} << Vec{1, -1} << 0.0
                            << Vec{1, 1, 1, -1} << Vec{0.5, 2};
  // eps adds to the mean: 1 + 3 = 4, rstd = 0.5.
  QTest::newRow("eps dominates") << qint64(1) << Vec{1, 1, 1, 1} << Vec{2, 2, 2, 2} << 3.0
                                 << Vec{1, 1, 1, 1} << Vec{0.5};
  // 1 + 0.21 = 1.21 = 1.1^2.
  QTest::newRow("eps shifts the scale")
      << qint64(1) << Vec{1, -1} << Vec{1.1, 1.1} << 0.21 << Vec{1, -1} << Vec{1 / 1.1};
  // An all-zero row stays finite thanks to eps: rstd = 1/sqrt(1e-6) = 1000.
  QTest::newRow("zero row") << qint64(1) << Vec{0, 0, 0} << Vec{1, 1, 1} << 1e-6 << Vec{0, 0, 0}
                            << Vec{1000};
  // Large values: eps is negligible next to mean = 1.25e31, and x^2 still fits in float.
  QTest::newRow("large 3e15-4e15")
      << qint64(1) << Vec{3e15, 4e15} << Vec{1, 1} << 1e-6
      << Vec{0.84852813742385702, 1.1313708498984760} << Vec{2.8284271247461901e-16};
}

void TestRmsNormRef::handComputed() {
  QFETCH(qint64, rows);
  QFETCH(Vec, x);
  QFETCH(Vec, w);
  QFETCH(double, eps);
  QFETCH(Vec, y);
  QFETCH(Vec, rstd);
  const RowsCols s{rows, static_cast<std::int64_t>(w.size())};
  Vec y_d(x.size()), rstd_d(static_cast<std::size_t>(rows));
  rmsnorm_forward_ref(x.data(), w.data(), y_d.data(), rstd_d.data(), s, eps);
  expect_close(y_d, y, 4 * DBL_EPSILON, "double y");
  expect_close(rstd_d, rstd, 4 * DBL_EPSILON, "double rstd");

  // The hand values are exact; float inputs/eps round by up to u each, the rest as above.
  std::vector<float> y_f(x.size()), rstd_f(static_cast<std::size_t>(rows));
  const auto xf = to_float(x), wf = to_float(w);
  rmsnorm_forward_ref(xf.data(), wf.data(), y_f.data(), rstd_f.data(), s, static_cast<float>(eps));
  expect_close(y_f, y, 8 * FLT_EPSILON, "float y");
  expect_close(rstd_f, rstd, 8 * FLT_EPSILON, "float rstd");
}

void TestRmsNormRef::backwardMatchesFiniteDifferences_data() {
  QTest::addColumn<qint64>("rows");
  QTest::addColumn<qint64>("cols");
  QTest::addColumn<double>("scale");
  QTest::addColumn<double>("eps");
  QTest::newRow("1x1 with eps") << qint64(1) << qint64(1) << 1.0 << 0.5;
  QTest::newRow("1x5") << qint64(1) << qint64(5) << 1.0 << 1e-6;
  QTest::newRow("odd 3x7") << qint64(3) << qint64(7) << 2.0 << 1e-5;
  QTest::newRow("eps comparable, 2x16") << qint64(2) << qint64(16) << 1.0 << 0.4;
  QTest::newRow("large scale 1e3, 2x9") << qint64(2) << qint64(9) << 1e3 << 1e-6;
}

void TestRmsNormRef::backwardMatchesFiniteDifferences() {
  QFETCH(qint64, rows);
  QFETCH(qint64, cols);
  QFETCH(double, scale);
  QFETCH(double, eps);
  const RowsCols s{rows, cols};
  Vec x = random_floats(static_cast<std::size_t>(rows * cols), scale, 3);
  Vec w = random_floats(static_cast<std::size_t>(cols), 1.0, 4);
  const Vec dy = random_floats(x.size(), 1.0, 5);
  Vec dx(x.size()), dw(w.size());
  rmsnorm_backward_ref(dy.data(), x.data(), w.data(), dx.data(), dw.data(), s, eps);

  auto f = [&] { return loss(dy, x, w, s, eps); };
  // Differences are ~1e-10 of the gradient's scale; 1e-6 leaves room and still catches any
  // wrong term, which is of the gradient's own size.
  const double dx_tol = 1e-6 * max_abs(dx);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double fd = central_difference(x, i, f);
    QVERIFY2(std::abs(dx[i] - fd) <= dx_tol,
             qPrintable(QStringLiteral("dx[%1] = %2, finite difference %3")
                            .arg(i)
                            .arg(dx[i], 0, 'g', 12)
                            .arg(fd, 0, 'g', 12)));
  }
  const double dw_tol = 1e-6 * max_abs(dw);
  for (std::size_t j = 0; j < w.size(); ++j) {
    const double fd = central_difference(w, j, f);
    QVERIFY2(std::abs(dw[j] - fd) <= dw_tol,
             qPrintable(QStringLiteral("dw[%1] = %2, finite difference %3")
                            .arg(j)
                            .arg(dw[j], 0, 'g', 12)
                            .arg(fd, 0, 'g', 12)));
  }
}

void TestRmsNormRef::backwardFloatMatchesDouble_data() {
  QTest::addColumn<qint64>("rows");
  QTest::addColumn<qint64>("cols");
  QTest::addColumn<double>("scale");
  QTest::newRow("1x33") << qint64(1) << qint64(33) << 1.0;
  QTest::newRow("8x4097") << qint64(8) << qint64(4097) << 1.0;
  QTest::newRow("64x256 scale 1e3") << qint64(64) << qint64(256) << 1e3;
}

// dx and dw involve cancellation (dx = r*g - x*coef), so relative error per element is not
// bounded; the error is bounded relative to the magnitudes that were added: for dx,
// r*|dy*w| + |x|*r^3*sum|dy*w*x|/n; for dw, sum over rows of |dy*x*r|.
void TestRmsNormRef::backwardFloatMatchesDouble() {
  QFETCH(qint64, rows);
  QFETCH(qint64, cols);
  QFETCH(double, scale);
  const RowsCols s{rows, cols};
  const double eps = static_cast<float>(1e-6);
  const Vec x = random_floats(static_cast<std::size_t>(rows * cols), scale, 6);
  const Vec w = random_floats(static_cast<std::size_t>(cols), 1.0, 7);
  const Vec dy = random_floats(x.size(), 1.0, 8);
  Vec dx(x.size()), dw(w.size()), rstd(static_cast<std::size_t>(rows)), y(x.size());
  rmsnorm_backward_ref(dy.data(), x.data(), w.data(), dx.data(), dw.data(), s, eps);
  rmsnorm_forward_ref(x.data(), w.data(), y.data(), rstd.data(), s, eps);

  const auto xf = to_float(x), wf = to_float(w), dyf = to_float(dy);
  std::vector<float> dx_f(x.size()), dw_f(w.size());
  rmsnorm_backward_ref(dyf.data(), xf.data(), wf.data(), dx_f.data(), dw_f.data(), s,
                       static_cast<float>(eps));

  const double tol_dx = sum_tolerance(cols, FLT_EPSILON);
  const double tol_dw = (8.0 + std::sqrt(double(rows)) + std::sqrt(double(cols))) * FLT_EPSILON;
  Vec mag_dw(w.size(), 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    double abs_dot = 0;
    for (std::int64_t c = 0; c < cols; ++c) {
      abs_dot += std::abs(dy[r * cols + c] * w[c] * x[r * cols + c]);
    }
    const double rs = rstd[r];
    for (std::int64_t c = 0; c < cols; ++c) {
      const std::size_t i = static_cast<std::size_t>(r * cols + c);
      const double mag =
          rs * std::abs(dy[i] * w[c]) + std::abs(x[i]) * rs * rs * rs * abs_dot / cols;
      QVERIFY2(std::abs(dx_f[i] - dx[i]) <= tol_dx * mag,
               qPrintable(QStringLiteral("dx[%1]: float %2, double %3")
                              .arg(i)
                              .arg(dx_f[i], 0, 'g', 9)
                              .arg(dx[i], 0, 'g', 17)));
      mag_dw[c] += std::abs(dy[i] * x[i]) * rs;
    }
  }
  for (std::size_t c = 0; c < w.size(); ++c) {
    QVERIFY2(std::abs(dw_f[c] - dw[c]) <= tol_dw * mag_dw[c],
             qPrintable(QStringLiteral("dw[%1]: float %2, double %3")
                            .arg(c)
                            .arg(dw_f[c], 0, 'g', 9)
                            .arg(dw[c], 0, 'g', 17)));
  }
}

void TestRmsNormRef::optionalOutputs() {
  const RowsCols s{3, 5};
  const Vec x = random_floats(15, 1.0, 9), w = random_floats(5, 1.0, 10);
  const Vec dy = random_floats(15, 1.0, 11);
  Vec y1(15), y2(15), rstd(3);
  rmsnorm_forward_ref(x.data(), w.data(), y1.data(), rstd.data(), s, 1e-6);
  rmsnorm_forward_ref(x.data(), w.data(), y2.data(), nullptr, s, 1e-6);
  QVERIFY(y2 == y1);
  Vec dx1(15), dx2(15), dw(5);
  rmsnorm_backward_ref(dy.data(), x.data(), w.data(), dx1.data(), dw.data(), s, 1e-6);
  rmsnorm_backward_ref(dy.data(), x.data(), w.data(), dx2.data(), nullptr, s, 1e-6);
  QVERIFY(dx2 == dx1);
  // Zero rows: nothing to read or write, so null pointers are fine.
  rmsnorm_forward_ref(static_cast<const double*>(nullptr), nullptr, nullptr, nullptr, {0, 5}, 0.0);
}

void TestRmsNormRef::rejectsBadArguments() {
  Vec x(4, 1.0), w(2, 1.0), y(4);
  const auto fwd = [&](RowsCols s, double eps, const double* xp) {
    rmsnorm_forward_ref(xp, w.data(), y.data(), nullptr, s, eps);
  };
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, fwd({-1, 2}, 0.0, x.data()));
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, fwd({2, 0}, 0.0, x.data()));
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, fwd({2, 2}, -1e-6, x.data()));
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                           fwd({2, 2}, std::numeric_limits<double>::quiet_NaN(), x.data()));
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                           fwd({2, 2}, std::numeric_limits<double>::infinity(), x.data()));
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, fwd({2, 2}, 0.0, nullptr));
  Vec dx(4);
  QVERIFY_THROWS_EXCEPTION(
      std::invalid_argument,
      rmsnorm_backward_ref(x.data(), x.data(), nullptr, dx.data(), nullptr, {2, 2}, 0.0));
}

QTEST_MAIN(TestRmsNormRef)
#include "tst_rmsnorm_ref.moc"
