// The DPO losses against independently computed numbers: literals from torch
// (torch.nn.functional.logsigmoid, in the project's Python environment), TRL's own DPO loss code
// (tests/reference/trl_dpo.py run by STUDIO_PYTHON: matchesTrl) and, for every loss, label
// smoothing and ftx setting, the formulas of LLaMA-Factory's DPO trainer evaluated here with plain
// doubles. Gradients w.r.t. the policy log-probs against the analytic derivative and central
// differences; the ipo normalisation by the GLOBAL response length when the sums arrive in SP
// pieces; empty responses and extreme logits stay finite. matchesTrl fails, never skips, when
// STUDIO_PYTHON or its trl is missing: scripts/setup.sh installs them.
#include "studio/trainer/dpo/preference_loss.h"

#include <torch/torch.h>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "../central_difference.h"
#include "studio/trainer/batching/batch.h"

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

// ---- TRL as the reference (matchesTrl)
//
// tests/reference/trl_dpo.py runs TRL's own DPO loss code (DPOTrainer._compute_loss of TRL 1.16,
// unmodified) on the same log-prob sums in float64, each pair as a TRL batch of one, plus all the
// pairs as one batch for the logged means. Our losses follow LLaMA-Factory (see preference_loss.h);
// where TRL 1.16 names the same function differently, the row says which TRL loss it is:
//  - sigmoid with label smoothing: TRL 1.16's "sigmoid" ignores label_smoothing (documented for
//    robust and exo_pair only). LF's conservative DPO (TRL < 1.0's sigmoid),
//    -(1 - ls) logsigmoid(beta l) - ls logsigmoid(-beta l), is TRL 1.16's "aot" loss on a batch of
//    one pair: aot sorts the pairs' log-ratio differences across the batch, and one pair sorts to
//    itself.
//  - ftx: TRL has no ftx; LF's SFT term, -ftx * chosen sum / chosen length, is TRL's "sft" loss
//    weighted by ftx on a batch of one pair (on a larger batch TRL averages over all the batch's
//    chosen tokens, LF per pair; for an empty chosen response TRL gives NaN, we 0).
//  - ipo: the losses agree (TRL normalises the log-RATIOS by the completion token counts, we each
//    log-prob; the same up to rounding). The rewards do not: TRL's are beta * (policy - reference)
//    on the SUMS for every loss type, ours (LF's) for ipo on the per-token means, so ours are TRL's
//    divided by max(length, 1), and the accuracies and margins follow from ours (the accuracy
//    differs from TRL's where the sums and the means disagree: pair 2 of the second batch). Our
//    ipo logps/* metrics are per-token means too, TRL's sums: not compared.
//  - TRL logs rewards/accuracies as a float32 mean: compared to 1e-6.
const QString kTrlScript = QStringLiteral(STUDIO_SOURCE_DIR "/tests/reference/trl_dpo.py");

struct TrlBatch {
  const char* name;
  Values pc, pr, rc, rr, lc, lr;
};

std::vector<TrlBatch> trl_batches() {
  return {
      {"3 pairs", kPc, kPr, kRc, kRr, kLc, kLr},
      // A tie (both rewards 0), an empty rejected response, a pair whose sums prefer the chosen
      // response but whose per-token means prefer the rejected one, large magnitudes, a clear win.
      {"5 pairs",
       {-5, -3, -40, -812.375, -12.5},
       {-6, 0, -6, -640.5, -30.25},
       {-5, -3.5, -42, -790.25, -14},
       {-6, 0, -6.5, -655, -27},
       {2, 2, 20, 300, 9},
       {2, 0, 2, 210, 15}},
      {"4 long pairs",
       {-145.9527, -32.9002, -220.3192, -94.1802},
       {-51.6547, -22.9304, -102.6774, -69.9008},
       {-136.1471, -44.1861, -228.622, -90.3572},
       {-38.2234, -20.6173, -105.777, -55.6131},
       {205, 117, 242, 373},
       {64, 77, 314, 88}},
  };
}

QJsonArray json_values(const Values& v) {
  QJsonArray out;
  for (double x : v) out.append(x);
  return out;
}

