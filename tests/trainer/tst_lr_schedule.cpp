// Learning-rate schedules against values worked out by hand from transformers' formulas.
#include <QtTest>

#include "studio/trainer/optim/lr_schedule.h"

using studio::LrScheduler;
using studio::trainer::LrSchedule;

class TestLrSchedule : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void factor_data();
  void factor();
  void warmupFromRatioOrSteps_data();
  void warmupFromRatioOrSteps();
  void minLrAbsoluteBecomesRate();
  void minLrScheduleNeedsAFloor();
};

void TestLrSchedule::factor_data() {
  QTest::addColumn<int>("kind");
  QTest::addColumn<int>("total");
  QTest::addColumn<int>("warmup");
  QTest::addColumn<double>("minRate");
  QTest::addColumn<int>("step");
  QTest::addColumn<double>("expected");
  const int lin = int(LrScheduler::Linear), cos = int(LrScheduler::Cosine);
  const int con = int(LrScheduler::Constant), cww = int(LrScheduler::ConstantWithWarmup);
  const int cmin = int(LrScheduler::CosineWithMinLr);
  // linear: step/W in warm-up, then (T - step) / (T - W)
  QTest::newRow("linear first step is 0 in warm-up") << lin << 10 << 2 << 0.0 << 0 << 0.0;
  QTest::newRow("linear warm-up half") << lin << 10 << 2 << 0.0 << 1 << 0.5;
  QTest::newRow("linear peak") << lin << 10 << 2 << 0.0 << 2 << 1.0;
  QTest::newRow("linear half way down") << lin << 10 << 2 << 0.0 << 6 << 0.5;
  QTest::newRow("linear end") << lin << 10 << 2 << 0.0 << 10 << 0.0;
  QTest::newRow("linear past end clamps") << lin << 10 << 2 << 0.0 << 12 << 0.0;
  QTest::newRow("linear no warm-up starts at 1") << lin << 4 << 0 << 0.0 << 0 << 1.0;
  QTest::newRow("linear no warm-up quarter") << lin << 4 << 0 << 0.0 << 1 << 0.75;
  // cosine: 0.5 * (1 + cos(pi * 2 * 0.5 * progress))
  QTest::newRow("cosine start") << cos << 10 << 0 << 0.0 << 0 << 1.0;
  QTest::newRow("cosine middle") << cos << 10 << 0 << 0.0 << 5 << 0.5;
  QTest::newRow("cosine end") << cos << 10 << 0 << 0.0 << 10 << 0.0;
  QTest::newRow("cosine after warm-up quarter") << cos << 12 << 2 << 0.0 << 4
                                                << 0.5 * (1 + std::cos(M_PI * 0.2));
  // cosine_with_min_lr: cosine * (1 - rate) + rate
  QTest::newRow("min lr middle") << cmin << 10 << 0 << 0.1 << 5 << 0.55;
  QTest::newRow("min lr end is the floor") << cmin << 10 << 0 << 0.1 << 10 << 0.1;
  QTest::newRow("min lr warm-up ignores floor") << cmin << 10 << 4 << 0.1 << 1 << 0.25;
  QTest::newRow("constant") << con << 10 << 5 << 0.0 << 0 << 1.0;
  QTest::newRow("constant with warm-up half") << cww << 10 << 4 << 0.0 << 2 << 0.5;
  QTest::newRow("constant with warm-up after") << cww << 10 << 4 << 0.0 << 9 << 1.0;
}

void TestLrSchedule::factor() {
  QFETCH(int, kind);
  QFETCH(int, total);
  QFETCH(int, warmup);
  QFETCH(double, minRate);
  QFETCH(int, step);
  QFETCH(double, expected);
  LrSchedule s;
  s.kind = static_cast<LrScheduler>(kind);
  s.total_steps = total;
  s.warmup_steps = warmup;
  s.min_lr_rate = minRate;
  QVERIFY2(std::fabs(s.factor(step) - expected) < 1e-12,
           qPrintable(QString("got %1, expected %2").arg(s.factor(step)).arg(expected)));
}

void TestLrSchedule::warmupFromRatioOrSteps_data() {
  QTest::addColumn<double>("ratio");
  QTest::addColumn<int>("steps");
  QTest::addColumn<int>("total");
  QTest::addColumn<int>("expected");
  QTest::newRow("ratio 0.1 of 100") << 0.1 << 0 << 100 << 10;
  QTest::newRow("ratio rounds up") << 0.05 << 0 << 30 << 2;
  QTest::newRow("steps override ratio") << 0.5 << 7 << 100 << 7;
  QTest::newRow("none") << 0.0 << 0 << 100 << 0;
}

void TestLrSchedule::warmupFromRatioOrSteps() {
  QFETCH(double, ratio);
  QFETCH(int, steps);
  QFETCH(int, total);
  QFETCH(int, expected);
  studio::RunConfig cfg;
  cfg.warmup_ratio = ratio;
  cfg.warmup_steps = steps;
  QCOMPARE(studio::trainer::warmup_steps_for(cfg, total), int64_t(expected));
}

void TestLrSchedule::minLrAbsoluteBecomesRate() {
  studio::RunConfig cfg;
  cfg.lr_scheduler_type = LrScheduler::CosineWithMinLr;
  cfg.learning_rate = 1e-4;
  cfg.lr_scheduler_kwargs["min_lr"] = 1e-5;
  std::string error;
  LrSchedule s = studio::trainer::make_lr_schedule(cfg, 10, error);
  QVERIFY(error.empty());
  QVERIFY(std::fabs(s.min_lr_rate - 0.1) < 1e-12);
  QVERIFY(std::fabs(s.factor(10) - 0.1) < 1e-12);
}

void TestLrSchedule::minLrScheduleNeedsAFloor() {
  studio::RunConfig cfg;
  cfg.lr_scheduler_type = LrScheduler::CosineWithMinLr;
  std::string error;
  studio::trainer::make_lr_schedule(cfg, 10, error);
  QVERIFY(QString::fromStdString(error).contains("min_lr_rate"));
}

QTEST_MAIN(TestLrSchedule)
#include "tst_lr_schedule.moc"
