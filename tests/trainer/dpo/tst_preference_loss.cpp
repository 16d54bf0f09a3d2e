// The DPO losses against independently computed numbers: literals from Debian's python3-torch
// (torch.nn.functional.logsigmoid) and, for every loss, label smoothing and ftx setting, the
// formulas of LLaMA-Factory's DPO trainer (TRL's dpo_loss) evaluated here with plain doubles.
// Gradients w.r.t. the policy log-probs against the analytic derivative and central differences;
// the ipo normalisation by the GLOBAL response length when the sums arrive in SP pieces; empty
// responses and extreme logits stay finite.
#include "studio/trainer/dpo/preference_loss.h"

#include <torch/torch.h>

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "../central_difference.h"
#include "studio/trainer/data/batch.h"

using namespace studio::trainer;
using namespace studio::trainer::dpo;
using studio::PrefLoss;

Q_DECLARE_METATYPE(PrefLoss)

namespace {

using Values = QList<double>;

torch::Tensor f64(const Values& v, bool grad = false) {
  return torch::tensor(std::vector<double>(v.begin(), v.end()), torch::kDouble)
      .set_requires_grad(grad);
}

torch::Tensor lengths(const Values& v) { return f64(v).to(torch::kLong); }

// The policy and the reference score the same tokens, so they share the lengths.
PairLogps pairs(const Values& chosen, const Values& rejected, const Values& chosen_len,
                const Values& rejected_len, bool grad = false) {
  return {f64(chosen, grad), f64(rejected, grad), lengths(chosen_len), lengths(rejected_len)};
}

double log_sigmoid(double x) { return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x)); }
double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double per_token(double sum, double len) { return sum / std::max(len, 1.0); }

struct Pair {
  double pc, pr, rc, rr, lc, lr;
};

struct Setting {
  PrefLoss kind;
  double beta, ls, ftx;
};

// The per-pair formulas, written out once more in doubles.
double logits_of(const Setting& s, const Pair& p) {
  if (s.kind != PrefLoss::Ipo) return (p.pc - p.pr) - (p.rc - p.rr);
  return (per_token(p.pc, p.lc) - per_token(p.pr, p.lr)) -
         (per_token(p.rc, p.lc) - per_token(p.rr, p.lr));
}

double expected_loss(const Setting& s, const Pair& p) {
  const double l = logits_of(s, p);
  double loss = 0;
  switch (s.kind) {
    case PrefLoss::Sigmoid:
      loss = -(1 - s.ls) * log_sigmoid(s.beta * l) - s.ls * log_sigmoid(-s.beta * l);
      break;
    case PrefLoss::Hinge:
      loss = std::max(0.0, 1 - s.beta * l);
      break;
    case PrefLoss::Ipo:
      loss = std::pow(l - 1 / (2 * s.beta), 2);
      break;
  }
  return loss - s.ftx * per_token(p.pc, p.lc);
}

// d loss / d (policy chosen sum), d loss / d (policy rejected sum).
std::pair<double, double> expected_gradient(const Setting& s, const Pair& p) {
  const double l = logits_of(s, p);
  double d = 0;  // d loss / d logits
  switch (s.kind) {
    case PrefLoss::Sigmoid:
      d = -(1 - s.ls) * s.beta * sigmoid(-s.beta * l) + s.ls * s.beta * sigmoid(s.beta * l);
      break;
    case PrefLoss::Hinge:
      d = s.beta * l < 1 ? -s.beta : 0;
      break;
    case PrefLoss::Ipo:
      d = 2 * (l - 1 / (2 * s.beta));
      break;
  }
  const bool ipo = s.kind == PrefLoss::Ipo;
  const double dc = ipo ? 1 / std::max(p.lc, 1.0) : 1;
  const double dr = ipo ? 1 / std::max(p.lr, 1.0) : 1;
  return {d * dc - s.ftx / std::max(p.lc, 1.0), -d * dr};
}