QJsonArray json_lengths(const Values& v) {
  QJsonArray out;
  for (double x : v) out.append(static_cast<qint64>(std::llround(x)));
  return out;
}

// Runs trl_dpo.py on `request`: its answer, or an empty object and `error` saying why.
QJsonObject run_trl(const QJsonObject& request, QString& error) {
  QProcess python;
  python.start(QStringLiteral(STUDIO_PYTHON), {kTrlScript});
  if (!python.waitForStarted(30000)) {
    error = QStringLiteral("'" STUDIO_PYTHON "' did not start (%1): run scripts/setup.sh, which "
                           "installs the project's Python environment with trl")
                .arg(python.errorString());
    return {};
  }
  python.write(QJsonDocument(request).toJson(QJsonDocument::Compact));
  python.closeWriteChannel();
  if (!python.waitForFinished(180000)) {
    python.kill();
    python.waitForFinished(10000);
    error = QStringLiteral("trl_dpo.py did not finish within 180 s");
    return {};
  }
  if (python.exitStatus() != QProcess::NormalExit || python.exitCode() != 0) {
    error = QStringLiteral("'" STUDIO_PYTHON " trl_dpo.py' failed (exit code %1): %2\n(is trl "
                           "installed? scripts/setup.sh installs it)")
                .arg(python.exitCode())
                .arg(QString::fromUtf8(python.readAllStandardError()).trimmed());
    return {};
  }
  QJsonParseError parse{};
  const QJsonDocument doc = QJsonDocument::fromJson(python.readAllStandardOutput(), &parse);
  if (!doc.isObject()) {
    error = QStringLiteral("trl_dpo.py printed no JSON object: ") + parse.errorString();
    return {};
  }
  return doc.object();
}

// answer[key] as doubles; empty (and `error` set) unless it is an array of n numbers.
std::vector<double> json_column(const QJsonObject& answer, const QString& key, qsizetype n,
                                QString& error) {
  const QJsonValue value = answer.value(key);
  if (!value.isArray() || value.toArray().size() != n) {
    error = QStringLiteral("trl_dpo.py: \"%1\" is not an array of %2 values").arg(key).arg(n);
    return {};
  }
  const QJsonArray array = value.toArray();
  std::vector<double> out;
  for (const QJsonValue x : array) out.push_back(x.isDouble() ? x.toDouble() : std::nan(""));
  return out;
}

double mean_of(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return sum / static_cast<double>(v.size());
}

QString trl_mismatch(const char* what, int64_t i, double got, double want) {
  return QStringLiteral("%1 of pair %2: ours %3, TRL %4")
      .arg(what)
      .arg(i)
      .arg(got, 0, 'g', 17)
      .arg(want, 0, 'g', 17);
}

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
  void matchesTrl_data();
  void matchesTrl();
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

