// RunSeries: series built from recorded events files (the demo's real CPU runs and a
// hand-written 2-GPU DPO run), resumed steps, NaN gaps, partial and garbage lines, and the EMA.
#include <cmath>
#include <limits>

#include <QTemporaryDir>
#include <QtTest>

#include "dashboard_test_support.h"
#include "studio/ui/dashboard/ema_smoother.h"
#include "studio/ui/dashboard/run_series.h"

using studio::ui::Metric;
using studio::ui::RunSeries;
using studio::ui::SeriesChanges;
using studio::ui::XAxisMode;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// The hand-written GPU run's start times: the first start and the resume.
constexpr double kT0 = 1717171717.0;
constexpr double kT1 = kT0 + 3000.0;

std::vector<double> doubles(std::initializer_list<double> values) { return values; }

bool sameValues(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return false;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]) != std::isnan(got[i])) return false;
    if (!std::isnan(want[i]) && std::abs(got[i] - want[i]) > 1e-12 * std::max(1.0, std::abs(want[i])))
      return false;
  }
  return true;
}

QByteArray describe(const std::vector<double>& values) {
  QStringList parts;
  for (double v : values) parts << QString::number(v, 'g', 17);
  return parts.join(QStringLiteral(", ")).toUtf8();
}

#define COMPARE_VALUES(got, want)                                                        \
  QVERIFY2(sameValues(got, want),                                                        \
           QByteArray("got [" + describe(got) + "], want [" + describe(want) + "]").constData())

// The hand-written run, checked the same way whichever way it was read.
void checkGpuRun(const RunSeries& s) {
  COMPARE_VALUES(s.steps(), doubles({1, 2, 3, 4, 5, 6, 7, 8}));
  // Step 3's loss and grad norm are null (a diverged step): gaps. Steps 5 and 6 come from
  // the resume, which replaced the first timeline's 5 and 6.
  COMPARE_VALUES(s.values(Metric::Loss),
                 doubles({0.6875, 0.625, kNaN, 0.5, 0.46875, 0.40625, 0.34375, 0.3125}));
  COMPARE_VALUES(s.values(Metric::GradNorm),
                 doubles({1.5, 1.25, kNaN, 1.0, 0.875, 0.625, 0.5, 0.375}));
  COMPARE_VALUES(s.wallTime(), doubles({kT0 + 3, kT0 + 6, kT0 + 9, kT0 + 12, kT1 + 3, kT1 + 6,
                                        kT1 + 9, kT1 + 12}));
  // Relative time counts from the first start, across the resume.
  COMPARE_VALUES(s.relativeTime(),
                 doubles({3, 6, 9, 12, 3003, 3006, 3009, 3012}));
  QVERIFY(s.isDpo());
  COMPARE_VALUES(s.values(Metric::RewardsChosen),
                 doubles({0.125, 0.25, 0.375, 0.5, 0.5625, 0.6875, 0.8125, 0.875}));
  COMPARE_VALUES(s.values(Metric::RewardsRejected),
                 doubles({-0.125, -0.25, -0.375, -0.5, -0.5625, -0.6875, -0.8125, -0.875}));
  COMPARE_VALUES(s.values(Metric::RewardsMargins),
                 doubles({0.25, 0.5, 0.75, 1.0, 1.125, 1.375, 1.625, 1.75}));
  COMPARE_VALUES(s.values(Metric::RewardsAccuracies),
                 doubles({0.5, 0.625, 0.75, 0.875, 0.75, 0.875, 1.0, 1.0}));
  QVERIFY(!s.has(Metric::RssMib));

  QCOMPARE(s.gpus().size(), std::size_t(2));
  QCOMPARE(s.gpus()[0].rank, 0);
  QCOMPARE(s.gpus()[1].rank, 1);
  COMPARE_VALUES(s.gpus()[0].allocated, doubles({52210.5, 52212.5, 52214.5, 52216.5, 52230.5,
                                                 52232.5, 52234.5, 52236.5}));
  COMPARE_VALUES(s.gpus()[1].allocated, doubles({52208, 52210, 52212, 52214, 52228, 52230,
                                                 52232, 52234}));
  COMPARE_VALUES(s.gpus()[1].reserved, std::vector<double>(8, 61440.0));
  COMPARE_VALUES(s.gpus()[0].total, std::vector<double>(8, 81559.0));

  // The eval after step 4 survived the resume (it precedes step 5); each is placed at the time
  // of its step.
  COMPARE_VALUES(s.evalX(XAxisMode::Step), doubles({4, 8}));
  COMPARE_VALUES(s.evalLoss(), doubles({0.5625, 0.375}));
  COMPARE_VALUES(s.evalX(XAxisMode::WallTime), doubles({kT0 + 12, kT1 + 12}));
  COMPARE_VALUES(s.evalX(XAxisMode::RelativeTime), doubles({12, 3012}));

  const studio::ui::RunFacts& f = s.facts();
  QCOMPARE(f.starts, 2);
  QCOMPARE(f.firstStartTime, kT0);
  QCOMPARE(f.stage, std::string("dpo"));
  QCOMPARE(f.worldSize, 2);
  QCOMPARE(f.sequenceParallelSize, 2);
  QCOMPARE(f.sequenceParallelMode, std::string("ulysses"));
  QCOMPARE(f.model.architecture, std::string("Qwen2ForCausalLM"));
  QCOMPARE(f.model.parameters, std::int64_t(494032768));
  QVERIFY(f.ended);
  QCOMPARE(f.endState, std::string("finished"));
  QCOMPARE(f.endReason, std::string("completed 8 steps"));
}

}  // namespace