std::vector<Pair> zip(const Values& pc, const Values& pr, const Values& rc, const Values& rr,
                      const Values& lc, const Values& lr) {
  std::vector<Pair> out;
  for (int i = 0; i < pc.size(); ++i) out.push_back({pc[i], pr[i], rc[i], rr[i], lc[i], lr[i]});
  return out;
}

PrefLossOptions options(const Setting& s) {
  PrefLossOptions o;
  o.loss = s.kind;
  o.beta = s.beta;
  o.label_smoothing = s.ls;
  o.ftx = s.ftx;
  return o;
}

bool close(double got, double want, double rel) {
  return std::abs(got - want) <= rel * std::max(1.0, std::abs(want));
}

// Three pairs used throughout: logits 2, -7.5 and 1.25 (unnormalised).
const Values kPc{-10.0, -30.5, -7.25}, kPr{-14.0, -20.0, -7.0};
const Values kRc{-11.0, -25.0, -8.0}, kRr{-13.0, -22.0, -6.5};
const Values kLc{4, 10, 1}, kLr{8, 5, 3};

}  // namespace

class TestPreferenceLoss : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void sigmoidMatchesTorch_data();
  void sigmoidMatchesTorch();
  void lossValues_data();
  void lossValues();
  void rewardsAndMetrics();
  void ipoReportsNormalisedLogps();
  void gradients_data();
  void gradients();
  void ipoUsesTheGlobalLength();
  void zeroLengthResponse_data();
  void zeroLengthResponse();
  void extremeLogits_data();
  void extremeLogits();
  void sequenceLogpsMasksIgnoredTargets();
  void optionsFromConfig();
  void rejectsBadInput();
};

void TestPreferenceLoss::sigmoidMatchesTorch_data() {
  QTest::addColumn<double>("beta");
  QTest::addColumn<double>("ls");
  QTest::addColumn<Values>("want");
  // /usr/bin/python3 (python3-torch 1.13.1), fp64:
  //   pc, pr = t([-10, -30.5, -7.25]), t([-14, -20, -7]); rc, rr = t([-11, -25, -8]), t([-13, -22, -6.5])
  //   l = (pc - pr) - (rc - rr)
  //   -F.logsigmoid(beta * l) * (1 - ls) - F.logsigmoid(-beta * l) * ls
  QTest::newRow("beta 0.1") << 0.1 << 0.0
                            << Values{0.5981388693815918, 1.1368710061148999, 0.6325990353171691};
  QTest::newRow("beta 0.5, smoothing 0.2")
      << 0.5 << 0.2 << Values{0.5132616875182229, 3.0232454643724256, 0.5537006782765187};
}

void TestPreferenceLoss::sigmoidMatchesTorch() {
  QFETCH(double, beta);
  QFETCH(double, ls);
  QFETCH(Values, want);
  const auto out = preference_loss(pairs(kPc, kPr, kLc, kLr), pairs(kRc, kRr, kLc, kLr),
                                   options({PrefLoss::Sigmoid, beta, ls, 0}));
  QCOMPARE(out.losses.scalar_type(), torch::kDouble);
  for (int i = 0; i < want.size(); ++i)
    QVERIFY2(close(out.losses[i].item<double>(), want[i], 1e-14), qPrintable(QString::number(i)));
}

void TestPreferenceLoss::lossValues_data() {
  QTest::addColumn<PrefLoss>("kind");
  QTest::addColumn<double>("beta");
  QTest::addColumn<double>("ls");
  QTest::addColumn<double>("ftx");
  QTest::newRow("sigmoid") << PrefLoss::Sigmoid << 0.1 << 0.0 << 0.0;
  QTest::newRow("sigmoid, smoothing 0.3") << PrefLoss::Sigmoid << 0.7 << 0.3 << 0.0;
  QTest::newRow("sigmoid, ftx 0.5") << PrefLoss::Sigmoid << 0.1 << 0.0 << 0.5;
  QTest::newRow("sigmoid, smoothing and ftx") << PrefLoss::Sigmoid << 0.2 << 0.1 << 1.5;
  QTest::newRow("hinge (pair 0 at the margin)") << PrefLoss::Hinge << 0.5 << 0.0 << 0.0;
  QTest::newRow("hinge, ftx 0.25") << PrefLoss::Hinge << 0.1 << 0.0 << 0.25;
  QTest::newRow("ipo") << PrefLoss::Ipo << 0.1 << 0.0 << 0.0;
  QTest::newRow("ipo, beta 2") << PrefLoss::Ipo << 2.0 << 0.0 << 0.0;
  QTest::newRow("ipo, ftx 1") << PrefLoss::Ipo << 0.1 << 0.0 << 1.0;
}

