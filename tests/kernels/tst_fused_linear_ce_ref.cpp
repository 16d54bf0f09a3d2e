// The chunked CPU reference of the fused linear + cross-entropy against (1) an unchunked
// long-double evaluation of the whole [T x V] problem, within the first-order error bounds of
// tst_fused_linear_ce_support.h (fp32: FLT_EPSILON, fp64: DBL_EPSILON), (2) values worked out by
// hand, (3) central finite differences of the fp64 loss for both gradients, and (4) its
// argument checks. The chunk buffer it reports must be chunk x vocab, never tokens x vocab.
#include "studio/kernels/fused_linear_ce_ref.h"
#include "tst_fused_linear_ce_support.h"

#include <QtTest>

#include <cfloat>
#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <vector>

using namespace studio::kernels;
using namespace linear_ce_test;

namespace {

constexpr std::int64_t kIgnore = kCrossEntropyIgnoreIndex;

std::vector<float> to_float(const Vec& v) {
  return std::vector<float>(v.begin(), v.end());
}

}  // namespace

class TestFusedLinearCeRef : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void matchesUnchunkedExact_data();
  void matchesUnchunkedExact();
  void uniformLogitsByHand();
  void finiteDifferences();
  void rejects_data();
  void rejects();
};

void TestFusedLinearCeRef::matchesUnchunkedExact_data() {
  QTest::addColumn<qint64>("tokens");
  QTest::addColumn<qint64>("hidden");
  QTest::addColumn<qint64>("vocab");
  QTest::addColumn<qint64>("chunk");  // 0: the automatic rule
  QTest::addColumn<int>("ignored");   // 0 none, 1 every third, 2 all
  QTest::addColumn<double>("scale");
  QTest::newRow("one token") << qint64(1) << qint64(8) << qint64(5) << qint64(0) << 0 << 1.0;
  QTest::newRow("T not a multiple of chunk")
      << qint64(37) << qint64(16) << qint64(11) << qint64(8) << 1 << 1.0;
  QTest::newRow("small vocab, automatic chunk = all tokens")
      << qint64(64) << qint64(32) << qint64(7) << qint64(0) << 0 << 1.0;
  QTest::newRow("large-ish vocab, automatic chunk")
      << qint64(37) << qint64(64) << qint64(4099) << qint64(0) << 1 << 1.0;
  QTest::newRow("all ignored") << qint64(9) << qint64(8) << qint64(13) << qint64(4) << 2 << 1.0;
  QTest::newRow("every third ignored, scaled by 1/123")
      << qint64(50) << qint64(24) << qint64(300) << qint64(16) << 1 << 1.0 / 123;
  QTest::newRow("chunk larger than tokens")
      << qint64(5) << qint64(12) << qint64(40) << qint64(64) << 0 << -2.0;
}

