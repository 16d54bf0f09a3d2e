// The preference losses against independently computed numbers: literals from torch
// (torch.nn.functional.logsigmoid, in the project's Python environment) and, for every loss, label
// smoothing and ftx setting, the formulas of LLaMA-Factory's DPO trainer evaluated with plain
// doubles (preference_loss_cases.h). Gradients w.r.t. the policy log-probs against the analytic
// derivative and central differences; the ipo normalisation by the GLOBAL response length when the
// sums arrive in SP pieces; empty responses, extreme logits and extreme orpo means stay finite;
// orpo and simpo run without a reference, the others refuse to. TRL's own code is the reference
// in tst_preference_loss_trl.
#include "studio/trainer/dpo/preference_loss.h"

#include <torch/torch.h>

#include <QtTest>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "../central_difference.h"
#include "studio/trainer/batching/batch.h"
#include "preference_loss_cases.h"

using namespace studio::trainer;
using namespace studio::trainer::dpo;
using studio::PrefLoss;
using namespace pref_cases;



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
  void orpoExtremeMeans_data();
  void orpoExtremeMeans();
  void rewardsWithoutReference_data();
  void rewardsWithoutReference();
  void ftxAddsTheSftTerm_data();
  void ftxAddsTheSftTerm();
  void referenceRequirement_data();
  void referenceRequirement();
  void sequenceLogpsMasksIgnoredTargets();
  void optionsFromConfig();
  void rejectsBadInput();
};

void TestPreferenceLoss::sigmoidMatchesTorch_data() {
  QTest::addColumn<double>("beta");
  QTest::addColumn<double>("ls");
  QTest::addColumn<Values>("want");
  // torch, fp64 (first computed with python3-torch 1.13.1; torch 2.11 gives the same digits):
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
  QTest::newRow("orpo") << PrefLoss::Orpo << 0.1 << 0.0 << 0.0;
  QTest::newRow("orpo, beta 2, ftx 0.5") << PrefLoss::Orpo << 2.0 << 0.0 << 0.5;
  QTest::newRow("simpo") << PrefLoss::Simpo << 2.0 << 0.0 << 0.0;
  QTest::newRow("simpo, beta 0.1, ftx 0.3") << PrefLoss::Simpo << 0.1 << 0.0 << 0.3;
  QTest::newRow("kto_pair") << PrefLoss::KtoPair << 0.1 << 0.0 << 0.0;
  QTest::newRow("kto_pair, beta 1, ftx 0.5") << PrefLoss::KtoPair << 1.0 << 0.0 << 0.5;
}