void TestPreferenceLoss::lossValues() {
  QFETCH(PrefLoss, kind);
  QFETCH(double, beta);
  QFETCH(double, ls);
  QFETCH(double, ftx);
  const Setting s{kind, beta, ls, ftx};
  const auto out = preference_loss(pairs(kPc, kPr, kLc, kLr), pairs(kRc, kRr, kLc, kLr), options(s));
  const auto want = zip(kPc, kPr, kRc, kRr, kLc, kLr);
  QCOMPARE(out.losses.sizes().vec(), std::vector<int64_t>{3});
  for (size_t i = 0; i < want.size(); ++i) {
    const double got = out.losses[static_cast<int64_t>(i)].item<double>();
    const double expected = expected_loss(s, want[i]);
    QVERIFY2(close(got, expected, 1e-13),
             qPrintable(QString("pair %1: %2 vs %3").arg(i).arg(got, 0, 'g', 17).arg(expected, 0, 'g', 17)));
  }
  // Sanity of the hand formula on the hinge row: pair 0 has beta * logits = 1 (loss 0),
  // pair 2 is inside the margin.
  if (kind == PrefLoss::Hinge && ftx == 0) {
    QCOMPARE(out.losses[0].item<double>(), 0.0);
    QCOMPARE(out.losses[1].item<double>(), 1 + 0.5 * 7.5);
    QCOMPARE(out.losses[2].item<double>(), 1 - 0.5 * 1.25);
  }
}

void TestPreferenceLoss::rewardsAndMetrics() {
  // A fourth pair ties (both rewards 0): not an accurate pair.
  const Values pc = kPc + Values{-5}, pr = kPr + Values{-6}, rc = kRc + Values{-5},
               rr = kRr + Values{-6}, lc = kLc + Values{2}, lr = kLr + Values{2};
  const auto out = preference_loss(pairs(pc, pr, lc, lr, true), pairs(rc, rr, lc, lr),
                                   options({PrefLoss::Sigmoid, 0.1, 0, 0}));
  QVERIFY(!out.chosen_rewards.requires_grad());
  QVERIFY(!out.rejected_rewards.requires_grad());
  QVERIFY(!out.metric_sums.requires_grad());
  QVERIFY(out.losses.requires_grad());
  const std::vector<double> chosen{0.1, -0.55, 0.075, 0}, rejected{-0.1, 0.2, -0.05, 0};
  for (int64_t i = 0; i < 4; ++i) {
    QVERIFY(close(out.chosen_rewards[i].item<double>(), chosen[i], 1e-14));
    QVERIFY(close(out.rejected_rewards[i].item<double>(), rejected[i], 1e-14));
  }
  QCOMPARE(out.metric_sums.scalar_type(), torch::kDouble);
  QCOMPARE(out.metric_sums.numel(), int64_t{kPrefMetricCount});
  const std::vector<double> sums{-0.375, 0.05, 2, -0.425, -52.75, -47};
  for (int64_t i = 0; i < kPrefMetricCount; ++i)
    QVERIFY2(close(out.metric_sums[i].item<double>(), sums[i], 1e-14), qPrintable(QString::number(i)));

  // The caller all-reduces the sums (two DP ranks with these pairs each) and divides.
  const auto m = dpo_metrics(out.metric_sums * 2, 8);
  QVERIFY(close(m.rewards_chosen, -0.375 / 4, 1e-14));
  QVERIFY(close(m.rewards_rejected, 0.05 / 4, 1e-14));
  QCOMPARE(m.rewards_accuracies, 0.5);
  QVERIFY(close(m.rewards_margins, -0.425 / 4, 1e-14));
  QCOMPARE(m.logps_chosen, -52.75 / 4);
  QCOMPARE(m.logps_rejected, -47.0 / 4);
  QVERIFY(std::isnan(dpo_metrics(out.metric_sums, 0).rewards_chosen));
}

