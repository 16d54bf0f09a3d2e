// Batches (global label shift, padding), the epoch planner and the chunked LM loss.
#include <QtTest>

#include <set>

#include "studio/trainer/data/batch.h"
#include "studio/trainer/data/sampler.h"
#include "studio/trainer/loss.h"

using namespace studio::trainer;

class TestTrainingData : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void batchShiftsLabelsGlobally();
  void batchPadsToMultiple_data();
  void batchPadsToMultiple();
  void batchRejectsMismatchedLabels();
  void plannerIsDeterministicPermutation();
  void plannerShardsOverDataParallel_data();
  void plannerShardsOverDataParallel();
  void lossEqualsReferenceForAnyChunk_data();
  void lossEqualsReferenceForAnyChunk();
  void logprobsMatchLogSoftmax();
};

void TestTrainingData::batchShiftsLabelsGlobally() {
  TokenizedSample a{{10, 11, 12, 13}, {kIgnoreIndex, kIgnoreIndex, 12, 13}};
  TokenizedSample b{{20, 21}, {20, 21}};
  Batch batch = make_batch({&a, &b}, /*pad_id=*/0);
  QCOMPARE(batch.input_ids.size(1), int64_t{4});
  // position i predicts labels[i + 1]; the last position and padding predict nothing
  std::vector<int64_t> ta(batch.targets[0].data_ptr<int64_t>(), batch.targets[0].data_ptr<int64_t>() + 4);
  std::vector<int64_t> tb(batch.targets[1].data_ptr<int64_t>(), batch.targets[1].data_ptr<int64_t>() + 4);
  QCOMPARE(ta, (std::vector<int64_t>{kIgnoreIndex, 12, 13, kIgnoreIndex}));
  QCOMPARE(tb, (std::vector<int64_t>{21, kIgnoreIndex, kIgnoreIndex, kIgnoreIndex}));
  QCOMPARE(batch.input_ids[1][3].item<int64_t>(), int64_t{0});
  QCOMPARE(batch.valid_tokens, int64_t{3});
  QCOMPARE(batch.tokens, int64_t{6});
  QCOMPARE(batch.position_ids[1][3].item<int64_t>(), int64_t{3});
}

void TestTrainingData::batchPadsToMultiple_data() {
  QTest::addColumn<int>("length");
  QTest::addColumn<int>("multiple");
  QTest::addColumn<int>("expected");
  QTest::newRow("exact") << 16 << 8 << 16;
  QTest::newRow("round up") << 17 << 8 << 24;
  QTest::newRow("zigzag 2*sp") << 5 << 4 << 8;
  QTest::newRow("no multiple") << 7 << 1 << 7;
}

void TestTrainingData::batchPadsToMultiple() {
  QFETCH(int, length);
  QFETCH(int, multiple);
  QFETCH(int, expected);
  TokenizedSample s{std::vector<int64_t>(length, 5), std::vector<int64_t>(length, 5)};
  QCOMPARE(make_batch({&s}, 0, multiple).input_ids.size(1), int64_t(expected));
}

void TestTrainingData::batchRejectsMismatchedLabels() {
  TokenizedSample s{{1, 2, 3}, {1, 2}};
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, make_batch({&s}, 0));
}

void TestTrainingData::plannerIsDeterministicPermutation() {
  SamplerOptions opt;
  opt.seed = 7;
  EpochPlanner p(100, opt);
  auto o0 = p.order(0);
  QCOMPARE(o0, EpochPlanner(100, opt).order(0));
  QVERIFY(o0 != p.order(1));
  QCOMPARE(std::set<size_t>(o0.begin(), o0.end()).size(), size_t{100});
  opt.shuffle = false;
  auto plain = EpochPlanner(5, opt).order(3);
  QCOMPARE(plain, (std::vector<size_t>{0, 1, 2, 3, 4}));
}