void TestFusedLinearCeRef::matchesUnchunkedExact() {
  QFETCH(qint64, tokens);
  QFETCH(qint64, hidden);
  QFETCH(qint64, vocab);
  QFETCH(qint64, chunk);
  QFETCH(int, ignored);
  QFETCH(double, scale);
  const LinearCeShape s{tokens, hidden, vocab};
  const Vec x = random_values(static_cast<std::size_t>(tokens * hidden), 1.0, 11);
  const Vec w = random_values(static_cast<std::size_t>(vocab * hidden), 0.5, 12);
  const auto tg = make_targets(tokens, vocab, ignored, kIgnore, 13);
  const Exact exact = exact_linear_ce(x, w, tg, s, kIgnore, scale);

  LinearCeRefOptions o;
  o.chunk_tokens = chunk;
  o.grad_scale = scale;
  const auto xf = to_float(x), wf = to_float(w);
  const auto f = fused_linear_ce_ref(xf.data(), wf.data(), tg.data(), s, o);
  const auto d = fused_linear_ce_ref(x.data(), w.data(), tg.data(), s, o);

  // The memory claim: one chunk of logits, and fewer than all of them when there are chunks.
  const std::int64_t used = effective_chunk_tokens(s, chunk);
  QCOMPARE(f.chunk_tokens, used);
  QCOMPARE(f.chunk_buffer_elements, static_cast<std::size_t>(used * vocab));
  if (used < tokens) QVERIFY(f.chunk_buffer_elements < static_cast<std::size_t>(tokens * vocab));

  QCOMPARE(f.target_count, exact.count);
  QCOMPARE(d.target_count, exact.count);
  for (const double eps : {double(FLT_EPSILON), DBL_EPSILON}) {
    const Tolerances tol = linear_ce_tolerances(x, w, tg, s, kIgnore, scale, exact, eps, 0, 0);
    const bool is_float = eps == double(FLT_EPSILON);
    const double loss = is_float ? f.loss_sum : d.loss_sum;
    QVERIFY2(std::abs(loss - exact.loss_sum) <= tol.loss_sum,
             qPrintable(QStringLiteral("loss %1 vs %2, tol %3")
                            .arg(loss, 0, 'g', 17)
                            .arg(exact.loss_sum, 0, 'g', 17)
                            .arg(tol.loss_sum)));
    if (is_float) {
      expect_within(f.target_logprobs, exact.logprobs, tol.logprobs, "fp32 logprobs");
      expect_within(f.grad_x, exact.grad_x, tol.grad_x, "fp32 grad_x");
      expect_within(f.grad_weight, exact.grad_w, tol.grad_w, "fp32 grad_weight");
    } else {
      expect_within(d.target_logprobs, exact.logprobs, tol.logprobs, "fp64 logprobs");
      expect_within(d.grad_x, exact.grad_x, tol.grad_x, "fp64 grad_x");
      expect_within(d.grad_weight, exact.grad_w, tol.grad_w, "fp64 grad_weight");
    }
  }
  for (std::int64_t t = 0; t < tokens; ++t) {
    if (tg[t] == kIgnore) QCOMPARE(d.target_logprobs[t], 0.0);
  }

  // Log-probs only (DPO): same numbers, no gradient storage at all.
  o.with_grads = false;
  const auto lp = fused_linear_ce_ref(x.data(), w.data(), tg.data(), s, o);
  QVERIFY(lp.grad_x.empty() && lp.grad_weight.empty());
  QCOMPARE(lp.loss_sum, d.loss_sum);
  QVERIFY(lp.target_logprobs == d.target_logprobs);
}

// W = 0: every logit is 0, p = 1/V, log p = -log V, dlogits = (1/V - onehot) * s, so
// grad_x = 0 and grad_W[v] = s * sum over target tokens of (1/V - [v == target]) x_t.
void TestFusedLinearCeRef::uniformLogitsByHand() {
  const LinearCeShape s{4, 3, 5};
  const Vec x = {1, 2, 3, -1, 0, 0.5, 2, 2, 2, 7, 7, 7};
  const Vec w(15, 0.0);
  const std::vector<std::int64_t> tg = {0, 4, kIgnore, 4};
  LinearCeRefOptions o;
  o.chunk_tokens = 3;
  o.grad_scale = 0.5;
  const auto r = fused_linear_ce_ref(x.data(), w.data(), tg.data(), s, o);
  QCOMPARE(r.target_count, std::int64_t(3));
  QVERIFY(std::abs(r.loss_sum - 3 * std::log(5.0)) < 1e-14);
  QVERIFY(std::abs(r.target_logprobs[1] + std::log(5.0)) < 1e-15);
  QCOMPARE(r.target_logprobs[2], 0.0);
  for (const double gx : r.grad_x) QVERIFY(std::abs(gx) < 1e-15);
  for (std::int64_t v = 0; v < 5; ++v) {
    for (std::int64_t h = 0; h < 3; ++h) {
      double want = 0;
      for (const std::int64_t t : {0, 1, 3}) {
        want += 0.5 * (0.2 - (v == tg[t] ? 1.0 : 0.0)) * x[t * 3 + h];
      }
      QVERIFY2(std::abs(r.grad_weight[v * 3 + h] - want) < 1e-14,
               qPrintable(QStringLiteral("grad_W[%1,%2]").arg(v).arg(h)));
    }
  }
}