class TestRunSeries : public QObject {
  Q_OBJECT

 private slots:
  void sftCpuRun();
  void dpoCpuRun();
  void gpuRunWithResumeGapsAndGarbage_data();
  void gpuRunWithResumeGapsAndGarbage();
  void partialLastLineIsCompletedLater();
  void resumedStepsReplacePoints_data();
  void resumedStepsReplacePoints();
  void nanLeavesGaps();
  void nonFiniteStepsAreCounted_data();
  void nonFiniteStepsAreCounted();
  void changesSinceLastTake();
  void timeOriginWithoutStartEvent();
  void rowsAreCapped_data();
  void rowsAreCapped();
  void cappedResume();
  void amendingStepsFillIn_data();
  void amendingStepsFillIn();
  void ema_data();
  void ema();
};

void TestRunSeries::sftCpuRun() {
  RunSeries s;
  s.ingest(dash_test::loadEvents(QStringLiteral("sft-cpu")));
  QCOMPARE(s.size(), std::size_t(12));
  QCOMPARE(s.steps().front(), 5.0);
  QCOMPARE(s.steps().back(), 60.0);
  QCOMPARE(s.values(Metric::Loss).front(), 7.845936761539153);
  QCOMPARE(s.values(Metric::Loss).back(), 2.046691160059974);
  QCOMPARE(s.values(Metric::TokensPerSec).front(), 5643.105708644398);
  QCOMPARE(s.values(Metric::LearningRate).size(), std::size_t(12));
  QCOMPARE(s.values(Metric::GradNorm).size(), std::size_t(12));
  // A CPU run: no gpus, the process's RSS instead; no rewards.
  QVERIFY(s.gpus().empty());
  QCOMPARE(s.values(Metric::RssMib).front(), 291.5390625);
  QVERIFY(!s.has(Metric::RewardsChosen));
  QVERIFY(!s.isDpo());
  QCOMPARE(s.wallTime().front(), 1795293735.993992);
  QCOMPARE(s.relativeTime().front(), 1795293735.993992 - 1795293734.9120781);
  COMPARE_VALUES(s.evalX(XAxisMode::Step), doubles({30, 60}));
  COMPARE_VALUES(s.evalLoss(), doubles({2.5288355928308826, 2.1803517061121322}));
  QCOMPARE(s.evalX(XAxisMode::WallTime)[0], 1795293740.8816361);  // step 30's time

  const studio::ui::RunFacts& f = s.facts();
  QCOMPARE(f.starts, 1);
  QCOMPARE(f.stage, std::string("sft"));
  QCOMPARE(f.worldSize, 1);
  QCOMPARE(f.sequenceParallelSize, 1);
  QCOMPARE(f.sequenceParallelMode, std::string("zigzag-ring"));
  QCOMPARE(f.model.parameters, std::int64_t(1288320));
  QVERIFY(f.ended);
  QCOMPARE(f.endState, std::string("finished"));
  QCOMPARE(f.endReason, std::string("trained 60 steps"));
}