void TestPreferenceLoss::matchesTrl_data() {
  QTest::addColumn<PrefLoss>("kind");
  QTest::addColumn<QString>("trl");  // the TRL 1.16 loss type that computes our loss
  QTest::addColumn<double>("beta");
  QTest::addColumn<double>("ls");
  QTest::addColumn<double>("ftx");  // TRL: the "sft" loss, weighted by ftx
  QTest::addColumn<Values>("pc");
  QTest::addColumn<Values>("pr");
  QTest::addColumn<Values>("rc");
  QTest::addColumn<Values>("rr");
  QTest::addColumn<Values>("lc");
  QTest::addColumn<Values>("lr");
  struct Row {
    const char* name;
    PrefLoss kind;
    const char* trl;
    double beta, ls, ftx;
    int batch;  // index into trl_batches(), -1: every batch
  };
  const Row rows[] = {
      {"sigmoid, beta 0.1", PrefLoss::Sigmoid, "sigmoid", 0.1, 0, 0, -1},
      {"sigmoid, beta 2", PrefLoss::Sigmoid, "sigmoid", 2.0, 0, 0, 1},
      {"sigmoid, beta 0.5, smoothing 0.1", PrefLoss::Sigmoid, "aot", 0.5, 0.1, 0, 0},
      {"sigmoid, beta 0.1, smoothing 0.1", PrefLoss::Sigmoid, "aot", 0.1, 0.1, 0, 1},
      {"sigmoid, beta 0.25, smoothing 0.1, ftx 0.5", PrefLoss::Sigmoid, "aot", 0.25, 0.1, 0.5, 2},
      {"hinge, beta 0.5 (pair 0 at the margin)", PrefLoss::Hinge, "hinge", 0.5, 0, 0, 0},
      {"hinge, beta 0.1", PrefLoss::Hinge, "hinge", 0.1, 0, 0, -1},
      {"ipo, beta 0.1", PrefLoss::Ipo, "ipo", 0.1, 0, 0, -1},
      {"ipo, beta 2", PrefLoss::Ipo, "ipo", 2.0, 0, 0, 1},
      {"ipo, beta 0.5, ftx 1", PrefLoss::Ipo, "ipo", 0.5, 0, 1.0, 2},
  };
  const auto batches = trl_batches();
  for (const Row& row : rows) {
    for (int b = 0; b < static_cast<int>(batches.size()); ++b) {
      if (row.batch >= 0 && row.batch != b) continue;
      const TrlBatch& x = batches[size_t(b)];
      QTest::newRow(qPrintable(QString(row.name) + "; " + x.name))
          << row.kind << QString::fromLatin1(row.trl) << row.beta << row.ls << row.ftx << x.pc << x.pr
          << x.rc << x.rr << x.lc << x.lr;
    }
  }
}

