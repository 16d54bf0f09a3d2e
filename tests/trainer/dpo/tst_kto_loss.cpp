// Stage kto's loss (trainer/dpo/kto_loss.h) against LLaMA-Factory 0.9.5's own
// CustomKTOTrainer.get_batch_loss_metrics over TRL 0.24's own KTOTrainer.kto_loss, unmodified, on
// the same log-prob sums in float64 (tests/reference/lf_kto_loss.py, run by LLaMA-Factory's venv:
// fails, never skips, without it): the micro-batch's loss, its gradient with respect to every
// example's policy log-prob sum (torch.autograd on both sides), the KL estimate and the metric
// sums LF logs. Plus the refusals.
#include "studio/trainer/dpo/kto_loss.h"

#include <torch/torch.h>

#include <QtTest>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../../data/reference_run.h"

using namespace studio::trainer::dpo;
using nlohmann::json;

namespace {

struct Case {
  double beta = 0.1, chosen_weight = 1, rejected_weight = 1, ftx = 0;
  std::vector<bool> desirable;
  std::vector<double> policy, reference, policy_kl, reference_kl;
  std::vector<int64_t> lengths;
};

json request(const Case& c) {
  return {{"beta", c.beta},
          {"desirable_weight", c.chosen_weight},
          {"undesirable_weight", c.rejected_weight},
          {"ftx", c.ftx},
          {"desirable", c.desirable},
          {"policy_logps", c.policy},
          {"reference_logps", c.reference},
          {"policy_kl_logps", c.policy_kl},
          {"reference_kl_logps", c.reference_kl},
          {"lengths", c.lengths}};
}

torch::Tensor doubles(const std::vector<double>& v) {
  return torch::tensor(v, torch::kDouble);
}

// |a - b| within `rel` of max(|b|, 1e-3).
bool close(double a, double b, double rel = 1e-9) {
  return std::abs(a - b) <= rel * std::max(std::abs(b), 1e-3);
}

}  // namespace

Q_DECLARE_METATYPE(Case)

class TestKtoLoss : public QObject {
  Q_OBJECT

  json answers_;  // LF's, one per row of matchesLlamaFactory_data, in order
  std::vector<Case> cases_;
  std::vector<QString> names_;

  void addCases() {
    auto add = [&](const char* name, Case c) {
      names_.push_back(name);
      cases_.push_back(std::move(c));
    };
    // Mixed kinds, KL positive (the mismatched responses more likely under the policy).
    add("mixed, KL > 0", {0.1, 1, 1, 0, {true, false, true, false},
                          {-10, -12.5, -3, -8}, {-11, -12, -2.5, -9},
                          {-20, -15, -9, -7}, {-22, -16, -9.5, -8}, {5, 6, 2, 4}});
    // A negative KL estimate, clamped at 0.
    add("KL < 0 clamped", {0.1, 1, 1, 0, {true, false, true, false},
                           {-10, -12.5, -3, -8}, {-11, -12, -2.5, -9},
                           {-20, -15, -9, -7}, {-19, -16, -9.5, -6}, {5, 6, 2, 4}});
    // Weights, larger beta, every example undesirable (LF: no SFT term without a desirable one).
    add("only undesirable, weights, ftx", {0.5, 1.33, 0.75, 0.7, {false, false, false},
                                           {-4, -9, -2}, {-3.5, -9.5, -2.25},
                                           {-6, -5, -8}, {-6.5, -5.5, -7}, {3, 7, 2}});
    // Every example desirable, with the SFT term (LF's rescaling by n / n_desirable).
    add("only desirable, ftx", {0.2, 1, 1, 1.0, {true, true},
                                {-7, -3.5}, {-8, -3}, {-4, -6}, {-4.5, -5}, {7, 3}});
    // Mixed with the SFT term: the mean over the desirable ones, scaled by n / n_desirable.
    add("mixed, ftx, weights", {0.1, 2.0, 0.5, 0.3, {false, true, false, false, true},
                                {-12, -4, -6, -30, -9}, {-11, -4.5, -6.5, -28, -9.25},
                                {-14, -7, -11, -3, -20}, {-15, -8, -10, -3.5, -21},
                                {6, 4, 3, 12, 9}});
    // A desirable response without tokens (sum 0, LF's 0/0 skipped by its nanmean).
    add("empty desirable response, ftx", {0.1, 1, 1, 0.5, {true, true, false},
                                          {0, -6, -2}, {0, -5, -3}, {-5, -6, -7},
                                          {-6, -6, -7}, {0, 4, 2}});
    // One example (LF's examples run per_device_train_batch_size: 1).
    add("one example", {0.1, 1, 1, 0.1, {true}, {-5}, {-5.5}, {-9}, {-10}, {3}});
  }