void TestRunSeries::dpoCpuRun() {
  RunSeries s;
  s.ingest(dash_test::loadEvents(QStringLiteral("dpo-cpu")));
  QCOMPARE(s.size(), std::size_t(6));
  QVERIFY(s.isDpo());
  QCOMPARE(s.facts().stage, std::string("dpo"));
  QCOMPARE(s.facts().sequenceParallelSize, 2);
  QCOMPARE(s.values(Metric::RewardsChosen).front(), -0.0774294376373291);
  QCOMPARE(s.values(Metric::RewardsRejected).front(), -0.10128875970840454);
  QCOMPARE(s.values(Metric::RewardsMargins).front(), 0.02385932207107544);
  QCOMPARE(s.values(Metric::RewardsAccuracies).front(), 0.3);
  QCOMPARE(s.evalCount(), std::size_t(2));
  QVERIFY(s.gpus().empty());
  QVERIFY(s.has(Metric::RssMib));
}

void TestRunSeries::gpuRunWithResumeGapsAndGarbage_data() {
  QTest::addColumn<int>("maxLineBytes");
  QTest::addColumn<int>("badLines");
  // Two garbage lines (text that is not JSON, a step without "step") and a step whose loss is
  // a word (kept without it, then replaced by the real step 3); with a 4 KiB cap the 5 KB log
  // line is dropped as over-long too. Both read the same series.
  QTest::newRow("default line cap") << int(studio::EventStreamParser::kDefaultMaxLineBytes) << 2;
  QTest::newRow("4 KiB line cap") << 4096 << 3;
}

void TestRunSeries::gpuRunWithResumeGapsAndGarbage() {
  QFETCH(int, maxLineBytes);
  QFETCH(int, badLines);
  studio::EventStreamParser parser(static_cast<std::size_t>(maxLineBytes));
  const std::vector<studio::Event> events =
      dash_test::parseInChunks(dash_test::readBytes(dash_test::dataPath("dpo-gpu2")), parser);
  QCOMPARE(parser.bad_lines(), std::uint64_t(badLines));
  QCOMPARE(parser.problems().lines_with_issues, std::uint64_t{1});
  QCOMPARE(parser.problems().first_issue_line, std::uint64_t{4});
  RunSeries s;
  s.ingest(events);
  checkGpuRun(s);
}

void TestRunSeries::partialLastLineIsCompletedLater() {
  // A real file, written up to the middle of step 4's line, then completed.
  const QByteArray bytes = dash_test::readBytes(dash_test::dataPath("dpo-gpu2"));
  const int step4 = bytes.indexOf("{\"event\":\"step\",\"elapsed\":12.0");
  QVERIFY(step4 > 0);
  const int cut = step4 + 40;
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString path = dir.filePath(QStringLiteral("events.jsonl"));
  QFile file(path);
  QVERIFY(file.open(QIODevice::WriteOnly));
  QCOMPARE(file.write(bytes.left(cut)), qint64(cut));
  QVERIFY(file.flush());

  studio::EventFileReader reader(path.toStdString());
  RunSeries s;
  studio::EventPollResult first = reader.poll();
  QVERIFY(first.error.empty());
  s.ingest(first.events);
  COMPARE_VALUES(s.steps(), doubles({1, 2, 3}));
  // The cursor waits at the start of the partial line; nothing of it was returned.
  QCOMPARE(reader.cursor().offset, std::uint64_t(step4));

  QCOMPARE(file.write(bytes.mid(cut)), qint64(bytes.size() - cut));
  QVERIFY(file.flush());
  studio::EventPollResult rest = reader.poll();
  QVERIFY(!rest.restarted);
  s.ingest(rest.events);
  QCOMPARE(reader.cursor().offset, std::uint64_t(bytes.size()));
  checkGpuRun(s);
}