void TestTrainingData::plannerShardsOverDataParallel_data() {
  QTest::addColumn<int>("samples");
  QTest::addColumn<int>("dp");
  QTest::addColumn<int>("micro");
  QTest::addColumn<int>("accum");
  QTest::addColumn<int>("steps");
  QTest::newRow("single rank") << 10 << 1 << 2 << 2 << 3;  // 5 micro -> 2 full + 1 partial
  QTest::newRow("two ranks") << 10 << 2 << 1 << 2 << 3;    // 5 per rank
  QTest::newRow("uneven pads") << 7 << 4 << 1 << 1 << 2;   // 2 per rank after padding
  QTest::newRow("one step") << 3 << 1 << 4 << 4 << 1;
}

void TestTrainingData::plannerShardsOverDataParallel() {
  QFETCH(int, samples);
  QFETCH(int, dp);
  QFETCH(int, micro);
  QFETCH(int, accum);
  QFETCH(int, steps);
  std::multiset<size_t> seen;
  for (int r = 0; r < dp; ++r) {
    SamplerOptions opt;
    opt.dp_rank = r;
    opt.dp_size = dp;
    opt.micro_batch = micro;
    opt.accumulation = accum;
    EpochPlanner p(static_cast<size_t>(samples), opt);
    auto plan = p.plan(2);
    QCOMPARE(int64_t(plan.size()), p.steps_per_epoch());
    QCOMPARE(int(plan.size()), steps);
    for (const auto& step : plan) {
      QVERIFY(int(step.size()) <= accum);
      for (const auto& mb : step) {
        QVERIFY(!mb.empty() && int(mb.size()) <= micro);
        seen.insert(mb.begin(), mb.end());
      }
    }
  }
  // Every sample is seen; only the padding repeats some.
  QCOMPARE(std::set<size_t>(seen.begin(), seen.end()).size(), size_t(samples));
  QCOMPARE(int(seen.size()), (samples + dp - 1) / dp * dp);
}

void TestTrainingData::lossEqualsReferenceForAnyChunk_data() {
  QTest::addColumn<int>("chunk");
  QTest::newRow("1") << 1;
  QTest::newRow("3") << 3;
  QTest::newRow("all") << 1000;
}

void TestTrainingData::lossEqualsReferenceForAnyChunk() {
  QFETCH(int, chunk);
  torch::manual_seed(3);
  auto hidden = torch::randn({2, 5, 8}, torch::kDouble).requires_grad_();
  auto weight = torch::randn({11, 8}, torch::kDouble).requires_grad_();
  auto targets = torch::randint(0, 11, {2, 5}, torch::kLong);
  targets[0][0] = kIgnoreIndex;
  targets[1][4] = kIgnoreIndex;
  auto loss = lm_cross_entropy_sum(hidden, weight, targets, chunk);
  auto grads = torch::autograd::grad({loss}, {hidden, weight});

  auto logp = torch::log_softmax(torch::matmul(hidden, weight.t()), -1);
  auto valid = targets != kIgnoreIndex;
  auto ref = -(logp.gather(2, targets.clamp_min(0).unsqueeze(2)).squeeze(2) * valid).sum();
  auto ref_grads = torch::autograd::grad({ref}, {hidden, weight});
  QVERIFY(std::fabs(loss.item<double>() - ref.item<double>()) < 1e-5);
  QVERIFY(torch::allclose(grads[0].to(torch::kDouble), ref_grads[0], 1e-5, 1e-6));
  QVERIFY(torch::allclose(grads[1].to(torch::kDouble), ref_grads[1], 1e-5, 1e-6));
}

void TestTrainingData::logprobsMatchLogSoftmax() {
  torch::manual_seed(4);
  auto hidden = torch::randn({1, 6, 4});
  auto weight = torch::randn({9, 4});
  auto targets = torch::randint(0, 9, {1, 6}, torch::kLong);
  targets[0][5] = kIgnoreIndex;
  auto lp = lm_target_logprobs(hidden, weight, targets, 4);
  auto ref = torch::log_softmax(torch::matmul(hidden, weight.t()), -1);
  for (int i = 0; i < 5; ++i)
    QVERIFY(std::fabs(lp[0][i].item<float>() -
                      ref[0][i][targets[0][i].item<int64_t>()].item<float>()) < 1e-5);
  QCOMPARE(lp[0][5].item<float>(), 0.0f);
}

QTEST_MAIN(TestTrainingData)
#include "tst_training_data.moc"