 private Q_SLOTS:
  void initTestCase() {
    addCases();
    json all = json::array();
    for (const Case& c : cases_) all.push_back(request(c));
    QString error;
    const auto out = studio::test::run_reference(QStringLiteral(STUDIO_LLAMAFACTORY_PYTHON),
                                                 "lf_kto_loss.py", all.dump(), error);
    QVERIFY2(out.has_value(), qPrintable(error));
    QVERIFY(out->is_array() && out->size() == cases_.size());
    answers_ = *out;
    qInfo("reference: LLaMA-Factory %s over TRL %s",
          answers_[0]["llamafactory_version"].get<std::string>().c_str(),
          answers_[0]["trl_version"].get<std::string>().c_str());
  }

  void matchesLlamaFactory_data() {
    QTest::addColumn<int>("index");
    for (size_t i = 0; i < cases_.size(); ++i)
      QTest::newRow(qPrintable(names_[i])) << static_cast<int>(i);
  }

  void matchesLlamaFactory() {
    QFETCH(int, index);
    const Case& c = cases_[static_cast<size_t>(index)];
    const json& want = answers_[static_cast<size_t>(index)];
    KtoOptions o;
    o.beta = c.beta;
    o.chosen_weight = c.chosen_weight;
    o.rejected_weight = c.rejected_weight;
    o.ftx = c.ftx;
    KtoBatch b;
    b.policy = doubles(c.policy).requires_grad_(true);
    b.reference = doubles(c.reference);
    std::vector<double> len(c.lengths.begin(), c.lengths.end());
    b.length = doubles(len);
    std::vector<uint8_t> tags(c.desirable.begin(), c.desirable.end());
    b.desirable = torch::tensor(tags, torch::kUInt8).to(torch::kBool);
    const torch::Tensor kl =
        kto_kl_clamp(kto_kl_local(doubles(c.policy_kl), doubles(c.reference_kl)));
    const KtoLossOut out = kto_loss(b, kl, o);
    const torch::Tensor grad = torch::autograd::grad({out.loss}, {b.policy})[0];

    const double loss = out.loss.item<double>();
    QVERIFY2(close(loss, want["loss"].get<double>()),
             qPrintable(QString("loss %1, LF %2").arg(loss, 0, 'g', 17)
                            .arg(want["loss"].get<double>(), 0, 'g', 17)));
    QVERIFY(close(kl.item<double>(), want["kl"].get<double>()));
    for (size_t i = 0; i < c.policy.size(); ++i) {
      const double g = grad[static_cast<int64_t>(i)].item<double>();
      if (want["grad_policy"][i].is_null()) {
        // LF's 0/0 per-token mean of an empty response: nanmean leaves it out of the SFT term,
        // but its gradient is NaN (which would reach every parameter through the masked
        // tokens' 0 x NaN). Ours leaves it out of both: what remains is its KTO loss's.
        QVERIFY2(c.lengths[i] == 0 && std::isfinite(g),
                 qPrintable(QString("example %1: %2").arg(i).arg(g)));
        continue;
      }
      const double w = want["grad_policy"][i].get<double>();
      QVERIFY2(close(g, w), qPrintable(QString("example %1: gradient %2, LF %3")
                                           .arg(i).arg(g, 0, 'g', 17).arg(w, 0, 'g', 17)));
    }
    // LF's metric sums, present for a kind only when the micro-batch has one of it.
    const json& m = want["metrics"];
    const auto sums = out.metric_sums;
    auto check = [&](const char* key, KtoMetric at) {
      const double ours = sums[at].item<double>();
      if (!m.contains(key)) {
        QCOMPARE(ours, 0.0);
        return;
      }
      QVERIFY2(close(ours, m[key].get<double>()),
               qPrintable(QString("%1: %2, LF %3").arg(key).arg(ours).arg(m[key].get<double>())));
    };
    check("rewards/chosen_sum", kKtoRewardsChosen);
    check("rewards/rejected_sum", kKtoRewardsRejected);
    check("logps/chosen_sum", kKtoLogpsChosen);
    check("logps/rejected_sum", kKtoLogpsRejected);
    check("count/chosen", kKtoCountChosen);
    check("count/rejected", kKtoCountRejected);
    // Each example's reward, TRL's (beta x log-ratio), desirable ones first in TRL's lists.
    size_t ci = 0, ri = 0;
    for (size_t i = 0; i < c.policy.size(); ++i) {
      const double r = out.rewards[static_cast<int64_t>(i)].item<double>();
      const json& list = c.desirable[i] ? want["chosen_rewards"] : want["rejected_rewards"];
      const double w = list[c.desirable[i] ? ci++ : ri++].get<double>();
      QVERIFY(close(r, w));
    }
  }