void TestPreferenceLoss::ipoReportsNormalisedLogps() {
  const auto out = preference_loss(pairs(kPc, kPr, kLc, kLr), pairs(kRc, kRr, kLc, kLr),
                                   options({PrefLoss::Ipo, 0.1, 0, 0}));
  for (int64_t i = 0; i < 3; ++i) {
    const double lc = kLc[int(i)], lr = kLr[int(i)];
    QVERIFY(close(out.chosen_logps[i].item<double>(), kPc[int(i)] / lc, 1e-15));
    QVERIFY(close(out.rejected_logps[i].item<double>(), kPr[int(i)] / lr, 1e-15));
    QVERIFY(close(out.chosen_rewards[i].item<double>(), 0.1 * (kPc[int(i)] - kRc[int(i)]) / lc, 1e-14));
    QVERIFY(close(out.rejected_rewards[i].item<double>(), 0.1 * (kPr[int(i)] - kRr[int(i)]) / lr, 1e-14));
  }
  QVERIFY(close(out.metric_sums[kLogpsChosen].item<double>(), -10 / 4.0 - 3.05 - 7.25, 1e-14));
}

void TestPreferenceLoss::gradients_data() {
  QTest::addColumn<PrefLoss>("kind");
  QTest::addColumn<double>("beta");
  QTest::addColumn<double>("ls");
  QTest::addColumn<double>("ftx");
  QTest::newRow("sigmoid") << PrefLoss::Sigmoid << 0.1 << 0.0 << 0.0;
  QTest::newRow("sigmoid, smoothing 0.2") << PrefLoss::Sigmoid << 0.5 << 0.2 << 0.0;
  QTest::newRow("sigmoid, smoothing and ftx") << PrefLoss::Sigmoid << 0.3 << 0.1 << 0.7;
  QTest::newRow("hinge") << PrefLoss::Hinge << 0.6 << 0.0 << 0.0;  // pair 0 past the margin
  QTest::newRow("hinge, ftx") << PrefLoss::Hinge << 0.6 << 0.0 << 0.5;
  QTest::newRow("ipo") << PrefLoss::Ipo << 0.1 << 0.0 << 0.0;
  QTest::newRow("ipo, ftx") << PrefLoss::Ipo << 0.5 << 0.0 << 2.0;
}

void TestPreferenceLoss::gradients() {
  QFETCH(PrefLoss, kind);
  QFETCH(double, beta);
  QFETCH(double, ls);
  QFETCH(double, ftx);
  const Setting s{kind, beta, ls, ftx};
  const auto policy = pairs(kPc, kPr, kLc, kLr, true);
  // A reference that asks for gradients must still get none: it is a constant of the loss.
  const auto reference = pairs(kRc, kRr, kLc, kLr, true);
  auto total = [&] { return preference_loss(policy, reference, options(s)).losses.sum(); };
  total().backward();
  QVERIFY(!reference.chosen.grad().defined() && !reference.rejected.grad().defined());

  const auto want = zip(kPc, kPr, kRc, kRr, kLc, kLr);
  for (int64_t i = 0; i < 3; ++i) {
    const auto [dc, dr] = expected_gradient(s, want[size_t(i)]);
    const double gc = policy.chosen.grad()[i].item<double>();
    const double gr = policy.rejected.grad()[i].item<double>();
    QVERIFY2(close(gc, dc, 1e-12), qPrintable(QString("chosen %1: %2 vs %3").arg(i).arg(gc).arg(dc)));
    QVERIFY2(close(gr, dr, 1e-12), qPrintable(QString("rejected %1: %2 vs %3").arg(i).arg(gr).arg(dr)));
    // Central differences, away from the hinge's kink (pair 0 sits at beta * logits = 1.2).
    const double nc = central_difference(policy.chosen, i, 1e-5, total);
    const double nr = central_difference(policy.rejected, i, 1e-5, total);
    QVERIFY2(close(gc, nc, 1e-7), qPrintable(QString("chosen %1: %2 vs numeric %3").arg(i).arg(gc).arg(nc)));
    QVERIFY2(close(gr, nr, 1e-7), qPrintable(QString("rejected %1: %2 vs numeric %3").arg(i).arg(gr).arg(nr)));
  }
}