void TestPreferenceLoss::lossValues() {
  QFETCH(PrefLoss, kind);
  QFETCH(double, beta);
  QFETCH(double, ls);
  QFETCH(double, ftx);
  const Setting s{kind, beta, ls, ftx, /*gamma=*/0.75};
  const auto out = preference_loss(pairs(kPc, kPr, kLc, kLr), pairs(kRc, kRr, kLc, kLr), options(s));
  const auto want = expected_losses(s, zip(kPc, kPr, kRc, kRr, kLc, kLr));
  QCOMPARE(out.losses.sizes().vec(), std::vector<int64_t>{3});
  for (size_t i = 0; i < want.size(); ++i) {
    const double got = out.losses[static_cast<int64_t>(i)].item<double>();
    const double expected = want[i];
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
  for (int64_t i = 0; i < kLogpsRejected + 1; ++i)
    QVERIFY2(close(out.metric_sums[i].item<double>(), sums[i], 1e-14), qPrintable(QString::number(i)));

  // The caller all-reduces the sums (two DP ranks with these pairs each) and divides.
  const auto m = dpo_metrics(out.metric_sums * 2, 8, PrefLoss::Sigmoid);
  QVERIFY(close(m.rewards_chosen, -0.375 / 4, 1e-14));
  QVERIFY(close(m.rewards_rejected, 0.05 / 4, 1e-14));
  QCOMPARE(m.rewards_accuracies, 0.5);
  QVERIFY(close(m.rewards_margins, -0.425 / 4, 1e-14));
  QCOMPARE(m.logps_chosen, -52.75 / 4);
  QCOMPARE(m.logps_rejected, -47.0 / 4);
  QVERIFY(std::isnan(dpo_metrics(out.metric_sums, 0, PrefLoss::Sigmoid).rewards_chosen));
  QVERIFY(std::isnan(m.sft_loss) && std::isnan(m.odds_ratio_loss));  // orpo's alone
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
  QTest::newRow("orpo") << PrefLoss::Orpo << 0.1 << 0.0 << 0.0;
  QTest::newRow("orpo, beta 3, ftx") << PrefLoss::Orpo << 3.0 << 0.0 << 0.5;
  QTest::newRow("simpo") << PrefLoss::Simpo << 2.0 << 0.0 << 0.0;
  QTest::newRow("simpo, ftx") << PrefLoss::Simpo << 0.5 << 0.0 << 1.0;
  // kto_pair: each pair's gradient has a share of the others' through the batch's KL terms
  // (here rejected_KL > 0, chosen_KL clamped to 0).
  QTest::newRow("kto_pair") << PrefLoss::KtoPair << 0.1 << 0.0 << 0.0;
  QTest::newRow("kto_pair, beta 2, ftx") << PrefLoss::KtoPair << 2.0 << 0.0 << 0.5;
}

void TestPreferenceLoss::gradients() {
  QFETCH(PrefLoss, kind);
  QFETCH(double, beta);
  QFETCH(double, ls);
  QFETCH(double, ftx);
  const Setting s{kind, beta, ls, ftx, /*gamma=*/0.75};
  const auto policy = pairs(kPc, kPr, kLc, kLr, true);
  // A reference that asks for gradients must still get none: it is a constant of the loss.
  const auto reference = pairs(kRc, kRr, kLc, kLr, true);
  auto total = [&] { return preference_loss(policy, reference, options(s)).losses.sum(); };
  total().backward();
  QVERIFY(!reference.chosen.grad().defined() && !reference.rejected.grad().defined());

  const auto want = expected_gradients(s, zip(kPc, kPr, kRc, kRr, kLc, kLr));
  for (int64_t i = 0; i < 3; ++i) {
    const auto [dc, dr] = want[size_t(i)];
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
  QTest::addColumn<QString>("empty");  // which response of pair 0 has no tokens: chosen, rejected, both
  for (auto [kind, name] : {std::pair{PrefLoss::Sigmoid, "sigmoid"}, std::pair{PrefLoss::Hinge, "hinge"},
                            std::pair{PrefLoss::Ipo, "ipo"}, std::pair{PrefLoss::Orpo, "orpo"},
                            std::pair{PrefLoss::Simpo, "simpo"}, std::pair{PrefLoss::KtoPair, "kto_pair"}}) {
    QTest::newRow(qPrintable(QString(name) + ", empty chosen")) << kind << QString("chosen");
    QTest::newRow(qPrintable(QString(name) + ", empty rejected")) << kind << QString("rejected");
    QTest::newRow(qPrintable(QString(name) + ", both empty")) << kind << QString("both");
  }
}

void TestPreferenceLoss::zeroLengthResponse() {
  QFETCH(PrefLoss, kind);
  QFETCH(QString, empty);
  // Defined behaviour: an empty response has sum 0 and per-token log-prob 0 / max(0, 1) = 0, so
  // the pair's loss is the formula at those values and its SFT term is 0; for orpo the pair has
  // no odds-ratio term (a mean of 0 would be probability 1: infinite odds).
  const bool no_chosen = empty != "rejected", no_rejected = empty != "chosen";
  const Values pc{no_chosen ? 0.0 : -2.0, -3}, pr{no_rejected ? 0.0 : -4.0, -5};
  const Values rc{no_chosen ? 0.0 : -2.5, -3.5}, rr{no_rejected ? 0.0 : -3.0, -4};
  const Values lc{no_chosen ? 0.0 : 4.0, 2}, lr{no_rejected ? 0.0 : 3.0, 4};
  const Setting s{kind, 0.2, kind == PrefLoss::Sigmoid ? 0.1 : 0.0, 0.5, 0.75};
  const auto policy = pairs(pc, pr, lc, lr, true);
  const auto out = preference_loss(policy, pairs(rc, rr, lc, lr), options(s));
  out.losses.sum().backward();
  QVERIFY(torch::isfinite(out.losses).all().item<bool>());
  QVERIFY(torch::isfinite(out.metric_sums).all().item<bool>());
  QVERIFY(torch::isfinite(policy.chosen.grad()).all().item<bool>());
  QVERIFY(torch::isfinite(policy.rejected.grad()).all().item<bool>());
  const auto ps = zip(pc, pr, rc, rr, lc, lr);
  const auto want = expected_losses(s, ps);
  const auto grads = expected_gradients(s, ps);
  for (int64_t i = 0; i < 2; ++i) {
    QVERIFY2(close(out.losses[i].item<double>(), want[size_t(i)], 1e-14),
             qPrintable(QString("pair %1: %2 vs %3").arg(i).arg(out.losses[i].item<double>(), 0, 'g', 17)
                            .arg(want[size_t(i)], 0, 'g', 17)));
    QVERIFY(close(policy.chosen.grad()[i].item<double>(), grads[size_t(i)].first, 1e-12));
    QVERIFY(close(policy.rejected.grad()[i].item<double>(), grads[size_t(i)].second, 1e-12));
  }
  if (no_chosen) QCOMPARE(out.chosen_logps[0].item<double>(), 0.0);
  if (kind == PrefLoss::Orpo) {
    // Pair 0 is its SFT part alone, -(1 + ftx) * chosen mean (0 when the chosen response is
    // empty), and its rejected response gets no gradient.
    QCOMPARE(out.losses[0].item<double>(), no_chosen ? 0.0 : -(1 + s.ftx) * (-2.0 / 4));
    QCOMPARE(policy.rejected.grad()[0].item<double>(), 0.0);
    QVERIFY(policy.rejected.grad()[1].item<double>() != 0);
  }
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
      QTest::newRow(qPrintable("simpo" + tag)) << PrefLoss::Simpo << 0.0 << l << fp32;
      QTest::newRow(qPrintable("kto_pair" + tag)) << PrefLoss::KtoPair << 0.0 << l << fp32;
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
  const double want = expected_losses(s, {{logits, 0, 0, 0, 1, 1}})[0];
  QVERIFY2(close(out.losses.item<double>(), want, fp32 ? 1e-6 : 1e-14),
           qPrintable(QString("%1 vs %2").arg(out.losses.item<double>()).arg(want)));
  const auto [dc, dr] = expected_gradients(s, {{logits, 0, 0, 0, 1, 1}})[0];
  QVERIFY(close(policy.chosen.grad().item<double>(), dc, 1e-6));
  QVERIFY(close(policy.rejected.grad().item<double>(), dr, 1e-6));
}

void TestPreferenceLoss::orpoExtremeMeans_data() {
  QTest::addColumn<double>("c");  // per-token means
  QTest::addColumn<double>("r");
  QTest::addColumn<bool>("fp32");
  for (bool fp32 : {false, true}) {
    const QString tag = fp32 ? " fp32" : " fp64";
    QTest::newRow(qPrintable("c -1e-9, r -80" + tag)) << -1e-9 << -80.0 << fp32;
    QTest::newRow(qPrintable("c -80, r -1e-9" + tag)) << -80.0 << -1e-9 << fp32;
    QTest::newRow(qPrintable("c -1e-9, r -2e-9" + tag)) << -1e-9 << -2e-9 << fp32;
    QTest::newRow(qPrintable("c -80, r -90" + tag)) << -80.0 << -90.0 << fp32;
    QTest::newRow(qPrintable("at ln 2" + tag)) << -0.6931471805599453 << -0.6931471805599453 << fp32;
    // Every token at probability 1: the mean is moved just below 0.
    QTest::newRow(qPrintable("c 0 (probability 1), r -2" + tag)) << 0.0 << -2.0 << fp32;
    QTest::newRow(qPrintable("c -2, r 0 (probability 1)" + tag)) << -2.0 << 0.0 << fp32;
  }
}

void TestPreferenceLoss::orpoExtremeMeans() {
  QFETCH(double, c);
  QFETCH(double, r);
  QFETCH(bool, fp32);
  const Setting s{PrefLoss::Orpo, 1.0, 0, 0.5};
  const auto dtype = fp32 ? torch::kFloat : torch::kDouble;
  const Values lc{3}, lr{2};
  PairLogps policy = pairs({c * 3}, {r * 2}, lc, lr);
  policy.chosen = policy.chosen.to(dtype).set_requires_grad(true);
  policy.rejected = policy.rejected.to(dtype).set_requires_grad(true);
  const auto out = preference_loss(policy, PairLogps{}, options(s));
  QCOMPARE(out.losses.scalar_type(), dtype);
  out.losses.sum().backward();
  QVERIFY(torch::isfinite(out.losses).all().item<bool>());
  QVERIFY(torch::isfinite(policy.chosen.grad()).all().item<bool>());
  QVERIFY(torch::isfinite(policy.rejected.grad()).all().item<bool>());
  // fp32 moves a mean of 0 to -FLT_MIN, not -DBL_MIN as the doubles here: finite is the claim.
  if (fp32 && (c == 0 || r == 0)) return;
  const Pair p{c * 3, r * 2, 0, 0, 3, 2};
  const double want = expected_losses(s, {p})[0];
  QVERIFY2(close(out.losses.item<double>(), want, fp32 ? 1e-6 : 1e-14),
           qPrintable(QString("%1 vs %2").arg(out.losses.item<double>(), 0, 'g', 17).arg(want, 0, 'g', 17)));
  const auto [dc, dr] = expected_gradients(s, {p})[0];
  const double gc = policy.chosen.grad().item<double>(), gr = policy.rejected.grad().item<double>();
  QVERIFY2(close(gc, dc, fp32 ? 1e-6 : 1e-12), qPrintable(QString("%1 vs %2").arg(gc, 0, 'g', 17).arg(dc, 0, 'g', 17)));
  QVERIFY2(close(gr, dr, fp32 ? 1e-6 : 1e-12), qPrintable(QString("%1 vs %2").arg(gr, 0, 'g', 17).arg(dr, 0, 'g', 17)));
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
  QCOMPARE(defaults.simpo_gamma, 0.5);
  cfg.pref_loss = PrefLoss::Ipo;
  cfg.pref_beta = 0.25;
  cfg.dpo_label_smoothing = 0.05;
  cfg.pref_ftx = 0.75;
  cfg.simpo_gamma = 1.25;
  const auto o = PrefLossOptions::from(cfg);
  QCOMPARE(o.loss, PrefLoss::Ipo);
  QCOMPARE(o.beta, 0.25);
  QCOMPARE(o.label_smoothing, 0.05);
  QCOMPARE(o.ftx, 0.75);
  QCOMPARE(o.simpo_gamma, 1.25);
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

void TestPreferenceLoss::rewardsWithoutReference_data() {
  QTest::addColumn<PrefLoss>("kind");
  QTest::newRow("orpo") << PrefLoss::Orpo;
  QTest::newRow("simpo") << PrefLoss::Simpo;
  QTest::newRow("kto_pair") << PrefLoss::KtoPair;
}

void TestPreferenceLoss::rewardsWithoutReference() {
  // The rewards and the metric sums of the new losses: orpo and simpo (no reference) report
  // beta * the policy's per-token means and the means themselves as logps; kto_pair, like
  // sigmoid, beta * (policy - reference) on the sums and the sums.
  QFETCH(PrefLoss, kind);
  const double beta = 0.2;
  const Values pc = kPc + Values{-5}, pr = kPr + Values{-6}, rc = kRc + Values{-5},
               rr = kRr + Values{-6}, lc = kLc + Values{2}, lr = kLr + Values{3};
  const auto out = preference_loss(pairs(pc, pr, lc, lr, true), pairs(rc, rr, lc, lr),
                                   options({kind, beta, 0, 0}));
  QVERIFY(out.losses.requires_grad());
  QVERIFY(!out.chosen_rewards.requires_grad() && !out.rejected_rewards.requires_grad());
  QVERIFY(!out.chosen_logps.requires_grad() && !out.metric_sums.requires_grad());
  const bool means = kind != PrefLoss::KtoPair;
  std::vector<double> sums(kPrefMetricCount, 0.0);
  for (int i = 0; i < 4; ++i) {
    const double c = means ? pc[i] / lc[i] : pc[i], r = means ? pr[i] / lr[i] : pr[i];
    const double chosen = means ? beta * c : beta * (pc[i] - rc[i]);
    const double rejected = means ? beta * r : beta * (pr[i] - rr[i]);
    QVERIFY(close(out.chosen_logps[i].item<double>(), c, 1e-15));
    QVERIFY(close(out.rejected_logps[i].item<double>(), r, 1e-15));
    QVERIFY(close(out.chosen_rewards[i].item<double>(), chosen, 1e-14));
    QVERIFY(close(out.rejected_rewards[i].item<double>(), rejected, 1e-14));
    sums[kRewardsChosen] += chosen;
    sums[kRewardsRejected] += rejected;
    sums[kRewardsAccuracies] += chosen > rejected ? 1 : 0;
    sums[kRewardsMargins] += chosen - rejected;
    sums[kLogpsChosen] += c;
    sums[kLogpsRejected] += r;
    // LF's orpo terms (summed for every loss, logged for orpo): -(chosen per token) and
    // (loss - that) / beta.
    const double sft = -pc[i] / lc[i];
    sums[kSftLoss] += sft;
    sums[kOddsRatioLoss] += (out.losses[i].item<double>() - sft) / beta;
  }
  // Each kind of reward has accurate and inaccurate pairs here.
  QVERIFY(sums[kRewardsAccuracies] > 0 && sums[kRewardsAccuracies] < 4);
  QCOMPARE(out.metric_sums.scalar_type(), torch::kDouble);
  QCOMPARE(out.metric_sums.numel(), int64_t{kPrefMetricCount});
  for (int64_t i = 0; i < kPrefMetricCount; ++i)
    QVERIFY2(close(out.metric_sums[i].item<double>(), sums[size_t(i)], 1e-14),
             qPrintable(QString("metric %1: %2 vs %3").arg(i).arg(out.metric_sums[i].item<double>()).arg(sums[size_t(i)])));
}

void TestPreferenceLoss::ftxAddsTheSftTerm_data() {
  QTest::addColumn<PrefLoss>("kind");
  QTest::addColumn<double>("ftx");
  QTest::addColumn<bool>("added");  // LF adds the term when ftx > 1e-6
  for (auto [kind, name] : {std::pair{PrefLoss::Sigmoid, "sigmoid"}, std::pair{PrefLoss::Orpo, "orpo"},
                            std::pair{PrefLoss::Simpo, "simpo"}, std::pair{PrefLoss::KtoPair, "kto_pair"}}) {
    QTest::newRow(qPrintable(QString(name) + ", ftx 0.5")) << kind << 0.5 << true;
    QTest::newRow(qPrintable(QString(name) + ", ftx 2e-6")) << kind << 2e-6 << true;
    QTest::newRow(qPrintable(QString(name) + ", ftx 1e-6 (not above LF's threshold)")) << kind << 1e-6 << false;
  }
}

void TestPreferenceLoss::ftxAddsTheSftTerm() {
  // ftx * (-chosen log-prob per token) on top of each pair's loss, for every loss type (orpo
  // included, whose own loss already holds -c once), and nothing else changes.
  QFETCH(PrefLoss, kind);
  QFETCH(double, ftx);
  QFETCH(bool, added);
  const auto policy = pairs(kPc, kPr, kLc, kLr, true);
  const auto reference = pairs(kRc, kRr, kLc, kLr);
  const auto without = preference_loss(policy, reference, options({kind, 0.3, 0, 0}));
  const auto with = preference_loss(policy, reference, options({kind, 0.3, 0, ftx}));
  const auto g0 = torch::autograd::grad({without.losses.sum()}, {policy.chosen, policy.rejected});
  const auto g1 = torch::autograd::grad({with.losses.sum()}, {policy.chosen, policy.rejected});
  // The metrics do not change, but for LF's odds_ratio_loss, (loss - sft_loss) / beta, whose
  // loss holds the ftx term: ftx x sft_loss / beta more.
  QVERIFY(torch::equal(with.metric_sums.narrow(0, 0, kOddsRatioLoss),
                       without.metric_sums.narrow(0, 0, kOddsRatioLoss)));
  const double odds_more = (with.metric_sums[kOddsRatioLoss] - without.metric_sums[kOddsRatioLoss])
                               .item<double>();
  QVERIFY2(close(odds_more, added ? ftx * without.metric_sums[kSftLoss].item<double>() / 0.3 : 0.0,
                 1e-12),
           qPrintable(QString::number(odds_more, 'g', 17)));
  QVERIFY(torch::equal(g1[1], g0[1]));
  if (!added) {
    QVERIFY(torch::equal(with.losses, without.losses));
    QVERIFY(torch::equal(g1[0], g0[0]));
    return;
  }
  for (int64_t i = 0; i < 3; ++i) {
    const int j = static_cast<int>(i);
    const double term = with.losses[i].item<double>() - without.losses[i].item<double>();
    QVERIFY2(close(term, -ftx * kPc[j] / kLc[j], 1e-15),
             qPrintable(QString("pair %1: %2 vs %3").arg(i).arg(term, 0, 'g', 17).arg(-ftx * kPc[j] / kLc[j], 0, 'g', 17)));
    const double dterm = g1[0][i].item<double>() - g0[0][i].item<double>();
    QVERIFY(close(dterm, -ftx / kLc[j], 1e-15));
  }
}

void TestPreferenceLoss::referenceRequirement_data() {
  QTest::addColumn<PrefLoss>("kind");
  QTest::addColumn<bool>("lengths");  // the reference carries its lengths (as the DPO objective passes it)
  QTest::addColumn<bool>("accepted");
  for (auto [kind, name, accepted] :
       {std::tuple{PrefLoss::Orpo, "orpo", true}, std::tuple{PrefLoss::Simpo, "simpo", true},
        std::tuple{PrefLoss::KtoPair, "kto_pair", false}, std::tuple{PrefLoss::Sigmoid, "sigmoid", false},
        std::tuple{PrefLoss::Ipo, "ipo", false}, std::tuple{PrefLoss::Hinge, "hinge", false}}) {
    const QString verdict = accepted ? " accepted" : " refused";
    QTest::newRow(qPrintable(QString(name) + ": no reference log-probs," + verdict)) << kind << true << accepted;
    QTest::newRow(qPrintable(QString(name) + ": empty PairLogps," + verdict)) << kind << false << accepted;
  }
}

void TestPreferenceLoss::referenceRequirement() {
  // orpo and simpo read no reference: an undefined one gives exactly what a given (ignored) one
  // gives. Every other loss refuses to run without one, saying so.
  QFETCH(PrefLoss, kind);
  QFETCH(bool, lengths);
  QFETCH(bool, accepted);
  const auto policy = pairs(kPc, kPr, kLc, kLr);
  PairLogps missing;
  if (lengths) {
    missing.chosen_len = policy.chosen_len;
    missing.rejected_len = policy.rejected_len;
  }
  const auto o = options({kind, 0.3, 0, 0.5});
  if (accepted) {
    PrefLossOut out;
    try {
      out = preference_loss(policy, missing, o);
    } catch (const std::exception& e) {
      QFAIL(qPrintable(QString("refused: ") + e.what()));
    }
    const auto given = preference_loss(policy, pairs(kRc, kRr, kLc, kLr), o);
    QVERIFY(torch::equal(out.losses, given.losses));
    QVERIFY(torch::equal(out.metric_sums, given.metric_sums));
    return;
  }
  QString message;
  try {
    preference_loss(policy, missing, o);
  } catch (const std::invalid_argument& e) {
    message = QString::fromUtf8(e.what());
  }
  QVERIFY2(message.contains("reference"), qPrintable("no invalid_argument naming the reference: '" + message + "'"));
}

QTEST_MAIN(TestPreferenceLoss)
#include "tst_preference_loss.moc"