void TestRunSeries::resumedStepsReplacePoints_data() {
  // Events as "s<step>" (a step whose loss is its index in the list) or "e<step>" (an eval).
  QTest::addColumn<QStringList>("eventsIn");
  QTest::addColumn<QList<int>>("stepsKept");
  QTest::addColumn<QList<int>>("lossSources");  // index in eventsIn of each step kept
  QTest::addColumn<QList<int>>("evalsKept");

  QTest::newRow("plain appends") << QStringList{"s1", "s2", "e2", "s3"} << QList<int>{1, 2, 3}
                                 << QList<int>{0, 1, 3} << QList<int>{2};
  QTest::newRow("resume from 2 replaces 2 and drops 3, 4")
      << QStringList{"s1", "s2", "s3", "s4", "s2", "s3"} << QList<int>{1, 2, 3}
      << QList<int>{0, 4, 5} << QList<int>{};
  QTest::newRow("restart at 1 keeps only the new timeline")
      << QStringList{"s5", "s10", "s15", "s1"} << QList<int>{1} << QList<int>{3} << QList<int>{};
  QTest::newRow("the last step again")
      << QStringList{"s1", "s2", "s2"} << QList<int>{1, 2} << QList<int>{0, 2} << QList<int>{};
  QTest::newRow("a resume drops the old timeline's evals after it")
      << QStringList{"s10", "e10", "s20", "e20", "s30", "e30", "s15"} << QList<int>{10, 15}
      << QList<int>{0, 6} << QList<int>{10};
  QTest::newRow("a repeated eval replaces the earlier one")
      << QStringList{"s10", "e10", "s20", "e20", "e20"} << QList<int>{10, 20}
      << QList<int>{0, 2} << QList<int>{10, 20};
}

void TestRunSeries::resumedStepsReplacePoints() {
  QFETCH(QStringList, eventsIn);
  QFETCH(QList<int>, stepsKept);
  QFETCH(QList<int>, lossSources);
  QFETCH(QList<int>, evalsKept);
  std::vector<studio::Event> events;
  for (int i = 0; i < eventsIn.size(); ++i) {
    const int step = eventsIn[i].mid(1).toInt();
    const double loss = 100.0 + i;
    if (eventsIn[i].startsWith(QLatin1Char('s')))
      events.push_back(dash_test::stepEvent(step, loss));
    else
      events.push_back(dash_test::parsed({{"event", "eval"}, {"step", step}, {"loss", loss}}));
  }
  RunSeries s;
  s.ingest(events);

  std::vector<double> wantSteps, wantLoss, wantEvals;
  for (int step : stepsKept) wantSteps.push_back(step);
  for (int source : lossSources) wantLoss.push_back(100.0 + source);
  for (int step : evalsKept) wantEvals.push_back(step);
  COMPARE_VALUES(s.steps(), wantSteps);
  COMPARE_VALUES(s.values(Metric::Loss), wantLoss);
  COMPARE_VALUES(s.evalX(XAxisMode::Step), wantEvals);
}

void TestRunSeries::nanLeavesGaps() {
  RunSeries s;
  std::vector<studio::Event> events = {
      dash_test::parsed({{"event", "step"}, {"step", 1}, {"loss", 2.0}}),
      dash_test::parsed({{"event", "step"}, {"step", 2}, {"loss", nullptr}, {"grad_norm", 0.5}}),
      dash_test::parsed({{"event", "step"}, {"step", 3}, {"loss", 1.0}}),
  };
  s.ingest(events);
  COMPARE_VALUES(s.values(Metric::Loss), doubles({2.0, kNaN, 1.0}));
  // A metric first seen at step 2 is NaN before it and where a step does not write it.
  COMPARE_VALUES(s.values(Metric::GradNorm), doubles({kNaN, 0.5, kNaN}));
  // Never seen: no column at all, so no empty graph and no legend entry.
  QVERIFY(!s.has(Metric::LearningRate));
  QVERIFY(s.values(Metric::LearningRate).empty());
  // Without a time the row has no place on a time axis.
  QVERIFY(std::isnan(s.wallTime()[0]));
  QVERIFY(std::isnan(s.relativeTime()[0]));
}

// Steps written NaN, Infinity or -Infinity (a diverged run: `"loss": NaN` as Python writes it)
// are not gaps: each row counts them, merged rows add them up, a metric whose first value is
// such still gets its column, and the trainer_state.json amendment marks a row too.
void TestRunSeries::nonFiniteStepsAreCounted_data() {
  QTest::addColumn<int>("maxRows");
  QTest::addColumn<QList<double>>("loss");          // per row
  QTest::addColumn<QList<int>>("lossNotFinite");    // per row
  QTest::addColumn<QList<int>>("normNotFinite");    // per row
  const double inf = std::numeric_limits<double>::infinity();
  QTest::newRow("a row per step") << 64 << QList<double>{2.0, kNaN, 1.5, inf, kNaN, 1.0, 0.9, 0.8}
                                  << QList<int>{0, 1, 0, 1, 0, 0, 0, 0}
                                  << QList<int>{1, 1, 0, 0, 0, 0, 0, 1};
  // 8 steps in 4 rows of 2: each row the mean of its finite losses, and the sum of its marks.
  QTest::newRow("merged rows") << 4 << QList<double>{2.0, 1.5, 1.0, 0.85}
                               << QList<int>{1, 1, 0, 0} << QList<int>{2, 0, 0, 1};
}