void TestPreferenceLoss::ipoUsesTheGlobalLength() {
  // One pair whose responses are split over two SP ranks; rank 0 holds no valid token of the
  // rejected response (local count 0). The caller adds the per-rank sums and counts from sequence_logps.
  const int ig = static_cast<int>(kIgnoreIndex);
  const auto tok = torch::tensor({-0.5, -1.0, -0.25, -2.0, -0.75, -1.5}, torch::kDouble);
  const auto chosen_t = torch::tensor({ig, 3, 4, 5, 6, 7}, torch::kLong);
  const auto rejected_t = torch::tensor({ig, ig, 4, 5, ig, ig}, torch::kLong);
  const auto ref_tok = torch::tensor({-0.6, -0.9, -0.4, -1.0, -0.8, -1.25}, torch::kDouble);

  auto global = [&](const torch::Tensor& logps, const torch::Tensor& targets) {
    torch::Tensor sum = torch::zeros({1}, torch::kDouble), len = torch::zeros({1}, torch::kLong);
    for (int64_t rank = 0; rank < 2; ++rank) {  // rank 0: positions 0..1, rank 1: 2..5
      const int64_t begin = rank == 0 ? 0 : 2, count = rank == 0 ? 2 : 4;
      auto [s, n] = sequence_logps(logps.narrow(0, begin, count).unsqueeze(0),
                                   targets.narrow(0, begin, count).unsqueeze(0));
      sum = sum + s;
      len = len + n;
    }
    return std::pair{sum, len};
  };
  const auto [pc, lc] = global(tok, chosen_t);
  const auto [pr, lr] = global(tok, rejected_t);
  const auto [rc, rlc] = global(ref_tok, chosen_t);
  const auto [rr, rlr] = global(ref_tok, rejected_t);
  QCOMPARE(lc.item<int64_t>(), 5);
  QCOMPARE(lr.item<int64_t>(), 2);
  const double beta = 0.1;
  const auto out = preference_loss({pc, pr, lc, lr}, {rc, rr, rlc, rlr}, options({PrefLoss::Ipo, beta, 0, 1.0}));

  const double pcs = -1.0 - 0.25 - 2.0 - 0.75 - 1.5, prs = -0.25 - 2.0;
  const double rcs = -0.9 - 0.4 - 1.0 - 0.8 - 1.25, rrs = -0.4 - 1.0;
  const double l = (pcs / 5 - prs / 2) - (rcs / 5 - rrs / 2);
  const double want = std::pow(l - 1 / (2 * beta), 2) - pcs / 5;
  QVERIFY2(close(out.losses.item<double>(), want, 1e-14),
           qPrintable(QString("%1 vs %2").arg(out.losses.item<double>(), 0, 'g', 17).arg(want, 0, 'g', 17)));
  // Averaging each rank's own mean (360-LLaMA-Factory's bug) gives a different number.
  const double local_means = (-1.0 / 1 + (pcs + 1.0) / 4) / 2;
  QVERIFY(std::abs(local_means - pcs / 5) > 0.01);
}

