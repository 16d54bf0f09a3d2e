// The preference losses against independently computed numbers: literals from torch
// (torch.nn.functional.logsigmoid, in the project's Python environment), TRL's own DPO loss code
// (tests/reference/trl_dpo.py run by STUDIO_PYTHON: matchesTrl), TRL's own ORPO and SimPO code and
// TRL 0.8's kto_pair formula (tests/reference/trl_pref_losses.py: matchesTrlPrefLosses, with
// torch.autograd's gradients) and, for every loss, label smoothing and ftx setting, the formulas
// of LLaMA-Factory's DPO trainer evaluated here with plain doubles. Gradients w.r.t. the policy
// log-probs against the analytic derivative and central differences; the ipo normalisation by the
// GLOBAL response length when the sums arrive in SP pieces; empty responses, extreme logits and
// extreme orpo means stay finite; orpo and simpo run without a reference, the others refuse to.
// matchesTrl and matchesTrlPrefLosses fail, never skip, when STUDIO_PYTHON or its trl is missing:
// scripts/setup.sh installs them.
#include "studio/trainer/dpo/preference_loss.h"

#include <torch/torch.h>

#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>
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
  double gamma = 0.5;  // simpo_gamma
};

bool per_token_kind(PrefLoss k) { return k == PrefLoss::Ipo || k == PrefLoss::Orpo || k == PrefLoss::Simpo; }

// What a loss compares: the policy's log-probs c, r (per-token means for ipo, orpo and simpo,
// sums otherwise) and the DPO logits (c - r) - (rc - rr) (ipo: on the reference's means too).
struct Compared {
  double c, r, logits;
};

Compared compared(const Setting& s, const Pair& p) {
  const bool means = per_token_kind(s.kind);
  const double c = means ? per_token(p.pc, p.lc) : p.pc, r = means ? per_token(p.pr, p.lr) : p.pr;
  const bool ipo = s.kind == PrefLoss::Ipo;
  const double rc = ipo ? per_token(p.rc, p.lc) : p.rc, rr = ipo ? per_token(p.rr, p.lr) : p.rr;
  return {c, r, (c - r) - (rc - rr)};
}

// ORPO's odds ratio on means c, r, a mean of exactly 0 moved just below 0 first (see
// preference_loss.h).
double orpo_mean(double x) { return std::min(x, -std::numeric_limits<double>::min()); }
double log1mexp(double x) { return std::log(-std::expm1(orpo_mean(x))); }
double orpo_log_odds(double c, double r) { return (c - r) - (log1mexp(c) - log1mexp(r)); }
bool orpo_empty(const Pair& p) { return p.lc <= 0 || p.lr <= 0; }

// The per-pair formulas of LLaMA-Factory's DPO trainer (TRL < 0.9's kto_pair), written out once
// more in doubles, for the N pairs of one call (kto_pair's KL terms couple them), ftx included.
std::vector<double> expected_losses(const Setting& s, const std::vector<Pair>& ps) {
  double kl_c = 0, kl_r = 0;  // kto_pair
  for (const Pair& p : ps) {
    kl_c += (p.pc - p.rc) / double(ps.size());
    kl_r += (p.pr - p.rr) / double(ps.size());
  }
  kl_c = std::max(kl_c, 0.0);
  kl_r = std::max(kl_r, 0.0);
  std::vector<double> out;
  for (const Pair& p : ps) {
    const auto [c, r, l] = compared(s, p);
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
      case PrefLoss::Orpo:
        loss = -c + s.beta * (orpo_empty(p) ? 0 : -log_sigmoid(orpo_log_odds(c, r)));
        break;
      case PrefLoss::Simpo:
        loss = -log_sigmoid(s.beta * ((c - r) - s.gamma / s.beta));
        break;
      case PrefLoss::KtoPair:
        loss = ((1 - sigmoid(s.beta * ((p.pc - p.rc) - kl_r))) +
                (1 - sigmoid(s.beta * (kl_c - (p.pr - p.rr))))) / 2;
        break;
    }
    out.push_back(loss - (s.ftx > 1e-6 ? s.ftx * per_token(p.pc, p.lc) : 0));
  }
  return out;
}