void TestRunSeries::nonFiniteStepsAreCounted() {
  QFETCH(int, maxRows);
  QFETCH(QList<double>, loss);
  QFETCH(QList<int>, lossNotFinite);
  QFETCH(QList<int>, normNotFinite);
  // grad_norm: NaN at steps 1 and 2 (its first values), then finite, -Infinity at step 8.
  const std::vector<studio::Event> events = dash_test::parsedLines({
      R"({"event":"step","step":1,"loss":2.0,"grad_norm":NaN})",
      R"({"event":"step","step":2,"loss":NaN,"grad_norm":NaN})",
      R"({"event":"step","step":3,"loss":1.5,"grad_norm":1.0})",
      R"({"event":"step","step":4,"loss":Infinity,"grad_norm":1.0})",
      R"({"event":"step","step":5,"loss":null,"grad_norm":1.0})",
      R"({"event":"step","step":6,"loss":1.0,"grad_norm":1.0})",
      R"({"event":"step","step":7,"loss":0.9})",
      R"({"event":"step","step":8,"loss":0.8,"grad_norm":-Infinity})",
  });
  RunSeries s(static_cast<std::size_t>(maxRows));
  s.ingest(events);
  QCOMPARE(int(s.size()), loss.size());
  QCOMPARE(s.values(Metric::Loss).size(), std::size_t(loss.size()));
  for (int row = 0; row < loss.size(); ++row) {
    const double v = s.values(Metric::Loss)[std::size_t(row)];
    QVERIFY2(std::isnan(loss[row]) ? std::isnan(v) : v == loss[row] || std::abs(v - loss[row]) < 1e-12,
             qPrintable(QStringLiteral("row %1: %2").arg(row).arg(v)));
    QCOMPARE(int(s.notFiniteAt(Metric::Loss, std::size_t(row))), lossNotFinite[row]);
    QCOMPARE(int(s.notFiniteAt(Metric::GradNorm, std::size_t(row))), normNotFinite[row]);
  }
  QVERIFY(s.has(Metric::GradNorm));  // although its first value was NaN
  QVERIFY(s.hasNotFinite(Metric::Loss) && s.hasNotFinite(Metric::GradNorm));
  QVERIFY(!s.hasNotFinite(Metric::LearningRate));

  // The gradient norm of trainer_state.json fills in what a log lacked: a NaN one marks the row.
  RunSeries lf;
  lf.ingest({dash_test::stepEvent(1, 2.0), dash_test::stepEvent(2, 1.9)});
  studio::Event amend;
  amend.kind = studio::EventKind::Step;
  studio::StepEvent only;
  only.step = 2;
  only.grad_norm = kNaN;
  only.set_not_finite(studio::StepValue::GradNorm);
  amend.payload = only;
  amend.amends = true;
  lf.ingest({amend});
  QVERIFY(lf.has(Metric::GradNorm));
  QCOMPARE(int(lf.notFiniteAt(Metric::GradNorm, 0)), 0);
  QCOMPARE(int(lf.notFiniteAt(Metric::GradNorm, 1)), 1);
  // A resume that replaces the rows drops their marks.
  lf.ingest({dash_test::stepEvent(2, 1.8)});
  QVERIFY(!lf.hasNotFinite(Metric::GradNorm));
}

void TestRunSeries::changesSinceLastTake() {
  RunSeries s;
  SeriesChanges c = s.takeChanges();
  QCOMPARE(c.rowsFrom, std::size_t(0));
  s.ingest({dash_test::stepEvent(1, 1.0), dash_test::stepEvent(2, 1.0),
            dash_test::stepEvent(3, 1.0)});
  c = s.takeChanges();
  QCOMPARE(c.rowsFrom, std::size_t(0));
  s.ingest({dash_test::stepEvent(4, 1.0)});
  c = s.takeChanges();
  QCOMPARE(c.rowsFrom, std::size_t(3));  // appended only: a consumer appends row 3
  QVERIFY(!c.facts);
  c = s.takeChanges();
  QCOMPARE(c.rowsFrom, s.size());  // nothing new
  s.ingest({dash_test::stepEvent(2, 1.0), dash_test::stepEvent(3, 1.0)});
  c = s.takeChanges();
  QCOMPARE(c.rowsFrom, std::size_t(1));  // rows from step 2 on were replaced
  s.ingest({dash_test::parsed({{"event", "end"}, {"state", "failed"}, {"reason", "OOM"}})});
  c = s.takeChanges();
  QVERIFY(c.facts);
  QVERIFY(c.ended);
  QCOMPARE(s.facts().endState, std::string("failed"));
  s.clear();
  c = s.takeChanges();
  QCOMPARE(c.rowsFrom, std::size_t(0));
  QVERIFY(c.facts);
  QVERIFY(s.empty());
  QVERIFY(!s.facts().ended);
}