void TestPreferenceLoss::zeroLengthResponse_data() {
  QTest::addColumn<PrefLoss>("kind");
  QTest::addColumn<bool>("both");  // both responses empty, or only the chosen one
  for (auto [kind, name] : {std::pair{PrefLoss::Sigmoid, "sigmoid"}, std::pair{PrefLoss::Hinge, "hinge"},
                            std::pair{PrefLoss::Ipo, "ipo"}}) {
    QTest::newRow(qPrintable(QString(name) + ", empty chosen")) << kind << false;
    QTest::newRow(qPrintable(QString(name) + ", both empty")) << kind << true;
  }
}

void TestPreferenceLoss::zeroLengthResponse() {
  QFETCH(PrefLoss, kind);
  QFETCH(bool, both);
  // Defined behaviour: an empty response has sum 0 and per-token log-prob 0 / max(0, 1) = 0, so
  // the pair's loss is the formula at those values and its SFT term is 0.
  const Values pc{0, -3}, pr{both ? 0.0 : -4.0, -5}, rc{0, -3.5}, rr{both ? 0.0 : -3.0, -4};
  const Values lc{0, 2}, lr{both ? 0.0 : 3.0, 4};
  const Setting s{kind, 0.2, kind == PrefLoss::Sigmoid ? 0.1 : 0.0, 0.5};
  const auto policy = pairs(pc, pr, lc, lr, true);
  const auto out = preference_loss(policy, pairs(rc, rr, lc, lr), options(s));
  out.losses.sum().backward();
  QVERIFY(torch::isfinite(out.losses).all().item<bool>());
  QVERIFY(torch::isfinite(out.metric_sums).all().item<bool>());
  QVERIFY(torch::isfinite(policy.chosen.grad()).all().item<bool>());
  QVERIFY(torch::isfinite(policy.rejected.grad()).all().item<bool>());
  const auto want = zip(pc, pr, rc, rr, lc, lr);
  for (int64_t i = 0; i < 2; ++i)
    QVERIFY(close(out.losses[i].item<double>(), expected_loss(s, want[size_t(i)]), 1e-14));
  QCOMPARE(out.chosen_logps[0].item<double>(), 0.0);
}

void TestPreferenceLoss::extremeLogits_data() {
  QTest::addColumn<PrefLoss>("kind");
  QTest::addColumn<double>("ls");
  QTest::addColumn<double>("logits");
  QTest::addColumn<bool>("fp32");
  for (bool fp32 : {false, true}) {
    for (double l : {1e4, -1e4}) {
      const QString tag = QString(" %1 %2").arg(l > 0 ? "+1e4" : "-1e4").arg(fp32 ? "fp32" : "fp64");
      QTest::newRow(qPrintable("sigmoid" + tag)) << PrefLoss::Sigmoid << 0.0 << l << fp32;
      QTest::newRow(qPrintable("sigmoid smoothed" + tag)) << PrefLoss::Sigmoid << 0.1 << l << fp32;
      QTest::newRow(qPrintable("hinge" + tag)) << PrefLoss::Hinge << 0.0 << l << fp32;
      QTest::newRow(qPrintable("ipo" + tag)) << PrefLoss::Ipo << 0.0 << l << fp32;
    }
  }
}

void TestPreferenceLoss::extremeLogits() {
  QFETCH(PrefLoss, kind);
  QFETCH(double, ls);
  QFETCH(double, logits);
  QFETCH(bool, fp32);
  const Setting s{kind, 1.0, ls, 0.5};
  const auto dtype = fp32 ? torch::kFloat : torch::kDouble;
  // beta * logits = +-1e4: the chosen log-prob sum carries it all.
  const Values pc{logits}, zero{0}, one{1};
  PairLogps policy = pairs(pc, zero, one, one);
  policy.chosen = policy.chosen.to(dtype).set_requires_grad(true);
  policy.rejected = policy.rejected.to(dtype).set_requires_grad(true);
  const auto out = preference_loss(policy, pairs(zero, zero, one, one), options(s));
  QCOMPARE(out.losses.scalar_type(), dtype);
  out.losses.sum().backward();
  QVERIFY(torch::isfinite(out.losses).all().item<bool>());
  QVERIFY(torch::isfinite(policy.chosen.grad()).all().item<bool>());
  QVERIFY(torch::isfinite(policy.rejected.grad()).all().item<bool>());
  const double want = expected_loss(s, {logits, 0, 0, 0, 1, 1});
  QVERIFY2(close(out.losses.item<double>(), want, fp32 ? 1e-6 : 1e-14),
           qPrintable(QString("%1 vs %2").arg(out.losses.item<double>()).arg(want)));
  const auto [dc, dr] = expected_gradient(s, {logits, 0, 0, 0, 1, 1});
  QVERIFY(close(policy.chosen.grad().item<double>(), dc, 1e-6));
  QVERIFY(close(policy.rejected.grad().item<double>(), dr, 1e-6));
}