// d sum(losses) / d (policy chosen sum), d sum(losses) / d (policy rejected sum), per pair.
std::vector<std::pair<double, double>> expected_gradients(const Setting& s, const std::vector<Pair>& ps) {
  const double n = double(ps.size());
  double mean_c = 0, mean_r = 0;  // kto_pair: the KL terms' arguments
  for (const Pair& p : ps) {
    mean_c += (p.pc - p.rc) / n;
    mean_r += (p.pr - p.rr) / n;
  }
  const double kl_c = std::max(mean_c, 0.0), kl_r = std::max(mean_r, 0.0);
  auto dsig = [](double x) { return sigmoid(x) * sigmoid(-x); };
  double via_kl_c = 0, via_kl_r = 0;  // kto_pair: d sum / d KL_c and d sum / d KL_r
  for (const Pair& p : ps) {
    via_kl_c += -s.beta * dsig(s.beta * (kl_c - (p.pr - p.rr))) / 2;
    via_kl_r += s.beta * dsig(s.beta * ((p.pc - p.rc) - kl_r)) / 2;
  }
  std::vector<std::pair<double, double>> out;
  for (const Pair& p : ps) {
    const auto [c, r, l] = compared(s, p);
    double dc = 0, dr = 0;  // w.r.t. what the loss compares (c, r)
    switch (s.kind) {
      case PrefLoss::Sigmoid:
        dc = -(1 - s.ls) * s.beta * sigmoid(-s.beta * l) + s.ls * s.beta * sigmoid(s.beta * l);
        dr = -dc;
        break;
      case PrefLoss::Hinge:
        dc = s.beta * l < 1 ? -s.beta : 0;
        dr = -dc;
        break;
      case PrefLoss::Ipo:
        dc = 2 * (l - 1 / (2 * s.beta));
        dr = -dc;
        break;
      case PrefLoss::Orpo: {
        dc = -1;
        if (orpo_empty(p)) break;
        const double sg = s.beta * sigmoid(-orpo_log_odds(c, r));  // -d loss / d log_odds
        // d log_odds / dc = 1 / (1 - exp(c)), d log_odds / dr = -1 / (1 - exp(r)); 0 for a mean
        // moved below 0 (the clamp passes no gradient).
        if (c == orpo_mean(c)) dc -= sg / -std::expm1(c);
        if (r == orpo_mean(r)) dr = sg / -std::expm1(r);
        break;
      }
      case PrefLoss::Simpo:
        dc = -s.beta * sigmoid(-s.beta * ((c - r) - s.gamma / s.beta));
        dr = -dc;
        break;
      case PrefLoss::KtoPair:
        dc = -s.beta * dsig(s.beta * ((p.pc - p.rc) - kl_r)) / 2 + (mean_c >= 0 ? via_kl_c / n : 0);
        dr = s.beta * dsig(s.beta * (kl_c - (p.pr - p.rr))) / 2 + (mean_r >= 0 ? via_kl_r / n : 0);
        break;
    }
    if (per_token_kind(s.kind)) {
      dc /= std::max(p.lc, 1.0);
      dr /= std::max(p.lr, 1.0);
    }
    out.push_back({dc - (s.ftx > 1e-6 ? s.ftx / std::max(p.lc, 1.0) : 0), dr});
  }
  return out;
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
  o.simpo_gamma = s.gamma;
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

// Runs the reference `script` (trl_dpo.py, trl_pref_losses.py) on `request`: its answer, an
// object or (trl_pref_losses.py asked an array) an array, or an empty document and `error`
// saying why.
QJsonDocument run_reference(const QString& script, const QJsonDocument& request, QString& error) {
  const QString name = QFileInfo(script).fileName();
  QProcess python;
  python.start(QStringLiteral(STUDIO_PYTHON), {script});
  if (!python.waitForStarted(30000)) {
    error = QStringLiteral("'" STUDIO_PYTHON "' did not start (%1): run scripts/setup.sh, which "
                           "installs the project's Python environment with trl")
                .arg(python.errorString());
    return {};
  }
  python.write(request.toJson(QJsonDocument::Compact));
  python.closeWriteChannel();
  if (!python.waitForFinished(180000)) {
    python.kill();
    python.waitForFinished(10000);
    error = name + QStringLiteral(" did not finish within 180 s");
    return {};
  }
  if (python.exitStatus() != QProcess::NormalExit || python.exitCode() != 0) {
    error = QStringLiteral("'" STUDIO_PYTHON " %1' failed (exit code %2): %3\n(is trl "
                           "installed? scripts/setup.sh installs it)")
                .arg(name)
                .arg(python.exitCode())
                .arg(QString::fromUtf8(python.readAllStandardError()).trimmed());
    return {};
  }
  QJsonParseError parse{};
  const QJsonDocument doc = QJsonDocument::fromJson(python.readAllStandardOutput(), &parse);
  if (doc.isObject() != request.isObject() || doc.isArray() != request.isArray()) {
    error = name + QStringLiteral(" printed no JSON %1: %2")
                       .arg(request.isArray() ? "array" : "object", parse.errorString());
    return {};
  }
  return doc;
}

QJsonObject run_trl(const QJsonObject& request, QString& error) {
  return run_reference(kTrlScript, QJsonDocument(request), error).object();
}

// answer[key] as doubles; empty (and `error` set) unless it is an array of n numbers.
std::vector<double> json_column(const QJsonObject& answer, const QString& key, qsizetype n,
                                QString& error) {
  const QJsonValue value = answer.value(key);
  if (!value.isArray() || value.toArray().size() != n) {
    error = QStringLiteral("the reference's answer: \"%1\" is not an array of %2 values").arg(key).arg(n);
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

// ---- The orpo, simpo and kto_pair references (matchesTrlPrefLosses)
//
// tests/reference/trl_pref_losses.py runs, on the same log-prob sums in float64 and all the pairs
// as one batch: TRL 1.16's own ORPOTrainer.odds_ratio_loss (trl.experimental.orpo) and
// CPOTrainer.cpo_loss with loss_type "simpo" (trl.experimental.cpo; label_smoothing 0, cpo_alpha 0),
// unmodified, on the per-token means; for kto_pair, which TRL 1.16 no longer has, a transcription
// of TRL 0.8's DPOTrainer.dpo_loss "kto_pair" branch (the LF/TRL < 0.9 formula LLaMA-Factory's
// pinned TRL ran). It answers LF's per-pair losses built from those (see the script), the
// rewards, the log-probs compared and torch.autograd's gradient of the mean loss w.r.t. the
// policy SUMS. Compared at 1e-6 relative (to max(1, |TRL|)): TRL's odds_ratio_loss casts the
// log-probs to float32 (.float()), so orpo's odds-ratio part, rewards and gradients carry float32
// rounding. Each row also prints the largest relative difference it saw.
const QString kPrefLossScript = QStringLiteral(STUDIO_SOURCE_DIR "/tests/reference/trl_pref_losses.py");

// TRL averages over the tokens (0/0 for an empty response), so these batches have none; the
// "5 pairs" batch of trl_batches() (an empty rejected response) serves kto_pair without ftx.
std::vector<TrlBatch> pref_loss_batches() {
  auto batches = trl_batches();
  batches.push_back({"1 pair", {-10}, {-14}, {-11}, {-13}, {4}, {8}});
  // Per-token means -1e-9, -80, -ln 2, -3 (chosen) and -80, -1e-9, -0.7, -2.5 (rejected).
  batches.push_back({"extreme means",
                     {-1e-9, -240, -1.3862943611198906, -21},
                     {-80, -2e-9, -1.4, -10},
                     {-2e-9, -200, -1.5, -20},
                     {-70, -3e-9, -1.2, -11},
                     {1, 3, 2, 7},
                     {1, 2, 2, 4}});
  return batches;
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
  void matchesTrl_data();
  void matchesTrl();
  void matchesTrlPrefLosses_data();
  void matchesTrlPrefLosses();

 private:
  QJsonArray pref_answers_;  // trl_pref_losses.py's answers to matchesTrlPrefLosses' rows
  QString pref_error_;       // or why there are none
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

void TestPreferenceLoss::rewardsWithoutReference_data() {
  QTest::addColumn<PrefLoss>("kind");
  QTest::newRow("orpo") << PrefLoss::Orpo;
  QTest::newRow("simpo") << PrefLoss::Simpo;
  QTest::newRow("kto_pair") << PrefLoss::KtoPair;
}

void TestPreferenceLoss::rewardsWithoutReference() {
  // The rewards and the six metric sums of the new losses: orpo and simpo (no reference) report
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
  QVERIFY(torch::equal(with.metric_sums, without.metric_sums));
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

void TestPreferenceLoss::matchesTrlPrefLosses_data() {
  QTest::addColumn<PrefLoss>("kind");
  QTest::addColumn<double>("beta");
  QTest::addColumn<double>("gamma");
  QTest::addColumn<double>("ftx");
  QTest::addColumn<Values>("pc");
  QTest::addColumn<Values>("pr");
  QTest::addColumn<Values>("rc");
  QTest::addColumn<Values>("rr");
  QTest::addColumn<Values>("lc");
  QTest::addColumn<Values>("lr");
  QTest::addColumn<int>("answer_index");  // into pref_answers_
  struct Row {
    const char* name;
    PrefLoss kind;
    double beta, gamma, ftx;
    int batch;  // index into pref_loss_batches(), -1: every batch the loss can take
  };
  const Row rows[] = {
      {"orpo, beta 0.1", PrefLoss::Orpo, 0.1, 0, 0, -1},
      {"orpo, beta 1, ftx 0.5", PrefLoss::Orpo, 1.0, 0, 0.5, 0},
      {"orpo, beta 0.25, ftx 2", PrefLoss::Orpo, 0.25, 0, 2.0, 4},
      {"simpo, beta 2, gamma 0.5", PrefLoss::Simpo, 2.0, 0.5, 0, -1},
      {"simpo, beta 0.1, gamma 1.2, ftx 0.25", PrefLoss::Simpo, 0.1, 1.2, 0.25, 2},
      {"simpo, beta 10, gamma 0", PrefLoss::Simpo, 10.0, 0, 0, 0},
      {"kto_pair, beta 0.1", PrefLoss::KtoPair, 0.1, 0, 0, -1},
      {"kto_pair, beta 2", PrefLoss::KtoPair, 2.0, 0, 0, 2},
      {"kto_pair, beta 0.5, ftx 0.5", PrefLoss::KtoPair, 0.5, 0, 0.5, 0},
      {"kto_pair, beta 0.5, ftx 0.5", PrefLoss::KtoPair, 0.5, 0, 0.5, 3},
  };
  // All rows' requests go to one run of the script (its TRL import takes seconds); each row
  // then checks its own answer.
  QJsonArray requests;
  const auto batches = pref_loss_batches();
  for (const Row& row : rows) {
    for (int b = 0; b < static_cast<int>(batches.size()); ++b) {
      if (row.batch >= 0 && row.batch != b) continue;
      const TrlBatch& x = batches[size_t(b)];
      // The script averages over the tokens where the loss or the SFT term needs it: no empty
      // responses there.
      const bool averages = row.kind != PrefLoss::KtoPair || row.ftx > 0;
      const bool empty = std::any_of(x.lc.begin(), x.lc.end(), [](double l) { return l < 1; }) ||
                         std::any_of(x.lr.begin(), x.lr.end(), [](double l) { return l < 1; });
      if (averages && empty) continue;
      const bool kto = row.kind == PrefLoss::KtoPair;
      QJsonObject request;
      request["loss"] = row.kind == PrefLoss::Orpo ? "orpo" : row.kind == PrefLoss::Simpo ? "simpo" : "kto_pair";
      request["beta"] = row.beta;
      request["simpo_gamma"] = row.gamma;
      request["ftx"] = row.ftx;
      request["policy_chosen_logps"] = json_values(x.pc);
      request["policy_rejected_logps"] = json_values(x.pr);
      if (kto) {
        request["reference_chosen_logps"] = json_values(x.rc);
        request["reference_rejected_logps"] = json_values(x.rr);
      }
      request["chosen_lengths"] = json_lengths(x.lc);
      request["rejected_lengths"] = json_lengths(x.lr);
      QTest::newRow(qPrintable(QString(row.name) + "; " + x.name))
          << row.kind << row.beta << row.gamma << row.ftx << x.pc << x.pr << x.rc << x.rr << x.lc << x.lr
          << static_cast<int>(requests.size());
      requests.append(request);
    }
  }
  pref_error_.clear();
  pref_answers_ = run_reference(kPrefLossScript, QJsonDocument(requests), pref_error_).array();
  if (pref_error_.isEmpty() && pref_answers_.size() != requests.size())
    pref_error_ = QStringLiteral("trl_pref_losses.py answered %1 of %2 requests").arg(pref_answers_.size()).arg(requests.size());
}

void TestPreferenceLoss::matchesTrlPrefLosses() {
  QFETCH(PrefLoss, kind);
  QFETCH(double, beta);
  QFETCH(double, gamma);
  QFETCH(double, ftx);
  QFETCH(Values, pc);
  QFETCH(Values, pr);
  QFETCH(Values, rc);
  QFETCH(Values, rr);
  QFETCH(Values, lc);
  QFETCH(Values, lr);
  QFETCH(int, answer_index);
  const qsizetype n = pc.size();
  const bool kto = kind == PrefLoss::KtoPair;

  QVERIFY2(pref_error_.isEmpty(), qPrintable(pref_error_));
  const QJsonObject answer = pref_answers_.at(answer_index).toObject();
  QString error;
  std::map<QString, std::vector<double>> trl;
  for (const char* key : {"losses", "chosen_rewards", "rejected_rewards", "chosen_logps", "rejected_logps",
                          "grad_chosen", "grad_rejected"})
    trl[key] = json_column(answer, key, n, error);
  if (kind == PrefLoss::Orpo) {
    trl["odds_ratio"] = json_column(answer, "odds_ratio", n, error);
    trl["nll"] = json_column(answer, "nll", n, error);
  }
  if (kto) trl["halves"] = json_column(answer, "halves", 2 * n, error);
  QVERIFY2(error.isEmpty(), qPrintable(error));

  // Ours, the reference-free losses without any reference (as the DPO objective calls them).
  const auto policy = pairs(pc, pr, lc, lr, true);
  const auto out = preference_loss(policy, kto ? pairs(rc, rr, lc, lr) : PairLogps{},
                                   options({kind, beta, 0, ftx, gamma}));
  QCOMPARE(out.losses.scalar_type(), torch::kDouble);
  QCOMPARE(out.losses.numel(), int64_t{n});
  out.losses.mean().backward();

  double worst = 0;  // the largest relative difference seen, printed below
  QString failure;
  auto near = [&](const QString& what, int64_t i, double ours, double theirs) {
    const double rel = std::abs(ours - theirs) / std::max(1.0, std::abs(theirs));
    if (rel > worst) worst = rel;
    if (!(rel <= 1e-6) && failure.isEmpty())
      failure = QStringLiteral("%1 of pair %2: ours %3, reference %4")
                    .arg(what)
                    .arg(i)
                    .arg(ours, 0, 'g', 17)
                    .arg(theirs, 0, 'g', 17);
  };
  // TRL's orpo gradient is NaN where its float32 exp(mean) rounds to 1 (TRL's log1mexp: see
  // trl_pref_losses.py). There ours must be finite; orpoExtremeMeans checks its value.
  int trl_nan = 0;
  auto gradient_near = [&](const QString& what, int64_t i, double ours, double theirs, double mean) {
    if (kind == PrefLoss::Orpo && std::isnan(theirs) && std::exp(static_cast<float>(mean)) == 1.0f) {
      ++trl_nan;
      if (!std::isfinite(ours) && failure.isEmpty()) failure = what + QStringLiteral(" of pair %1 is not finite").arg(i);
      return;
    }
    near(what, i, ours, theirs);
  };
  const double sft_weight = ftx > 1e-6 ? ftx : 0;
  std::vector<double> accuracies;
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = size_t(i);
    const double loss = out.losses[i].item<double>(), c = out.chosen_logps[i].item<double>();
    const double chosen = out.chosen_rewards[i].item<double>(), rejected = out.rejected_rewards[i].item<double>();
    near("loss", i, loss, trl["losses"][k]);
    near("chosen reward", i, chosen, trl["chosen_rewards"][k]);
    near("rejected reward", i, rejected, trl["rejected_rewards"][k]);
    near("reward margin", i, chosen - rejected, trl["chosen_rewards"][k] - trl["rejected_rewards"][k]);
    near("chosen logps", i, c, trl["chosen_logps"][k]);
    near("rejected logps", i, out.rejected_logps[i].item<double>(), trl["rejected_logps"][k]);
    gradient_near("d loss / d chosen sum", i, policy.chosen.grad()[i].item<double>(), trl["grad_chosen"][k], c);
    gradient_near("d loss / d rejected sum", i, policy.rejected.grad()[i].item<double>(), trl["grad_rejected"][k],
                  out.rejected_logps[i].item<double>());
    const bool accurate = chosen > rejected;
    accuracies.push_back(trl["chosen_rewards"][k] > trl["rejected_rewards"][k] ? 1.0 : 0.0);
    if (accurate != (accuracies.back() == 1.0) && failure.isEmpty())
      failure = QStringLiteral("reward accuracy of pair %1 differs").arg(i);
    if (kind == PrefLoss::Orpo) {
      // Our loss less our SFT part is TRL's odds-ratio part; the SFT part is TRL's nll (-c).
      near("orpo odds-ratio part", i, loss - (1 + sft_weight) * -c, -trl["odds_ratio"][k]);
      near("orpo SFT part", i, -c, trl["nll"][k]);
    }
    if (kto) {
      // The per-pair loss is the mean of the formula's chosen and rejected halves.
      const double halves = (trl["halves"][k] + trl["halves"][k + size_t(n)]) / 2;
      near("kto_pair halves", i, loss + sft_weight * pc[int(i)] / lc[int(i)], halves);
    }
  }
  if (kto && ftx == 0) near("kto_pair batch loss", -1, out.losses.mean().item<double>(), answer.value("loss").toDouble(std::nan("")));
  const auto m = dpo_metrics(out.metric_sums, n);
  near("rewards/chosen", -1, m.rewards_chosen, mean_of(trl["chosen_rewards"]));
  near("rewards/rejected", -1, m.rewards_rejected, mean_of(trl["rejected_rewards"]));
  near("rewards/margins", -1, m.rewards_margins, mean_of(trl["chosen_rewards"]) - mean_of(trl["rejected_rewards"]));
  near("rewards/accuracies", -1, m.rewards_accuracies, mean_of(accuracies));
  near("logps/chosen", -1, m.logps_chosen, mean_of(trl["chosen_logps"]));
  near("logps/rejected", -1, m.logps_rejected, mean_of(trl["rejected_logps"]));
  qInfo("largest relative difference to the reference: %.3g%s", worst,
        trl_nan ? qPrintable(QStringLiteral(" (TRL's gradient NaN for %1 value(s))").arg(trl_nan)) : "");
  QVERIFY2(failure.isEmpty(), qPrintable(failure));
}

QTEST_MAIN(TestPreferenceLoss)
#include "tst_preference_loss.moc"