void TestRunSeries::timeOriginWithoutStartEvent() {
  // A stream read from a saved cursor has no start event: the run started `elapsed` before.
  RunSeries s;
  s.ingest({dash_test::parsed(
                {{"event", "step"}, {"step", 7}, {"time", 1000.5}, {"elapsed", 70.5}}),
            dash_test::parsed(
                {{"event", "step"}, {"step", 8}, {"time", 1010.5}, {"elapsed", 80.5}})});
  COMPARE_VALUES(s.relativeTime(), doubles({70.5, 80.5}));
}

void TestRunSeries::ema_data() {
  QTest::addColumn<double>("weight");
  QTest::addColumn<std::vector<double>>("input");
  QTest::addColumn<std::vector<double>>("expected");
  // Hand-computed: last = w*last + (1-w)*x; shown = last / (1 - w^n).
  QTest::newRow("w=0 is the raw curve") << 0.0 << doubles({1, 2, 3}) << doubles({1, 2, 3});
  QTest::newRow("w=0 with NaN") << 0.0 << doubles({1, kNaN, 3}) << doubles({1, kNaN, 3});
  // n=1: 0.4/0.4 = 1; n=2: (0.24+0.8)/0.64 = 1.625; n=3: (0.624+1.2)/0.784 = 2.3265306122...
  QTest::newRow("w=0.6") << 0.6 << doubles({1, 2, 3})
                         << doubles({1.0, 1.625, 1.824 / 0.784});
  // A NaN is a gap and does not count: the next points are those of [1, 2, 3].
  QTest::newRow("w=0.6 with NaN") << 0.6 << doubles({1, kNaN, 2, 3})
                                  << doubles({1.0, kNaN, 1.625, 1.824 / 0.784});
  QTest::newRow("w=0.6 leading NaN and infinity")
      << 0.6 << doubles({kNaN, std::numeric_limits<double>::infinity(), 5})
      << doubles({kNaN, kNaN, 5});
  // n=1: 0.02/0.01 = 2; n=2: (0.0198 + 0.04)/0.0199 = 3.0050251256...
  QTest::newRow("w=0.99") << 0.99 << doubles({2, 4}) << doubles({2.0, 0.0598 / 0.0199});
  QTest::newRow("w=0.99 with NaN") << 0.99 << doubles({2, kNaN, kNaN, 4})
                                   << doubles({2.0, kNaN, kNaN, 0.0598 / 0.0199});
  QTest::newRow("empty") << 0.6 << doubles({}) << doubles({});
}

void TestRunSeries::ema() {
  QFETCH(double, weight);
  QFETCH(std::vector<double>, input);
  QFETCH(std::vector<double>, expected);
  COMPARE_VALUES(RunSeries::ema(input, weight), expected);
  // The incremental smoother gives the same values one at a time.
  studio::ui::EmaSmoother smoother(weight);
  std::vector<double> oneByOne;
  for (double x : input) oneByOne.push_back(smoother.next(x));
  COMPARE_VALUES(oneByOne, expected);
}

QTEST_MAIN(TestRunSeries)
#include "tst_run_series.moc"

// A step with loss, grad norm and memory of two ranks (rank 1 only on even steps).
static studio::Event cappedStep(std::int64_t step) {
  nlohmann::json gpus = nlohmann::json::array();
  gpus.push_back({{"rank", 0}, {"device", 0}, {"allocated_mib", double(step % 7)},
                  {"reserved_mib", 100.0 + double(step % 5)}, {"total_mib", 1000.0},
                  {"util_percent", double(step % 11)}, {"power_w", 300.0 + double(step % 13)},
                  {"power_limit_w", 700.0}});
  if (step % 2 == 0)
    gpus.push_back({{"rank", 1}, {"device", 1}, {"allocated_mib", double(step)},
                    {"reserved_mib", 200.0}, {"total_mib", 1000.0}});
  nlohmann::json j = {{"event", "step"},      {"step", step},
                      {"loss", double(step)}, {"time", 1000.0 + double(step)},
                      {"gpus", gpus}, {"mfu", 0.001 * double(step)}};
  if (step % 3 != 0) j["grad_norm"] = 2.0 * double(step);  // every third step without one
  return dash_test::parsed(j);
}