void TestPreferenceLoss::matchesTrl() {
  QFETCH(PrefLoss, kind);
  QFETCH(QString, trl);
  QFETCH(double, beta);
  QFETCH(double, ls);
  QFETCH(double, ftx);
  QFETCH(Values, pc);
  QFETCH(Values, pr);
  QFETCH(Values, rc);
  QFETCH(Values, rr);
  QFETCH(Values, lc);
  QFETCH(Values, lr);
  const qsizetype n = pc.size();

  QJsonArray types{trl}, weights{1.0};
  if (ftx > 0) {
    types.append(QStringLiteral("sft"));
    weights.append(ftx);
  }
  QJsonObject request;
  request["loss_type"] = types;
  request["loss_weights"] = weights;
  request["beta"] = beta;
  request["label_smoothing"] = ls;
  request["policy_chosen_logps"] = json_values(pc);
  request["policy_rejected_logps"] = json_values(pr);
  request["reference_chosen_logps"] = json_values(rc);
  request["reference_rejected_logps"] = json_values(rr);
  request["chosen_lengths"] = json_lengths(lc);
  request["rejected_lengths"] = json_lengths(lr);
  QString error;
  const QJsonObject answer = run_trl(request, error);
  QVERIFY2(error.isEmpty(), qPrintable(error));
  const auto losses = json_column(answer, "losses", n, error);
  const auto trl_chosen = json_column(answer, "chosen_rewards", n, error);
  const auto trl_rejected = json_column(answer, "rejected_rewards", n, error);
  const auto trl_accuracies = json_column(answer, "reward_accuracies", n, error);
  const auto trl_margins = json_column(answer, "reward_margins", n, error);
  QVERIFY2(error.isEmpty(), qPrintable(error));

  const auto out = preference_loss(pairs(pc, pr, lc, lr), pairs(rc, rr, lc, lr),
                                   options({kind, beta, ls, ftx}));
  QCOMPARE(out.losses.scalar_type(), torch::kDouble);
  QCOMPARE(out.losses.numel(), int64_t{n});

  // Our rewards: TRL's, divided by the response lengths for ipo (see the note above trl_batches).
  const bool ipo = kind == PrefLoss::Ipo;
  std::vector<double> want_chosen, want_rejected, want_accuracies, want_margins;
  for (int64_t i = 0; i < n; ++i) {
    const int j = static_cast<int>(i);
    const double norm_c = ipo ? std::max(lc[j], 1.0) : 1.0, norm_r = ipo ? std::max(lr[j], 1.0) : 1.0;
    want_chosen.push_back(trl_chosen[size_t(i)] / norm_c);
    want_rejected.push_back(trl_rejected[size_t(i)] / norm_r);
    want_accuracies.push_back(ipo ? (want_chosen.back() > want_rejected.back() ? 1.0 : 0.0)
                                  : trl_accuracies[size_t(i)]);
    want_margins.push_back(ipo ? want_chosen.back() - want_rejected.back() : trl_margins[size_t(i)]);

    const double loss = out.losses[i].item<double>();
    QVERIFY2(close(loss, losses[size_t(i)], 1e-10), qPrintable(trl_mismatch("loss", i, loss, losses[size_t(i)])));
    const double chosen = out.chosen_rewards[i].item<double>();
    const double rejected = out.rejected_rewards[i].item<double>();
    QVERIFY2(close(chosen, want_chosen.back(), 1e-10),
             qPrintable(trl_mismatch("chosen reward", i, chosen, want_chosen.back())));
    QVERIFY2(close(rejected, want_rejected.back(), 1e-10),
             qPrintable(trl_mismatch("rejected reward", i, rejected, want_rejected.back())));
    const double accurate = chosen > rejected ? 1.0 : 0.0;
    QVERIFY2(accurate == want_accuracies.back(),
             qPrintable(trl_mismatch("reward accuracy", i, accurate, want_accuracies.back())));
    QVERIFY2(close(chosen - rejected, want_margins.back(), 1e-10),
             qPrintable(trl_mismatch("reward margin", i, chosen - rejected, want_margins.back())));
  }

  // The step metrics: our sums over the pairs, divided as the trainer divides them.
  const auto m = dpo_metrics(out.metric_sums, n);
  QVERIFY2(close(m.rewards_chosen, mean_of(want_chosen), 1e-10), qPrintable(QString::number(m.rewards_chosen, 'g', 17)));
  QVERIFY2(close(m.rewards_rejected, mean_of(want_rejected), 1e-10),
           qPrintable(QString::number(m.rewards_rejected, 'g', 17)));
  QVERIFY2(close(m.rewards_accuracies, mean_of(want_accuracies), 1e-15),
           qPrintable(QString::number(m.rewards_accuracies, 'g', 17)));
  QVERIFY2(close(m.rewards_margins, mean_of(want_margins), 1e-10),
           qPrintable(QString::number(m.rewards_margins, 'g', 17)));
  if (!ipo) {
    // ... and TRL's own logged means over all the pairs as one batch.
    const QJsonObject batch = answer.value("batch").toObject();
    const QJsonObject logged = batch.value("metrics").toObject();
    const std::pair<const char*, double> metrics[] = {
        {"rewards/chosen", m.rewards_chosen},   {"rewards/rejected", m.rewards_rejected},
        {"rewards/margins", m.rewards_margins}, {"logps/chosen", m.logps_chosen},
        {"logps/rejected", m.logps_rejected},   {"rewards/accuracies", m.rewards_accuracies}};
    for (const auto& [key, ours] : metrics) {
      QVERIFY2(logged.value(key).isDouble(), key);
      const double theirs = logged.value(key).toDouble();
      const double tolerance = QByteArray(key) == "rewards/accuracies" ? 1e-6 : 1e-10;  // TRL: a float32 mean
      QVERIFY2(close(ours, theirs, tolerance),
               qPrintable(QStringLiteral("%1: ours %2, TRL %3").arg(key).arg(ours, 0, 'g', 17).arg(theirs, 0, 'g', 17)));
    }
    // TRL's batch loss is the mean of the pairs' losses except where the row relies on a batch of
    // one (aot sorts across the batch; sft averages over the batch's tokens).
    if (trl != QLatin1String("aot") && ftx == 0) {
      QVERIFY(batch.value("loss").isDouble());
      const double ours = out.losses.mean().item<double>(), theirs = batch.value("loss").toDouble();
      QVERIFY2(close(ours, theirs, 1e-10),
               qPrintable(QStringLiteral("batch loss: ours %1, TRL %2").arg(ours, 0, 'g', 17).arg(theirs, 0, 'g', 17)));
    }
  }
}

QTEST_MAIN(TestPreferenceLoss)
#include "tst_preference_loss.moc"
