// The preference losses against TRL's own code on the same log-probs: its DPO losses
// (tests/reference/trl_dpo.py: matchesTrl) and its ORPO and SimPO code with TRL 0.8's kto_pair
// formula (tests/reference/trl_pref_losses.py: matchesTrlPrefLosses, with torch.autograd's
// gradients), run by STUDIO_PYTHON. Both fail, never skip, when STUDIO_PYTHON or its trl is
// missing: scripts/setup.sh installs them. tst_preference_loss checks the formulas themselves.
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
#include "preference_loss_cases.h"

using namespace studio::trainer;
using namespace studio::trainer::dpo;
using studio::PrefLoss;


using namespace pref_cases;

namespace {

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

class TestPreferenceLossTrl : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void matchesTrl_data();
  void matchesTrl();
  void matchesTrlPrefLosses_data();
  void matchesTrlPrefLosses();

 private:
  QJsonArray trl_answers_;  // trl_dpo.py's answers to matchesTrl's rows
  QString trl_error_;       // or why there are none
  QJsonArray pref_answers_;  // trl_pref_losses.py's answers to matchesTrlPrefLosses' rows
  QString pref_error_;       // or why there are none
};

void TestPreferenceLossTrl::matchesTrl_data() {
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
  QTest::addColumn<int>("answer_index");  // into trl_answers_
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
  // All rows' requests go to one run of trl_dpo.py (its TRL import takes seconds); each row then
  // checks its own answer.
  QJsonArray requests;
  const auto batches = trl_batches();
  for (const Row& row : rows) {
    for (int b = 0; b < static_cast<int>(batches.size()); ++b) {
      if (row.batch >= 0 && row.batch != b) continue;
      const TrlBatch& x = batches[size_t(b)];
      QTest::newRow(qPrintable(QString(row.name) + "; " + x.name))
          << row.kind << QString::fromLatin1(row.trl) << row.beta << row.ls << row.ftx << x.pc << x.pr
          << x.rc << x.rr << x.lc << x.lr << static_cast<int>(requests.size());
      QJsonArray types{QString::fromLatin1(row.trl)}, weights{1.0};
      if (row.ftx > 0) {
        types.append(QStringLiteral("sft"));
        weights.append(row.ftx);
      }
      QJsonObject request;
      request["loss_type"] = types;
      request["loss_weights"] = weights;
      request["beta"] = row.beta;
      request["label_smoothing"] = row.ls;
      request["policy_chosen_logps"] = json_values(x.pc);
      request["policy_rejected_logps"] = json_values(x.pr);
      request["reference_chosen_logps"] = json_values(x.rc);
      request["reference_rejected_logps"] = json_values(x.rr);
      request["chosen_lengths"] = json_lengths(x.lc);
      request["rejected_lengths"] = json_lengths(x.lr);
      requests.append(request);
    }
  }
  trl_error_.clear();
  trl_answers_ = run_reference(kTrlScript, QJsonDocument(requests), trl_error_).array();
  if (trl_error_.isEmpty() && trl_answers_.size() != requests.size())
    trl_error_ = QStringLiteral("trl_dpo.py answered %1 of %2 requests").arg(trl_answers_.size()).arg(requests.size());
}

void TestPreferenceLossTrl::matchesTrl() {
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
  QFETCH(int, answer_index);
  const qsizetype n = pc.size();

  QVERIFY2(trl_error_.isEmpty(), qPrintable(trl_error_));
  const QJsonObject answer = trl_answers_.at(answer_index).toObject();
  QString error;
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
  const auto m = dpo_metrics(out.metric_sums, n, PrefLoss::Sigmoid);
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


void TestPreferenceLossTrl::matchesTrlPrefLosses_data() {
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

void TestPreferenceLossTrl::matchesTrlPrefLosses() {
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
  const auto m = dpo_metrics(out.metric_sums, n, kind);
  if (kind == PrefLoss::Orpo) {
    // LF's logged orpo terms: sft_loss the mean of TRL's nll, odds_ratio_loss the mean of
    // (loss - sft_loss) / beta = -TRL's odds_ratio / beta (plus ftx x nll / beta with pref_ftx).
    std::vector<double> odds;
    for (size_t k = 0; k < size_t(n); ++k)
      odds.push_back((-trl["odds_ratio"][k] + sft_weight * trl["nll"][k]) / beta);
    near("sft_loss", -1, m.sft_loss, mean_of(trl["nll"]));
    near("odds_ratio_loss", -1, m.odds_ratio_loss, mean_of(odds));
  } else if (!std::isnan(m.sft_loss) || !std::isnan(m.odds_ratio_loss)) {
    failure = "sft_loss and odds_ratio_loss are orpo's alone";
  }
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


QTEST_MAIN(TestPreferenceLossTrl)
#include "tst_preference_loss_trl.moc"