void TestPreferenceLoss::sequenceLogpsMasksIgnoredTargets() {
  const double inf = std::numeric_limits<double>::infinity();
  const int ig = static_cast<int>(kIgnoreIndex);
  // Ignored positions may hold anything, -inf included (a masked vocabulary entry).
  auto tok = torch::tensor({-inf, -1.0, -0.5, -inf, -inf, -inf, -inf, -inf, -2.0, -3.0, -0.25, -inf},
                           torch::kDouble)
                 .reshape({3, 4})
                 .set_requires_grad(true);
  const auto targets = torch::tensor({ig, 5, 6, ig, ig, ig, ig, ig, 1, 2, 3, ig}, torch::kLong).reshape({3, 4});
  const auto [sums, counts] = sequence_logps(tok, targets);
  QCOMPARE(counts.scalar_type(), torch::kLong);
  QCOMPARE(counts.sizes().vec(), std::vector<int64_t>{3});
  const std::vector<double> want_sums{-1.5, 0, -5.25};
  const std::vector<int64_t> want_counts{2, 0, 3};
  for (int64_t r = 0; r < 3; ++r) {
    QCOMPARE(sums[r].item<double>(), want_sums[size_t(r)]);
    QCOMPARE(counts[r].item<int64_t>(), want_counts[size_t(r)]);
  }
  // The sums keep the gradient: 1 at every valid position, exactly 0 (not NaN) elsewhere.
  sums.sum().backward();
  const auto want_grad = (targets != kIgnoreIndex).to(torch::kDouble);
  QVERIFY(torch::equal(tok.grad(), want_grad));
}

void TestPreferenceLoss::optionsFromConfig() {
  studio::RunConfig cfg;
  const auto defaults = PrefLossOptions::from(cfg);
  QCOMPARE(defaults.loss, PrefLoss::Sigmoid);
  QCOMPARE(defaults.beta, 0.1);
  QCOMPARE(defaults.label_smoothing, 0.0);
  QCOMPARE(defaults.ftx, 0.0);
  cfg.pref_loss = PrefLoss::Ipo;
  cfg.pref_beta = 0.25;
  cfg.dpo_label_smoothing = 0.05;
  cfg.pref_ftx = 0.75;
  const auto o = PrefLossOptions::from(cfg);
  QCOMPARE(o.loss, PrefLoss::Ipo);
  QCOMPARE(o.beta, 0.25);
  QCOMPARE(o.label_smoothing, 0.05);
  QCOMPARE(o.ftx, 0.75);
}

void TestPreferenceLoss::rejectsBadInput() {
  const auto good = pairs(kPc, kPr, kLc, kLr);
  auto short_len = good;
  short_len.rejected_len = lengths({1, 2});
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, preference_loss(good, short_len, {}));
  auto missing = good;
  missing.chosen_len = torch::Tensor();
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, preference_loss(missing, good, {}));
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, preference_loss(good, good, options({PrefLoss::Ipo, 0, 0, 0})));
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                           sequence_logps(torch::zeros({2, 3}), torch::zeros({2, 4}, torch::kLong)));
}

QTEST_MAIN(TestPreferenceLoss)
#include "tst_preference_loss.moc"