// d(scale * loss)/dx and /dW by central differences in fp64. With step h the truncation error is
// O(h^2 |f'''|) ~ 1e-12 and the cancellation error O(eps |f| / h) ~ 1e-10, so 1e-7 absolute
// plus relative is ample and still catches any wrong term (those are O(0.1)).
void TestFusedLinearCeRef::finiteDifferences() {
  const LinearCeShape s{3, 4, 5};
  Vec x = random_values(12, 1.0, 21);
  Vec w = random_values(20, 1.0, 22);
  const std::vector<std::int64_t> tg = {2, kIgnore, 4};
  LinearCeRefOptions o;
  o.chunk_tokens = 2;
  o.grad_scale = 0.75;
  const auto r = fused_linear_ce_ref(x.data(), w.data(), tg.data(), s, o);
  LinearCeRefOptions loss_only = o;
  loss_only.with_grads = false;
  const double step = 1e-6;
  auto check = [&](Vec& param, const std::vector<double>& grad, const char* what) {
    for (std::size_t i = 0; i < param.size(); ++i) {
      const double keep = param[i];
      param[i] = keep + step;
      const double up = fused_linear_ce_ref(x.data(), w.data(), tg.data(), s, loss_only).loss_sum;
      param[i] = keep - step;
      const double down = fused_linear_ce_ref(x.data(), w.data(), tg.data(), s, loss_only).loss_sum;
      param[i] = keep;
      const double numeric = o.grad_scale * (up - down) / (2 * step);
      QVERIFY2(std::abs(numeric - grad[i]) <= 1e-7 * (1 + std::abs(numeric)),
               qPrintable(QStringLiteral("%1[%2]: analytic %3, numeric %4")
                              .arg(what)
                              .arg(i)
                              .arg(grad[i], 0, 'g', 12)
                              .arg(numeric, 0, 'g', 12)));
    }
  };
  check(x, r.grad_x, "grad_x");
  check(w, r.grad_weight, "grad_weight");
  // The ignored token's gradient is exactly zero, not merely small.
  for (std::int64_t h = 0; h < 4; ++h) QCOMPARE(r.grad_x[4 + h], 0.0);
}

using RefCall = std::function<void()>;
Q_DECLARE_METATYPE(RefCall)

void TestFusedLinearCeRef::rejects_data() {
  QTest::addColumn<RefCall>("call");
  QTest::addColumn<QString>("error");
  static const Vec x(8, 0.5), w(12, 0.25);
  static const std::vector<std::int64_t> tg = {1, kIgnore};
  const LinearCeShape ok{2, 4, 3};
  auto run = [](LinearCeShape s, LinearCeRefOptions o, const std::vector<std::int64_t>* t,
                const double* xp) {
    return RefCall([=] { fused_linear_ce_ref(xp, w.data(), t->data(), s, o); });
  };
  const LinearCeRefOptions def;
  QTest::newRow("valid") << run(ok, def, &tg, x.data()) << QString();
  QTest::newRow("negative tokens") << run({-1, 4, 3}, def, &tg, x.data()) << "tokens must be >= 0";
  QTest::newRow("zero hidden") << run({2, 0, 3}, def, &tg, x.data()) << "hidden must be > 0";
  QTest::newRow("zero vocab") << run({2, 4, 0}, def, &tg, x.data()) << "vocab must be > 0";
  LinearCeRefOptions neg_chunk;
  neg_chunk.chunk_tokens = -4;
  QTest::newRow("negative chunk") << run(ok, neg_chunk, &tg, x.data()) << "chunk_tokens";
  LinearCeRefOptions bad_ignore;
  bad_ignore.ignore_index = 2;
  QTest::newRow("ignore_index is a class")
      << run(ok, bad_ignore, &tg, x.data()) << "ignore_index 2 is a valid class";
  LinearCeRefOptions nan_scale;
  nan_scale.grad_scale = std::numeric_limits<double>::quiet_NaN();
  QTest::newRow("NaN grad_scale") << run(ok, nan_scale, &tg, x.data()) << "grad_scale";
  static const std::vector<std::int64_t> out_of_range = {1, 3};
  QTest::newRow("target == vocab")
      << run(ok, def, &out_of_range, x.data()) << "targets[1] = 3 is outside [0, 3)";
  static const std::vector<std::int64_t> negative = {-5, 0};
  QTest::newRow("negative target other than ignore_index")
      << run(ok, def, &negative, x.data()) << "targets[0] = -5";
  QTest::newRow("null x") << run(ok, def, &tg, nullptr) << "must not be null";
  QTest::newRow("no tokens, null x") << run({0, 4, 3}, def, &tg, nullptr) << QString();
}

void TestFusedLinearCeRef::rejects() {
  QFETCH(RefCall, call);
  QFETCH(QString, error);
  try {
    call();
    QVERIFY2(error.isEmpty(), qPrintable("accepted, expected: " + error));
  } catch (const std::invalid_argument& e) {
    QVERIFY2(!error.isEmpty(), e.what());
    QVERIFY2(QString::fromUtf8(e.what()).contains(error), e.what());
  }
}

QTEST_MAIN(TestFusedLinearCeRef)
#include "tst_fused_linear_ce_ref.moc"