void TestRunSeries::rowsAreCapped_data() {
  QTest::addColumn<int>("steps");
  QTest::addColumn<int>("batch");  // events per ingest: one by one, or many at once
  QTest::newRow("under the cap") << 8 << 1;
  QTest::newRow("one merge") << 9 << 1;
  QTest::newRow("many merges, one by one") << 1000 << 1;
  QTest::newRow("many merges, in batches") << 1000 << 97;
  QTest::newRow("odd count") << 777 << 13;
}

// However many steps, at most maxRows rows; each full row holds stepsPerRow() consecutive steps,
// sits at its last step and time, and holds the mean of their losses (and of the grad norms that
// were there) and the highest memory of each rank. The changes tell a consumer what to redraw.
void TestRunSeries::rowsAreCapped() {
  QFETCH(int, steps);
  QFETCH(int, batch);
  RunSeries s(8);
  std::size_t drawn = 0;  // a consumer following takeChanges
  for (int first = 1; first <= steps; first += batch) {
    std::vector<studio::Event> events;
    for (int step = first; step < first + batch && step <= steps; ++step)
      events.push_back(cappedStep(step));
    s.ingest(events);
    const SeriesChanges c = s.takeChanges();
    QVERIFY(c.rowsFrom <= drawn);  // never claims rows it did not touch are new
    drawn = s.size();
    QVERIFY(s.size() <= 8);
  }
  const std::size_t stride = s.stepsPerRow();
  QCOMPARE(stride, steps <= 8 ? std::size_t(1) : std::size_t(1) << int(std::ceil(std::log2(double(steps) / 8.0))));
  QCOMPARE(s.size(), (std::size_t(steps) + stride - 1) / stride);
  for (std::size_t row = 0; row < s.size(); ++row) {
    const int from = int(row * stride) + 1, to = std::min(steps, int((row + 1) * stride));
    QCOMPARE(s.steps()[row], double(to));
    QCOMPARE(s.wallTime()[row], 1000.0 + to);
    double loss = 0, norm = 0, rank0 = -1, rank1 = -1, reserved0 = -1, util0 = -1, power0 = -1;
    int norms = 0;
    for (int step = from; step <= to; ++step) {
      loss += step;
      util0 = std::max(util0, double(step % 11));
      power0 = std::max(power0, 300.0 + double(step % 13));
      if (step % 3 != 0) norm += 2.0 * step, ++norms;
      rank0 = std::max(rank0, double(step % 7));
      reserved0 = std::max(reserved0, 100.0 + double(step % 5));
      if (step % 2 == 0) rank1 = std::max(rank1, double(step));
    }
    QCOMPARE(s.values(Metric::Loss)[row], loss / (to - from + 1));
    QVERIFY(std::abs(s.values(Metric::Mfu)[row] - 0.001 * loss / (to - from + 1)) < 1e-12);
    // NVML's figures keep the highest of the merged steps, as memory does.
    QCOMPARE(s.gpus()[0].util[row], util0);
    QCOMPARE(s.gpus()[0].power[row], power0);
    QCOMPARE(s.gpus()[0].powerLimit[row], 700.0);
    if (norms > 0)
      QCOMPARE(s.values(Metric::GradNorm)[row], norm / norms);
    else
      QVERIFY(std::isnan(s.values(Metric::GradNorm)[row]));
    QCOMPARE(s.gpus()[0].allocated[row], rank0);
    QCOMPARE(s.gpus()[0].reserved[row], reserved0);
    QCOMPARE(s.gpus()[0].total[row], 1000.0);
    if (rank1 < 0)
      QVERIFY(std::isnan(s.gpus()[1].allocated[row]));
    else
      QCOMPARE(s.gpus()[1].allocated[row], rank1);
  }
}