  // A KL estimate that the policy's gradient must not reach (TRL detaches it) and that is the
  // plain mean, before the clamp.
  void klIsDetachedMean() {
    const auto policy_kl = doubles({-3, -5, -1}).requires_grad_(true);
    const auto kl = kto_kl_local(policy_kl, doubles({-4, -4, -4}));
    QVERIFY(!kl.requires_grad());
    QCOMPARE(kl.item<double>(), (1.0 - 1.0 + 3.0) / 3.0);
    QCOMPARE(kto_kl_clamp(doubles({-0.25}).squeeze()).item<double>(), 0.0);
  }

  void refusals_data() {
    QTest::addColumn<int>("which");
    QTest::addColumn<QString>("message");
    QTest::newRow("beta 0") << 0 << "beta must be positive";
    QTest::newRow("sizes differ") << 1 << "non-empty [n] tensors of one size";
    QTest::newRow("empty batch") << 2 << "non-empty [n] tensors of one size";
    QTest::newRow("KL shapes differ") << 3 << "non-empty and of one shape";
  }

  void refusals() {
    QFETCH(int, which);
    QFETCH(QString, message);
    KtoOptions o;
    KtoBatch b;
    b.policy = doubles({-1, -2});
    b.reference = doubles({-1, -2});
    b.length = doubles({1, 2});
    b.desirable = torch::tensor({true, false});
    const auto kl = torch::zeros({}, torch::kDouble);
    const QString error = studio::test::error_of([&] {
      switch (which) {
        case 0:
          o.beta = 0;
          kto_loss(b, kl, o);
          break;
        case 1:
          b.reference = doubles({-1});
          kto_loss(b, kl, o);
          break;
        case 2:
          b.policy = b.reference = b.length = doubles({});
          b.desirable = torch::zeros({0}, torch::kBool);
          kto_loss(b, kl, o);
          break;
        default:
          kto_kl_local(doubles({-1, -2}), doubles({-1}));
      }
    });
    QVERIFY2(error.contains(message), qPrintable(error));
  }
};

QTEST_GUILESS_MAIN(TestKtoLoss)
#include "tst_kto_loss.moc"