// A resume inside the merged rows drops the row holding the resumed step and those after it;
// the replayed steps then fill rows as before.
void TestRunSeries::cappedResume() {
  RunSeries s(8);
  for (int step = 1; step <= 40; ++step) s.ingest({cappedStep(step)});
  QCOMPARE(s.stepsPerRow(), std::size_t(8));
  QCOMPARE(s.size(), std::size_t(5));  // rows ending at 8, 16, 24, 32, 40
  s.takeChanges();
  s.ingest({cappedStep(21)});  // resumed from checkpoint-20: rows 17-24 and after are replaced
  const SeriesChanges c = s.takeChanges();
  QCOMPARE(c.rowsFrom, std::size_t(2));
  QCOMPARE(s.size(), std::size_t(3));
  QCOMPARE(s.steps().back(), 21.0);
  QCOMPARE(s.values(Metric::Loss).back(), 21.0);
  for (int step = 22; step <= 40; ++step) s.ingest({cappedStep(step)});
  QCOMPARE(s.size(), std::size_t(5));
  QCOMPARE(s.steps()[2], 28.0);  // 21..28: the replayed steps fill the row after 16
  QCOMPARE(s.values(Metric::Loss)[2], (21.0 + 28.0) / 2);
}

namespace {

studio::Event logStep(int step, double loss) {
  studio::StepEvent e;
  e.step = step;
  e.loss = loss;
  e.lr = 1e-3;
  studio::Event ev;
  ev.kind = studio::EventKind::Step;
  ev.payload = e;
  return ev;
}

studio::Event amending(int step, double gradNorm, double loss = kNaN) {
  studio::StepEvent e;
  e.step = step;
  e.grad_norm = gradNorm;
  e.loss = loss;
  studio::Event ev;
  ev.kind = studio::EventKind::Step;
  ev.payload = e;
  ev.amends = true;
  return ev;
}

}  // namespace

void TestRunSeries::amendingStepsFillIn_data() {
  QTest::addColumn<int>("maxRows");
  QTest::newRow("a row per step") << 64;
  QTest::newRow("merged rows") << 4;
}

// Steps amending ones read before (the grad norm from trainer_state.json for LLaMA-Factory's
// log lines) fill in what those rows lack, replace nothing they have, and leave steps not read
// alone; merged rows take the mean of what was added.
void TestRunSeries::amendingStepsFillIn() {
  QFETCH(int, maxRows);
  RunSeries s(static_cast<std::size_t>(maxRows));
  std::vector<studio::Event> log;
  for (int step = 1; step <= 8; ++step) log.push_back(logStep(step, 3.0 - 0.1 * step));
  s.ingest(log);
  s.takeChanges();
  QVERIFY(s.values(Metric::GradNorm).empty());
  // Steps 2..10 amended: 9 and 10 are not read yet; step 5's loss is not replaced.
  std::vector<studio::Event> amends;
  for (int step = 2; step <= 10; ++step)
    amends.push_back(amending(step, 10.0 + step, step == 5 ? 99.0 : kNaN));
  s.ingest(amends);
  const SeriesChanges c = s.takeChanges();
  QCOMPARE(s.size(), std::size_t(maxRows >= 8 ? 8 : 4));
  const std::size_t stride = s.stepsPerRow();
  QCOMPARE(c.rowsFrom, maxRows >= 8 ? std::size_t(1) : std::size_t(0));
  for (std::size_t row = 0; row < s.size(); ++row) {
    const int to = int((row + 1) * stride), from = to - int(stride) + 1;
    double norms = 0, loss = 0;
    int n = 0;
    for (int step = from; step <= to; ++step) {
      loss += 3.0 - 0.1 * step;
      if (step >= 2) norms += 10.0 + step, ++n;
    }
    QVERIFY(std::abs(s.values(Metric::Loss)[row] - loss / double(stride)) < 1e-12);
    if (n == 0)
      QVERIFY(std::isnan(s.values(Metric::GradNorm)[row]));
    else
      QVERIFY2(std::abs(s.values(Metric::GradNorm)[row] - norms / n) < 1e-12,
               qPrintable(QString("row %1: %2").arg(row).arg(s.values(Metric::GradNorm)[row])));
  }
  QCOMPARE(s.steps().back(), 8.0);  // amending never adds a step
  // A step logged after its amendment starts out without it, as any new row.
  s.ingest({logStep(9, 2.0)});
  if (stride == 1) QVERIFY(std::isnan(s.values(Metric::GradNorm).back()));
}
