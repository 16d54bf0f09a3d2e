// RunDashboard on the offscreen platform: graphs per chart, DPO charts, overlays, coalesced
// replots, CSV and PNG export, axis modes, and a live run folder followed through its tailer
// (the layout: tst_dashboard_layout).
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QImage>
#include <QLabel>
#include <QSignalSpy>
#include <QSlider>
#include <QTemporaryDir>
#include <QWheelEvent>
#include <QtTest>
#include <qcustomplot.h>

#include "dashboard_test_support.h"
#include "studio/ui/dashboard/chart_kind.h"
#include "studio/ui/dashboard/event_tailer.h"
#include "studio/ui/dashboard/run_dashboard.h"

using studio::ui::ChartKind;
using studio::ui::Metric;
using studio::ui::RunDashboard;
using studio::ui::RunSeries;
using studio::ui::XAxisMode;

Q_DECLARE_METATYPE(studio::ui::XAxisMode)

namespace {

constexpr int kLiveTimeoutMs = 15000;  // a loaded 2-core machine: tailer ticks can be late

int points(const QCPGraph* graph) { return graph->data()->size(); }

// Point counts of a run's graphs on one chart, in drawing order.
QList<int> pointCounts(const RunDashboard& dash, ChartKind kind, const QString& run) {
  QList<int> counts;
  for (const QCPGraph* graph : dash.graphs(kind, run)) counts << points(graph);
  return counts;
}

QStringList legendNames(const QCustomPlot* plot) {
  QStringList names;
  for (int i = 0; i < plot->legend->itemCount(); ++i)
    if (auto* item = qobject_cast<QCPPlottableLegendItem*>(plot->legend->item(i)))
      names << item->plottable()->name();
  return names;
}

int limitLines(const QCustomPlot* plot) {
  int n = 0;
  for (int i = 0; i < plot->itemCount(); ++i)
    if (qobject_cast<QCPItemStraightLine*>(plot->item(i)) &&
        plot->item(i)->objectName() == QStringLiteral("limit"))
      ++n;
  return n;
}

// Writes bytes at the end of a file, flushed, as the engine's appends arrive.
void append(const QString& path, const QByteArray& bytes) {
  QFile f(path);
  QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Append));
  QCOMPARE(f.write(bytes), qint64(bytes.size()));
}

// The offset just past the n-th newline.
int afterLine(const QByteArray& bytes, int n) {
  int at = -1;
  for (int i = 0; i < n; ++i) at = bytes.indexOf('\n', at + 1);
  return at + 1;
}

std::vector<studio::Event> threeSteps() {
  return {dash_test::stepEvent(1, 2.0, 1001.0), dash_test::stepEvent(2, 1.5, 1002.0),
          dash_test::stepEvent(3, 1.75, 1003.0)};
}

}  // namespace

class TestRunDashboard : public QObject {
  Q_OBJECT

 private slots:
  void graphsPerChart();
  void chartsFollowTheRunKind_data();
  void chartsFollowTheRunKind();
  void noMemoryReadingsShowText();
  void overlayOfTwoRuns();
  void burstOfFeedsReplotsOnce();
  void hiddenDashboardDrawsWhenShown();
  void exportCsv_data();
  void exportCsv();
  void exportPng();
  void exportFailureNamesThePath();
  void logScale();
  void ignoreOutliers();
  void linkedXAxes();
  void hoverReadout();
  void divergedStepsAreMarked();
  void xAxisModes_data();
  void xAxisModes();
  void fewStepsAreVisible_data();
  void fewStepsAreVisible();
  void smoothing();
  void followsPalette();
  void followsALiveRun();
  void replacedFileStartsOver();
  void readErrorIsReported();
  void oddFieldsCostOnlyThemselves_data();
  void oddFieldsCostOnlyThemselves();
  void llamaFactoryTrainerLog();
  void constantSeriesGetsAWindow();
  void mfuEtaAndGpuActivity();
  void adapterRunSaysWhatItTrains();
  void restartsAreMarkedOnEveryChart();
  void checkpointsAndEvaluationsAreMarked_data();
  void checkpointsAndEvaluationsAreMarked();
  void cpuRunNamesTheMissingPeak();
};

void TestRunDashboard::graphsPerChart() {
  RunDashboard dash;
  dash.feed(QStringLiteral("runs/sft"), dash_test::loadEvents(QStringLiteral("sft-cpu")));
  QVERIFY(dash.updatePending());
  dash.flush();
  QVERIFY(!dash.updatePending());
  const QString run = QStringLiteral("runs/sft");
  // Loss: raw, smoothed, eval markers.
  QCOMPARE(pointCounts(dash, ChartKind::Loss, run), (QList<int>{12, 12, 2}));
  QCOMPARE(dash.graphs(ChartKind::Loss, run)[2]->lineStyle(), QCPGraph::lsNone);
  QCOMPARE(pointCounts(dash, ChartKind::TokensPerSec, run), QList<int>{12});
  QCOMPARE(pointCounts(dash, ChartKind::LearningRate, run), QList<int>{12});
  QCOMPARE(pointCounts(dash, ChartKind::GradNorm, run), QList<int>{12});
  QCOMPARE(pointCounts(dash, ChartKind::Memory, run), QList<int>{12});  // RSS of a CPU run
  QVERIFY(pointCounts(dash, ChartKind::Rewards, run).isEmpty());
  QCOMPARE(dash.label(run), QStringLiteral("sft"));
  QCOMPARE(dash.runs(), QStringList{run});
  QVERIFY(dash.tailer(run) == nullptr);
  const auto* facts = dash.findChild<QLabel*>(QStringLiteral("runFacts"));
  QVERIFY(facts->text().contains(QStringLiteral("finished: trained 60 steps")));
  QVERIFY(facts->text().contains(QStringLiteral("SFT")));
}

void TestRunDashboard::chartsFollowTheRunKind_data() {
  QTest::addColumn<QString>("file");
  QTest::addColumn<bool>("dpoCharts");
  QTest::addColumn<QList<int>>("memoryPoints");
  QTest::addColumn<int>("capacityLines");
  QTest::addColumn<QString>("memoryTitle");
  QTest::newRow("SFT on CPU") << "sft-cpu" << false << QList<int>{12} << 0 << "RSS";
  QTest::newRow("DPO on CPU") << "dpo-cpu" << true << QList<int>{6} << 0 << "RSS";
  // resources/demo/rm_demo.yaml's events as studio-train wrote them: each eval event carries
  // the accuracy over the evaluation pairs.
  QTest::newRow("RM on CPU") << "rm-cpu" << true << QList<int>{12, 12} << 0
                             << "Memory per rank on the CPU (MiB)";
  // resources/demo/kto_demo.yaml's events as studio-train wrote them: no accuracy (no pairs),
  // the KL estimate beside the rewards.
  // A CPU run of the engine reports each rank's memory with device -1 (tensors and RSS).
  QTest::newRow("KTO on CPU") << "kto-cpu" << true << QList<int>{6, 6} << 0
                              << "Memory per rank on the CPU (MiB)";
  // Per rank: allocated (solid) and reserved (dashed); one capacity line for both devices.
  QTest::newRow("DPO on 2 GPUs") << "dpo-gpu2" << true << QList<int>{8, 8, 8, 8} << 1
                                 << "GPU memory per rank";
}

void TestRunDashboard::chartsFollowTheRunKind() {
  QFETCH(QString, file);
  QFETCH(bool, dpoCharts);
  QFETCH(QList<int>, memoryPoints);
  QFETCH(int, capacityLines);
  QFETCH(QString, memoryTitle);
  RunDashboard dash;
  dash.feed(file, dash_test::loadEvents(file));
  dash.flush();
  QCOMPARE(dash.chartShown(ChartKind::Rewards), dpoCharts);
  QCOMPARE(dash.chartShown(ChartKind::Accuracy), dpoCharts);
  QVERIFY(dash.chartShown(ChartKind::Loss));
  QCOMPARE(pointCounts(dash, ChartKind::Memory, file), memoryPoints);
  QVERIFY(dash.chartHasPlot(ChartKind::Memory));
  QCOMPARE(limitLines(dash.plot(ChartKind::Memory)), capacityLines);
  bool titled = false;
  for (const QLabel* label : dash.findChildren<QLabel*>())
    titled = titled || label->text().contains(memoryTitle);
  QVERIFY2(titled, qPrintable(memoryTitle));
  if (dpoCharts && file == QStringLiteral("kto-cpu")) {
    // Chosen, rejected, margin and KL; the accuracy chart shown (stage kto's events carry the
    // rewards) but empty: KTO has no pairs to rank.
    const RunSeries& s = *dash.series(file);
    QCOMPARE(pointCounts(dash, ChartKind::Rewards, file),
             (QList<int>{int(s.size()), int(s.size()), int(s.size()), int(s.size())}));
    QVERIFY(s.has(studio::ui::Metric::Kl));
    QVERIFY(!s.has(studio::ui::Metric::RewardsAccuracies));
  } else if (dpoCharts) {
    const RunSeries& s = *dash.series(file);
    QCOMPARE(pointCounts(dash, ChartKind::Rewards, file),
             (QList<int>{int(s.size()), int(s.size()), int(s.size())}));
    // The training accuracy, and the evaluations' as markers when the eval events carry it.
    QList<int> accuracy{int(s.size())};
    if (file == QStringLiteral("rm-cpu")) {
      QVERIFY(s.hasEvalAccuracy());
      accuracy << int(s.evalCount());
      QVERIFY(legendNames(dash.plot(ChartKind::Accuracy)).contains("rm-cpu: eval accuracy"));
    }
    QCOMPARE(pointCounts(dash, ChartKind::Accuracy, file), accuracy);
  }
  if (capacityLines > 0) {
    // The capacity stays in view above the allocated memory.
    QVERIFY(dash.plot(ChartKind::Memory)->yAxis->range().upper > 81559.0);
    QCOMPARE(dash.plot(ChartKind::Memory)->yAxis->range().lower, 0.0);
  }
}

void TestRunDashboard::noMemoryReadingsShowText() {
  RunDashboard dash;
  dash.feed(QStringLiteral("bare"), threeSteps());
  dash.flush();
  QVERIFY(!dash.chartHasPlot(ChartKind::Memory));
  const auto* text = dash.findChild<QLabel*>(QStringLiteral("memory-empty"));
  QVERIFY(text != nullptr);
  QVERIFY2(text->text().contains(QStringLiteral("No GPU memory in this run")),
           qPrintable(text->text()));
  QVERIFY(dash.chartHasPlot(ChartKind::Loss));
  QVERIFY(!dash.chartHasPlot(ChartKind::TokensPerSec));  // no tokens_per_sec in these steps
}

void TestRunDashboard::overlayOfTwoRuns() {
  RunDashboard dash;
  dash.feed(QStringLiteral("runs/sp1"), dash_test::loadEvents(QStringLiteral("sft-cpu")));
  dash.feed(QStringLiteral("runs/sp2/"), dash_test::loadEvents(QStringLiteral("dpo-cpu")));
  dash.flush();
  QCOMPARE(dash.runs(), (QStringList{"runs/sp1", "runs/sp2"}));
  const QStringList legend = legendNames(dash.plot(ChartKind::Loss));
  QCOMPARE(legend, (QStringList{"sp1: loss (smoothed)", "sp1: eval loss", "sp2: loss (smoothed)",
                                "sp2: eval loss"}));
  // One colour per run, the same on every chart.
  const QColor sp1 = dash.graphs(ChartKind::Loss, "runs/sp1")[1]->pen().color();
  const QColor sp2 = dash.graphs(ChartKind::Loss, "runs/sp2")[1]->pen().color();
  QVERIFY(sp1 != sp2);
  QCOMPARE(dash.graphs(ChartKind::TokensPerSec, "runs/sp2")[0]->pen().color(), sp2);
  QVERIFY(dash.chartShown(ChartKind::Rewards));  // one of them is DPO

  dash.removeRun(QStringLiteral("runs/sp2"));
  dash.flush();
  QCOMPARE(dash.runs(), QStringList{"runs/sp1"});
  QCOMPARE(legendNames(dash.plot(ChartKind::Loss)),
           (QStringList{"sp1: loss (smoothed)", "sp1: eval loss"}));
  QCOMPARE(dash.plot(ChartKind::Rewards)->graphCount(), 0);
  QVERIFY(!dash.chartShown(ChartKind::Rewards));
  QVERIFY(dash.series(QStringLiteral("runs/sp2")) == nullptr);
}

void TestRunDashboard::burstOfFeedsReplotsOnce() {
  RunDashboard dash;
  dash.show();
  QVERIFY(QTest::qWaitForWindowExposed(&dash));
  QSignalSpy replots(&dash, &RunDashboard::replotted);
  QSignalSpy updates(&dash, &RunDashboard::runUpdated);
  for (int step = 1; step <= 1000; ++step)
    dash.feed(QStringLiteral("burst"), {dash_test::stepEvent(step, 1.0 / step, 1000.0 + step)});
  QCOMPARE(replots.count(), 0);  // nothing is drawn while the burst is being fed
  QTRY_COMPARE(replots.count(), 1);
  QTest::qWait(3 * RunDashboard::kCoalesceMs);
  QCOMPARE(replots.count(), 1);
  QCOMPARE(updates.count(), 1);
  QCOMPARE(updates.at(0).at(0).toString(), QStringLiteral("burst"));
  QCOMPARE(pointCounts(dash, ChartKind::Loss, "burst"), (QList<int>{1000, 1000}));
  // Long series are lines only: no marker on each of a thousand points.
  QVERIFY(dash.graphs(ChartKind::Loss, "burst")[1]->scatterStyle().isNone());
}

void TestRunDashboard::hiddenDashboardDrawsWhenShown() {
  RunDashboard dash;
  QSignalSpy replots(&dash, &RunDashboard::replotted);
  QSignalSpy updates(&dash, &RunDashboard::runUpdated);
  dash.feed(QStringLiteral("sft"), dash_test::loadEvents(QStringLiteral("sft-cpu")));
  QTRY_COMPARE(updates.count(), 1);
  // The graphs and axes are current, but nothing was drawn.
  QCOMPARE(pointCounts(dash, ChartKind::Loss, "sft"), (QList<int>{12, 12, 2}));
  QVERIFY(dash.plot(ChartKind::Loss)->xAxis->range().contains(60.0));
  QCOMPARE(replots.count(), 0);
  dash.show();
  QCOMPARE(replots.count(), 1);
  dash.hide();
  dash.show();
  QCOMPARE(replots.count(), 1);  // nothing new while it was hidden: no second replot
}

void TestRunDashboard::exportCsv_data() {
  QTest::addColumn<QString>("runKey");
  QTest::addColumn<XAxisMode>("mode");
  QTest::addColumn<QString>("expected");
  // Smoothing 0.5: 1.5; (0.375 + 0.625) / 0.75 = 4/3; (0.5 + 0.5) / 0.875 = 8/7.
  QTest::newRow("step axis") << "runs/a" << XAxisMode::Step
                             << "step,a: loss,a: loss (smoothed),a: eval loss\n"
                                "1,1.5,1.5,\n"
                                "2,1.25,1.3333333333333333,1.375\n"
                                "3,1,1.1428571428571428,\n";
  // Relative to the start event at t=100; the eval sits at its step's time. A label with a
  // comma is quoted.
  QTest::newRow("relative time axis, quoted label")
      << "runs/a,b" << XAxisMode::RelativeTime
      << "relative_time_s,\"a,b: loss\",\"a,b: loss (smoothed)\",\"a,b: eval loss\"\n"
         "1,1.5,1.5,\n"
         "2.5,1.25,1.3333333333333333,1.375\n"
         "4,1,1.1428571428571428,\n";
}

void TestRunDashboard::exportCsv() {
  QFETCH(QString, runKey);
  QFETCH(XAxisMode, mode);
  QFETCH(QString, expected);
  RunDashboard dash;
  dash.setSmoothing(0.5);
  dash.setXAxis(mode);
  dash.feed(runKey, {dash_test::parsed({{"event", "start"}, {"time", 100.0}}),
                     dash_test::stepEvent(1, 1.5, 101.0), dash_test::stepEvent(2, 1.25, 102.5),
                     dash_test::parsed({{"event", "eval"}, {"step", 2}, {"loss", 1.375}}),
                     dash_test::stepEvent(3, 1.0, 104.0)});
  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("loss.csv"));
  QString error;
  QVERIFY2(dash.exportCsv(ChartKind::Loss, path, &error), qPrintable(error));
  QCOMPARE(QString::fromUtf8(dash_test::readBytes(path)), expected);
  QCOMPARE(QDir(dir.path()).entryList(QDir::Files), QStringList{"loss.csv"});  // no temp left
}

void TestRunDashboard::exportPng() {
  RunDashboard dash;
  dash.feed(QStringLiteral("sft"), dash_test::loadEvents(QStringLiteral("sft-cpu")));
  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("loss.png"));
  QString error;
  QVERIFY2(dash.exportPng(ChartKind::Loss, path, &error), qPrintable(error));
  const QByteArray bytes = dash_test::readBytes(path);
  QVERIFY(bytes.size() > 1000);
  QVERIFY(bytes.startsWith("\x89PNG\r\n\x1a\n"));
  QImage image;
  QVERIFY(image.load(path, "PNG"));
  QCOMPARE(image.size(), QSize(1200, 700));  // the dashboard was never shown: the default size
  // Not a blank picture: axes, labels and curves cover part of the background.
  const QRgb background = image.pixel(0, 0);
  int drawn = 0;
  for (int y = 0; y < image.height(); ++y)
    for (int x = 0; x < image.width(); ++x) drawn += image.pixel(x, y) != background;
  QVERIFY2(drawn > image.width() * image.height() / 200, qPrintable(QString::number(drawn)));
}

void TestRunDashboard::exportFailureNamesThePath() {
  RunDashboard dash;
  dash.feed(QStringLiteral("sft"), threeSteps());
  const QString path = QStringLiteral("/nonexistent-dir-for-dashboard-test/loss.csv");
  QString error;
  QVERIFY(!dash.exportCsv(ChartKind::Loss, path, &error));
  QVERIFY2(error.contains(path), qPrintable(error));
  error.clear();
  QVERIFY(!dash.exportPng(ChartKind::Loss, QStringLiteral("/nonexistent-dir-for-dashboard-test/l.png"),
                          &error));
  QVERIFY2(error.contains(QStringLiteral("/nonexistent-dir-for-dashboard-test/l.png")),
           qPrintable(error));
}

void TestRunDashboard::logScale() {
  RunDashboard dash;
  dash.feed(QStringLiteral("sft"), dash_test::loadEvents(QStringLiteral("sft-cpu")));
  QCPAxis* y = dash.plot(ChartKind::Loss)->yAxis;
  QCOMPARE(y->scaleType(), QCPAxis::stLinear);
  dash.setLogScale(true);
  dash.flush();
  QVERIFY(dash.logScale());
  QCOMPARE(y->scaleType(), QCPAxis::stLogarithmic);
  QVERIFY(!y->ticker().dynamicCast<QCPAxisTickerLog>().isNull());
  QVERIFY(dash.findChild<QCheckBox*>(QStringLiteral("logScale"))->isChecked());
  QVERIFY(y->range().lower > 0.0);
  QVERIFY(y->range().lower < 2.046691160059974 && y->range().upper > 7.845936761539153);
  // Only the loss chart is logarithmic.
  QCOMPARE(dash.plot(ChartKind::GradNorm)->yAxis->scaleType(), QCPAxis::stLinear);
  dash.findChild<QCheckBox*>(QStringLiteral("logScale"))->setChecked(false);
  QVERIFY(!dash.logScale());
  QCOMPARE(y->scaleType(), QCPAxis::stLinear);
}

// One spike (1000) among 60 losses near 2: fitted to it, the rest is a flat line at the bottom;
// "Ignore outliers" leaves the spike (and the decay of its smoothed curve) out.
void TestRunDashboard::ignoreOutliers() {
  RunDashboard dash;
  std::vector<studio::Event> events;
  for (int step = 1; step <= 60; ++step)
    events.push_back(dash_test::stepEvent(step, step == 30 ? 1000.0 : 2.0 + 0.01 * step, step));
  dash.feed(QStringLiteral("spiky"), events);
  dash.flush();
  QCPAxis* y = dash.plot(ChartKind::Loss)->yAxis;
  QVERIFY2(y->range().upper >= 1000.0, qPrintable(QString::number(y->range().upper)));
  auto* box = dash.findChild<QCheckBox*>(QStringLiteral("ignoreOutliers"));
  QVERIFY(box);
  box->setChecked(true);
  QVERIFY(dash.ignoresOutliers());
  QVERIFY2(y->range().upper < 5.0 && y->range().lower > 1.5,
           qPrintable(QStringLiteral("%1 .. %2").arg(y->range().lower).arg(y->range().upper)));
  box->setChecked(false);
  QVERIFY(y->range().upper >= 1000.0);
}

// A zoom on one chart's x axis moves every other chart's; "Fit to data" brings all back.
void TestRunDashboard::linkedXAxes() {
  RunDashboard dash;
  dash.feed(QStringLiteral("sft"), dash_test::loadEvents(QStringLiteral("sft-cpu")));
  dash.flush();
  // The user's wheel over the loss chart: QCustomPlot zooms its axes.
  QCustomPlot* loss = dash.plot(ChartKind::Loss);
  loss->resize(600, 400);
  loss->replot();
  const QCPRange before = loss->xAxis->range();
  const QPointF at(loss->axisRect()->center());
  QWheelEvent wheel(at, loss->mapToGlobal(at), QPoint(), QPoint(0, 240), Qt::NoButton,
                    Qt::NoModifier, Qt::NoScrollPhase, false);
  QApplication::sendEvent(loss, &wheel);
  const QCPRange zoomed = loss->xAxis->range();
  QVERIFY2(zoomed.size() < before.size() * 0.9,
           qPrintable(QStringLiteral("%1 -> %2").arg(before.size()).arg(zoomed.size())));
  for (ChartKind kind : {ChartKind::TokensPerSec, ChartKind::LearningRate, ChartKind::GradNorm,
                         ChartKind::Memory}) {
    const QCPRange r = dash.plot(kind)->xAxis->range();
    QVERIFY2(std::abs(r.lower - zoomed.lower) < 1e-9 && std::abs(r.upper - zoomed.upper) < 1e-9,
             qPrintable(chartName(kind)));
  }
  // New data does not undo the zoom of a linked chart; Fit to data does.
  dash.feed(QStringLiteral("sft"), {dash_test::stepEvent(1000, 1.0, 1000)});
  dash.flush();
  QCOMPARE(dash.plot(ChartKind::GradNorm)->xAxis->range().upper, zoomed.upper);
  dash.fitToData();
  QVERIFY(dash.plot(ChartKind::GradNorm)->xAxis->range().upper >= 1000.0);
  // Programmatically (what the dashboard does for a user's drag): every chart follows.
  dash.setLinkedXRange(ChartKind::Memory, 10, 20);
  QCOMPARE(dash.plot(ChartKind::Loss)->xAxis->range().lower, 10.0);
  QCOMPARE(dash.plot(ChartKind::Loss)->xAxis->range().upper, 20.0);
}

// The hover read-out names each line's exact value at the point nearest the pointer.
void TestRunDashboard::hoverReadout() {
  RunDashboard dash;
  std::vector<studio::Event> events;
  for (int step = 10; step <= 50; step += 10) events.push_back(dash_test::stepEvent(step, step / 7.0, step));
  dash.feed(QStringLiteral("runs/exact"), events);
  dash.flush();
  const QString text = dash.readoutAt(ChartKind::Loss, 31.0);  // nearest: step 30
  QVERIFY2(text.contains(QStringLiteral("exact: loss = 4.28571 (step 30)")), qPrintable(text));
  QVERIFY2(text.contains(QStringLiteral("exact: loss (smoothed) = ")), qPrintable(text));
  QCOMPARE(dash.readoutAt(ChartKind::Loss, 1e9).count(QStringLiteral("(step 50)")), 2);
}

// A diverged run's steps (NaN and Infinity, as Python writes them) are marks at the foot of
// their chart, in the run's colour, with a read-out and a CSV cell that say which word it was;
// the line and the smoothed curve go on through the finite steps around them, unbroken, and the
// value axis fits the finite values only.
void TestRunDashboard::divergedStepsAreMarked() {
  const std::vector<studio::Event> events = dash_test::parsedLines({
      R"({"event":"step","step":1,"loss":2.0,"grad_norm":1.0,"time":100})",
      R"({"event":"step","step":2,"loss":NaN,"grad_norm":NaN,"time":101})",
      R"({"event":"step","step":3,"loss":1.8,"grad_norm":1.2,"time":102})",
      R"({"event":"step","step":4,"loss":Infinity,"grad_norm":Infinity,"time":103})",
      R"({"event":"step","step":5,"loss":1.6,"grad_norm":0.9,"time":104})",
  });
  RunDashboard dash;
  dash.resize(1200, 800);
  dash.feed(QStringLiteral("runs/diverged"), events);
  dash.flush();
  for (ChartKind kind : {ChartKind::Loss, ChartKind::GradNorm}) {
    const auto graphs = dash.graphs(kind, QStringLiteral("runs/diverged"));
    std::vector<QCPGraph*> marks, lines;
    for (QCPGraph* g : graphs) (g->valueAxis() == g->parentPlot()->yAxis2 ? marks : lines).push_back(g);
    QCOMPARE(int(marks.size()), 1);
    QVERIFY(!lines.empty());
    // The marks: steps 2 and 4, at the foot of the chart, a filled triangle in the line's colour.
    QCOMPARE(marks[0]->data()->size(), 2);
    QCOMPARE(marks[0]->data()->at(0)->key, 2.0);
    QCOMPARE(marks[0]->data()->at(1)->key, 4.0);
    QVERIFY(marks[0]->data()->at(0)->value < 0.1);
    QCOMPARE(marks[0]->lineStyle(), QCPGraph::lsNone);
    QCOMPARE(marks[0]->scatterStyle().shape(), QCPScatterStyle::ssTriangle);
    QCOMPARE(marks[0]->scatterStyle().brush().color().rgb(), lines[0]->pen().color().rgb());
    QVERIFY(!marks[0]->parentPlot()->yAxis2->visible());
    QCOMPARE(marks[0]->parentPlot()->yAxis2->range(), QCPRange(0.0, 1.0));
    // The lines: every finite step, and nothing that would break them.
    for (QCPGraph* line : lines) {
      QCOMPARE(line->data()->size(), 3);
      for (auto it = line->data()->constBegin(); it != line->data()->constEnd(); ++it)
        QVERIFY2(std::isfinite(it->value), qPrintable(line->name()));
    }
    // The value axis fits the finite values (an infinite one would flatten them).
    QVERIFY(marks[0]->parentPlot()->yAxis->range().upper < 3.0);
  }
  const QString at2 = dash.readoutAt(ChartKind::GradNorm, 2.0);
  QVERIFY2(at2.contains(QStringLiteral("diverged: grad norm not finite (NaN or Infinity): NaN (step 2)")),
           qPrintable(at2));
  const QString at4 = dash.readoutAt(ChartKind::Loss, 4.0);
  QVERIFY2(at4.contains(QStringLiteral("diverged: loss not finite (NaN or Infinity): Infinity (step 4)")),
           qPrintable(at4));
  QTemporaryDir dir;
  const QString path = dir.filePath(QStringLiteral("grad.csv"));
  QString error;
  QVERIFY2(dash.exportCsv(ChartKind::GradNorm, path, &error), qPrintable(error));
  QFile f(path);
  QVERIFY(f.open(QIODevice::ReadOnly));
  const QStringList rows = QString::fromUtf8(f.readAll()).split('\n', Qt::SkipEmptyParts);
  QCOMPARE(rows.size(), 6);
  QCOMPARE(rows[0], QStringLiteral("step,diverged: grad norm,diverged: grad norm not finite (NaN or Infinity)"));
  QCOMPARE(rows[2], QStringLiteral("2,,NaN"));
  QCOMPARE(rows[4], QStringLiteral("4,,Infinity"));
  QCOMPARE(rows[5], QStringLiteral("5,0.9,"));
}

void TestRunDashboard::xAxisModes_data() {
  QTest::addColumn<XAxisMode>("mode");
  QTest::addColumn<double>("firstKey");
  QTest::addColumn<double>("evalKey");
  QTest::addColumn<QString>("ticker");
  QTest::newRow("step") << XAxisMode::Step << 5.0 << 30.0 << "step";
  QTest::newRow("relative time") << XAxisMode::RelativeTime
                                 << 1795293735.993992 - 1795293734.9120781
                                 << 1795293740.8816361 - 1795293734.9120781 << "time";
  QTest::newRow("wall time") << XAxisMode::WallTime << 1795293735.993992 << 1795293740.8816361
                             << "datetime";
}

void TestRunDashboard::xAxisModes() {
  QFETCH(XAxisMode, mode);
  QFETCH(double, firstKey);
  QFETCH(double, evalKey);
  QFETCH(QString, ticker);
  RunDashboard dash;
  dash.feed(QStringLiteral("sft"), dash_test::loadEvents(QStringLiteral("sft-cpu")));
  dash.flush();
  auto* box = dash.findChild<QComboBox*>(QStringLiteral("xAxis"));
  box->setCurrentIndex(box->findData(static_cast<int>(mode)));  // as the user picks it
  QCOMPARE(dash.xAxis(), mode);
  dash.flush();
  for (ChartKind kind : {ChartKind::Loss, ChartKind::TokensPerSec, ChartKind::Memory}) {
    const QCPGraph* graph = dash.graphs(kind, "sft").front();
    QCOMPARE(graph->data()->at(0)->key, firstKey);
    const QCPAxis* x = dash.plot(kind)->xAxis;
    QVERIFY(x->range().contains(firstKey));
    const auto tick = x->ticker();
    const bool dateTime = !tick.dynamicCast<QCPAxisTickerDateTime>().isNull();
    const bool time = !tick.dynamicCast<QCPAxisTickerTime>().isNull();
    QCOMPARE(dateTime, ticker == "datetime");
    QCOMPARE(time, ticker == "time");
  }
  QCOMPARE(dash.graphs(ChartKind::Loss, "sft")[2]->data()->at(0)->key, evalKey);
}

void TestRunDashboard::fewStepsAreVisible_data() {
  QTest::addColumn<int>("steps");
  QTest::newRow("three steps") << 3;
  QTest::newRow("one step") << 1;
}

void TestRunDashboard::fewStepsAreVisible() {
  QFETCH(int, steps);
  std::vector<studio::Event> events = threeSteps();
  events.resize(static_cast<std::size_t>(steps));
  RunDashboard dash;
  dash.feed(QStringLiteral("short"), events);
  dash.flush();
  const QCPGraph* smoothed = dash.graphs(ChartKind::Loss, "short")[1];
  QCOMPARE(points(smoothed), steps);
  // Markers on each point, so even a single point is drawn.
  QCOMPARE(smoothed->scatterStyle().shape(), QCPScatterStyle::ssDisc);
  const QCPRange x = dash.plot(ChartKind::Loss)->xAxis->range();
  const QCPRange y = dash.plot(ChartKind::Loss)->yAxis->range();
  // Every point strictly inside the axes: margins, and no zero-size range for one point.
  for (auto it = smoothed->data()->constBegin(); it != smoothed->data()->constEnd(); ++it) {
    QVERIFY2(x.lower < it->key && it->key < x.upper, qPrintable(QString::number(it->key)));
    QVERIFY2(y.lower < it->value && it->value < y.upper, qPrintable(QString::number(it->value)));
  }
  QVERIFY(x.size() > 0.5);
  QVERIFY(y.size() > 0.0);
}

void TestRunDashboard::smoothing() {
  RunDashboard dash;
  dash.feed(QStringLiteral("sft"), dash_test::loadEvents(QStringLiteral("sft-cpu")));
  dash.flush();
  QCOMPARE(dash.smoothing(), RunDashboard::kDefaultSmoothing);
  const std::vector<double>& loss = dash.series("sft")->values(Metric::Loss);
  auto smoothedValues = [&] {
    std::vector<double> values;
    const QCPGraph* graph = dash.graphs(ChartKind::Loss, "sft")[1];
    for (auto it = graph->data()->constBegin(); it != graph->data()->constEnd(); ++it)
      values.push_back(it->value);
    return values;
  };
  QCOMPARE(smoothedValues(), RunSeries::ema(loss, 0.6));
  dash.findChild<QSlider*>(QStringLiteral("smoothing"))->setValue(0);
  QCOMPARE(dash.smoothing(), 0.0);
  dash.flush();
  QCOMPARE(smoothedValues(), loss);
  dash.setSmoothing(0.9);
  QCOMPARE(dash.findChild<QSlider*>(QStringLiteral("smoothing"))->value(), 900);
  dash.flush();
  QCOMPARE(smoothedValues(), RunSeries::ema(loss, 0.9));
  dash.setSmoothing(5.0);  // clamped
  QCOMPARE(dash.smoothing(), RunDashboard::kMaxSmoothing);
}

void TestRunDashboard::followsPalette() {
  RunDashboard dash;
  dash.feed(QStringLiteral("sft"), threeSteps());
  dash.flush();
  QPalette dark = dash.palette();
  dark.setColor(QPalette::Base, QColor(0x1e, 0x1e, 0x1e));
  dark.setColor(QPalette::Text, QColor(0xee, 0xee, 0xee));
  dash.setPalette(dark);
  const QCPAxis* x = dash.plot(ChartKind::Loss)->xAxis;
  QTRY_COMPARE(x->tickLabelColor(), QColor(0xee, 0xee, 0xee));
  QCOMPARE(x->basePen().color(), QColor(0xee, 0xee, 0xee));
  QCOMPARE(dash.plot(ChartKind::Loss)->legend->textColor(), QColor(0xee, 0xee, 0xee));
}

void TestRunDashboard::followsALiveRun() {
  QTemporaryDir tmp;
  const QString runDir = tmp.filePath(QStringLiteral("live run"));
  QVERIFY(QDir().mkpath(runDir));
  const QString events = QDir(runDir).filePath(QStringLiteral("events.jsonl"));
  const QByteArray bytes = dash_test::readBytes(dash_test::dataPath("sft-cpu"));
  // start and 5 steps, then half of the 6th step's line: only 5 steps may show.
  const int fiveSteps = afterLine(bytes, 6);
  append(events, bytes.left(fiveSteps + 50));

  RunDashboard dash;
  QSignalSpy ended(&dash, &RunDashboard::runEnded);
  QSignalSpy updated(&dash, &RunDashboard::runUpdated);
  dash.showRun(runDir);
  QCOMPARE(dash.runs(), QStringList{runDir});
  QCOMPARE(dash.label(runDir), QStringLiteral("live run"));
  QVERIFY(dash.tailer(runDir) != nullptr);
  QTRY_COMPARE_WITH_TIMEOUT(pointCounts(dash, ChartKind::Loss, runDir), (QList<int>{5, 5}),
                            kLiveTimeoutMs);
  QCOMPARE(dash.series(runDir)->size(), std::size_t(5));
  QCOMPARE(dash.tailer(runDir)->cursor().offset, std::uint64_t(fiveSteps));
  QVERIFY(updated.count() >= 1);

  // The rest of the line and the steps after it, without the end event.
  const int beforeEnd = afterLine(bytes, bytes.count('\n') - 1);
  append(events, bytes.mid(fiveSteps + 50, beforeEnd - fiveSteps - 50));
  QTRY_COMPARE_WITH_TIMEOUT(pointCounts(dash, ChartKind::Loss, runDir), (QList<int>{12, 12, 2}),
                            kLiveTimeoutMs);
  QCOMPARE(ended.count(), 0);
  append(events, bytes.mid(beforeEnd));
  QTRY_COMPARE_WITH_TIMEOUT(ended.count(), 1, kLiveTimeoutMs);
  QCOMPARE(ended.at(0).at(0).toString(), runDir);
  QCOMPARE(ended.at(0).at(1).toString(), QStringLiteral("finished"));
  QCOMPARE(dash.tailer(runDir)->cursor().offset, std::uint64_t(bytes.size()));
}

void TestRunDashboard::replacedFileStartsOver() {
  QTemporaryDir tmp;
  const QString events = tmp.filePath(QStringLiteral("events.jsonl"));
  append(events, dash_test::readBytes(dash_test::dataPath("sft-cpu")));
  RunDashboard dash;
  dash.showRun(tmp.path(), QStringLiteral("reused folder"));
  QTRY_COMPARE_WITH_TIMEOUT(pointCounts(dash, ChartKind::Loss, tmp.path()),
                            (QList<int>{12, 12, 2}), kLiveTimeoutMs);
  QVERIFY(!dash.chartShown(ChartKind::Rewards));
  // A new run in the same folder: another file renamed over the old one.
  const QString next = tmp.filePath(QStringLiteral("next.jsonl"));
  append(next, dash_test::readBytes(dash_test::dataPath("dpo-cpu")));
  QVERIFY(std::rename(next.toLocal8Bit().constData(), events.toLocal8Bit().constData()) == 0);
  QTRY_COMPARE_WITH_TIMEOUT(pointCounts(dash, ChartKind::Loss, tmp.path()),
                            (QList<int>{6, 6, 2}), kLiveTimeoutMs);
  QVERIFY(dash.series(tmp.path())->isDpo());
  QVERIFY(dash.chartShown(ChartKind::Rewards));
  QCOMPARE(legendNames(dash.plot(ChartKind::Loss)).first(),
           QStringLiteral("reused folder: loss (smoothed)"));
}

void TestRunDashboard::readErrorIsReported() {
  QTemporaryDir tmp;
  // A directory where the events file should be: opening works, reading fails.
  QVERIFY(QDir(tmp.path()).mkdir(QStringLiteral("events.jsonl")));
  RunDashboard dash;
  QSignalSpy errors(&dash, &RunDashboard::readError);
  dash.showRun(tmp.path());
  QTRY_COMPARE_WITH_TIMEOUT(errors.count(), 1, kLiveTimeoutMs);
  const QString message = errors.at(0).at(1).toString();
  QVERIFY2(message.contains(QStringLiteral("events.jsonl")), qPrintable(message));
  // Reported once, not at every poll.
  QTest::qWait(3 * studio::ui::EventTailer::kDefaultIntervalMs);
  QCOMPARE(errors.count(), 1);
  const auto* status = dash.findChild<QLabel*>(QStringLiteral("readStatus"));
  QCOMPARE(status->text(), message);
}

// A run folder written by another tool, with one field of an unexpected type in every step: the
// run is drawn whole and the dashboard says what it repaired; a run none of whose steps can be
// read says why instead of waiting for a first step forever.
// A folder only LLaMA-Factory wrote: its trainer_log.jsonl is drawn (steps, evals, relative time
// from its elapsed_time), an odd field costs only itself and is named with that file, and the
// closing summary line adds no point.
void TestRunDashboard::llamaFactoryTrainerLog() {
  QTemporaryDir tmp;
  QByteArray bytes;
  for (int step = 1; step <= 100; ++step) {
    const QString loss = step == 42 ? QStringLiteral("\"n/a\"") : QString::number(3.0 - step * 0.02);
    bytes += QStringLiteral("{\"current_steps\": %1, \"total_steps\": 100, \"loss\": %2, "
                            "\"lr\": 1e-05, \"epoch\": %3, \"percentage\": %1.0, "
                            "\"elapsed_time\": \"0:%4:%5\", \"remaining_time\": \"0:00:00\"}\n")
                 .arg(step)
                 .arg(loss)
                 .arg(step / 100.0)
                 .arg(step / 60, 2, 10, QLatin1Char('0'))
                 .arg(step % 60, 2, 10, QLatin1Char('0'))
                 .toUtf8();
    if (step % 20 == 0)
      bytes += QStringLiteral("{\"current_steps\": %1, \"total_steps\": 100, \"eval_loss\": %2, "
                              "\"epoch\": %3, \"percentage\": %1.0, \"elapsed_time\": \"0:00:01\", "
                              "\"remaining_time\": \"0:00:00\"}\n")
                   .arg(step)
                   .arg(2.0 - step * 0.01)
                   .arg(step / 100.0)
                   .toUtf8();
  }
  bytes += R"({"current_steps": 100, "total_steps": 100, "epoch": 1.0, "percentage": 100.0, "elapsed_time": "0:01:40", "remaining_time": "0:00:00"})" "\n";
  append(tmp.filePath(QStringLiteral("trainer_log.jsonl")), bytes);

  RunDashboard dash;
  QSignalSpy problems(&dash, &RunDashboard::readProblems);
  dash.showRun(tmp.path());
  QTRY_VERIFY_WITH_TIMEOUT(dash.series(tmp.path()) && dash.series(tmp.path())->size() == 100 &&
                               dash.series(tmp.path())->evalCount() == 5,
                           kLiveTimeoutMs);
  dash.flush();
  const auto* series = dash.series(tmp.path());
  QCOMPARE(series->steps().back(), 100.0);
  QVERIFY(std::isnan(series->values(Metric::Loss)[41]));  // step 42's odd loss, dropped
  QCOMPARE(series->values(Metric::Loss)[99], 3.0 - 100 * 0.02);  // not the summary's gap
  QCOMPARE(series->relativeTime()[99], 100.0);  // elapsed_time "0:01:40"
  QTRY_VERIFY_WITH_TIMEOUT(problems.count() >= 1, kLiveTimeoutMs);
  const QString told = problems.last().at(1).toString();
  QVERIFY2(told.startsWith(QStringLiteral("trainer_log.jsonl: 1 line had fields not as the format "
                                          "says")) &&
               told.contains(QStringLiteral("line 44: field 'loss'")),
           qPrintable(told));
}

// A constant learning rate is drawn in a window around its value, not at 0 +- whatever span the
// axis had before (QCustomPlot keeps the old span when all values are equal).
void TestRunDashboard::constantSeriesGetsAWindow() {
  RunDashboard dash;
  std::vector<studio::Event> events;
  for (int step = 1; step <= 50; ++step)
    events.push_back(dash_test::parsed({{"event", "step"}, {"step", step}, {"loss", 2.0 - step * 0.01},
                                        {"lr", 1e-5}, {"grad_norm", 0.0}}));
  dash.feed(QStringLiteral("constant"), events);
  dash.flush();
  const QCPRange lr = dash.plot(ChartKind::LearningRate)->yAxis->range();
  QVERIFY2(lr.lower > 0.8e-5 && lr.lower < 1e-5 && lr.upper > 1e-5 && lr.upper < 1.2e-5,
           qPrintable(QStringLiteral("%1 .. %2").arg(lr.lower).arg(lr.upper)));
  const QCPRange norm = dash.plot(ChartKind::GradNorm)->yAxis->range();  // all zero
  QVERIFY2(norm.lower < 0 && norm.lower > -2 && norm.upper > 0 && norm.upper < 2,
           qPrintable(QStringLiteral("%1 .. %2").arg(norm.lower).arg(norm.upper)));
}

void TestRunDashboard::oddFieldsCostOnlyThemselves_data() {
  QTest::addColumn<QByteArray>("stepTemplate");  // %1: the step
  QTest::addColumn<int>("points");               // loss points expected
  QTest::addColumn<int>("memoryPoints");         // rank 0's allocated points
  QTest::addColumn<QString>("summary");          // what the status line must say
  QTest::newRow("device as cuda:0")
      << QByteArray(R"({"event":"step","step":%1,"loss":2.5,"time":%1,"gpus":[{"rank":0,"device":"cuda:0","allocated_mib":100,"reserved_mib":120,"total_mib":81559}]})")
      << 400 << 400
      << "events.jsonl: 400 lines had fields not as the format says, kept without them or "
         "converted (400 fields converted, 0 dropped; first: line 2: field 'gpus[0].device': "
         "expected an integer device index, got string \"cuda:0\": read as 0)";
  QTest::newRow("memory as text with units")
      << QByteArray(R"({"event":"step","step":%1,"loss":2.5,"time":%1,"gpus":[{"rank":0,"device":0,"allocated_mib":"100 MiB"}]})")
      << 400 << 0
      << "(0 fields converted, 400 dropped; first: line 2: field 'gpus[0].allocated_mib': "
         "expected a number, got string \"100 MiB\": dropped)";
  QTest::newRow("no step readable")
      << QByteArray(R"({"event":"step","stp":%1,"loss":2.5})") << 0 << 0
      << "events.jsonl: 400 lines skipped whole (first: line 2: \"step\" event: missing field "
         "'step'; last: line 401: ";
}

void TestRunDashboard::oddFieldsCostOnlyThemselves() {
  QFETCH(QByteArray, stepTemplate);
  QFETCH(int, points);
  QFETCH(int, memoryPoints);
  QFETCH(QString, summary);
  QTemporaryDir tmp;
  QByteArray bytes = R"({"event":"start","stage":"sft","world_size":1,"time":0})" "\n";
  for (int step = 1; step <= 400; ++step)
    bytes += QString::fromLatin1(stepTemplate).arg(step).toLatin1() + '\n';
  append(tmp.filePath(QStringLiteral("events.jsonl")), bytes);

  RunDashboard dash;
  QSignalSpy problems(&dash, &RunDashboard::readProblems);
  dash.showRun(tmp.path());
  QTRY_VERIFY_WITH_TIMEOUT(problems.count() >= 1, kLiveTimeoutMs);
  dash.flush();
  const QString told = problems.last().at(1).toString();
  QVERIFY2(told.contains(summary), qPrintable(told));
  QCOMPARE(dash.series(tmp.path())->size(), std::size_t(points));
  const auto* status = dash.findChild<QLabel*>(QStringLiteral("readStatus"));
  QVERIFY(status->isVisibleTo(&dash));
  QVERIFY2(status->text().contains(summary), qPrintable(status->text()));
  if (points > 0) {
    QCOMPARE(pointCounts(dash, ChartKind::Loss, tmp.path()).first(), points);
    const auto& gpus = dash.series(tmp.path())->gpus();
    int allocated = 0;
    for (const auto& gpu : gpus)
      for (double v : gpu.allocated) allocated += std::isfinite(v) ? 1 : 0;
    QCOMPARE(allocated, memoryPoints);
    return;
  }
  // Nothing to draw: the charts say why instead of "Waiting for the first step".
  QVERIFY(!dash.chartHasPlot(ChartKind::Loss));
  bool explained = false;
  for (const QLabel* label : dash.findChildren<QLabel*>())
    explained |= label->text().startsWith(QStringLiteral("No step of the run could be read yet.")) &&
                 label->text().contains(summary);
  QVERIFY(explained);
}

// A LoRA run's start event counts the trained parameters (LLaMA-Factory's "trainable params"):
// the facts line says how many and their share; a full run's (all trained) says nothing more.
void TestRunDashboard::adapterRunSaysWhatItTrains() {
  auto start = [](int64_t trainable) {
    return dash_test::parsed({{"event", "start"}, {"time", 1000.0}, {"stage", "sft"},
                              {"model", {{"architecture", "Qwen2ForCausalLM"},
                                         {"parameters", 7615616512},
                                         {"trainable_parameters", trainable}}}});
  };
  RunDashboard dash;
  dash.feed(QStringLiteral("lora"), {start(40370176)});
  dash.flush();
  const auto* facts = dash.findChild<QLabel*>(QStringLiteral("runFacts"));
  QVERIFY2(facts->text().contains(QStringLiteral("Qwen2ForCausalLM, 7.62 B parameters")),
           qPrintable(facts->text()));
  QVERIFY2(facts->text().contains(QStringLiteral("40.37 M parameters trained (0.53%)")),
           qPrintable(facts->text()));
  RunDashboard full;
  full.feed(QStringLiteral("full"), {start(7615616512)});
  full.flush();
  const auto* full_facts = full.findChild<QLabel*>(QStringLiteral("runFacts"));
  QVERIFY2(!full_facts->text().contains(QStringLiteral("trained (")), qPrintable(full_facts->text()));
}

// A run the launcher restarted (--max-restarts): a vertical mark on every chart at the step the
// new world resumed from (at its time on the time axes), labelled with the attempt and the rank
// that failed, and the facts line says how many restarts and the last cause.
void TestRunDashboard::restartsAreMarkedOnEveryChart() {
  std::vector<studio::Event> events = {
      dash_test::parsed({{"event", "start"}, {"time", 1000.0}, {"stage", "sft"}})};
  for (const auto& e : threeSteps()) events.push_back(e);
  events.push_back(dash_test::parsed(
      {{"event", "restart"}, {"time", 1010.0}, {"attempt", 1}, {"max_restarts", 2},
       {"failed_rank", 2}, {"reason", "rank 2 was killed by signal 9 (SIGKILL)"},
       {"resume_from", "/runs/a/checkpoint-2"}, {"step", 2}}));
  events.push_back(dash_test::parsed({{"event", "start"}, {"time", 1011.0}, {"stage", "sft"}}));
  events.push_back(dash_test::stepEvent(3, 1.7, 1012.0));
  RunDashboard dash;
  dash.feed(QStringLiteral("restarted"), events);
  dash.flush();
  auto marks = [&](ChartKind kind) {
    QList<double> x;
    QStringList labels;
    QCustomPlot* plot = dash.plot(kind);
    for (int i = 0; i < plot->itemCount(); ++i) {
      if (plot->item(i)->objectName() != QStringLiteral("mark")) continue;
      if (auto* line = qobject_cast<QCPItemStraightLine*>(plot->item(i)))
        x << line->point1->coords().x();
      if (auto* text = qobject_cast<QCPItemText*>(plot->item(i))) labels << text->text();
    }
    return std::make_pair(x, labels);
  };
  for (ChartKind kind : {ChartKind::Loss, ChartKind::LearningRate, ChartKind::TokensPerSec}) {
    const auto [x, labels] = marks(kind);
    QCOMPARE(x, QList<double>{2.0});
    QCOMPARE(labels, QStringList{QStringLiteral("restart 1 (rank 2 failed)")});
  }
  const auto* facts = dash.findChild<QLabel*>(QStringLiteral("runFacts"));
  QVERIFY2(facts->text().contains(QStringLiteral("restarted 1 time(s), last after: rank 2 was "
                                                 "killed by signal 9 (SIGKILL)")),
           qPrintable(facts->text()));
  dash.setXAxis(studio::ui::XAxisMode::RelativeTime);
  QCOMPARE(marks(ChartKind::Loss).first, QList<double>{10.0});
  dash.setXAxis(studio::ui::XAxisMode::WallTime);
  QCOMPARE(marks(ChartKind::Loss).first, QList<double>{1010.0});
}

// Recorded runs' checkpoints and evaluations: a dashed line at each checkpoint's step and a
// dotted one at each evaluation's, on every chart, labelled while there are few; a resumed run
// (dpo-gpu2: killed after step 6, resumed from checkpoint-4) keeps only its timeline's.
void TestRunDashboard::checkpointsAndEvaluationsAreMarked_data() {
  QTest::addColumn<QString>("run");
  QTest::addColumn<QList<double>>("checkpoints");
  QTest::addColumn<QList<double>>("evals");
  QTest::addRow("sft-cpu") << QStringLiteral("sft-cpu") << QList<double>{30, 60}
                           << QList<double>{30, 60};
  QTest::addRow("dpo-gpu2, resumed") << QStringLiteral("dpo-gpu2") << QList<double>{4}
                                     << QList<double>{4, 8};
}
void TestRunDashboard::checkpointsAndEvaluationsAreMarked() {
  QFETCH(QString, run);
  QFETCH(QList<double>, checkpoints);
  QFETCH(QList<double>, evals);
  RunDashboard dash;
  dash.feed(run, dash_test::loadEvents(run));
  dash.flush();
  auto marks = [&](ChartKind kind, const QString& name) {
    QList<double> x;
    QStringList labels;
    QCustomPlot* plot = dash.plot(kind);
    for (int i = 0; i < plot->itemCount(); ++i) {
      if (plot->item(i)->objectName() != name) continue;
      if (auto* line = qobject_cast<QCPItemStraightLine*>(plot->item(i)))
        x << line->point1->coords().x();
      if (auto* text = qobject_cast<QCPItemText*>(plot->item(i))) labels << text->text();
    }
    return std::make_pair(x, labels);
  };
  for (ChartKind kind : {ChartKind::Loss, ChartKind::LearningRate, ChartKind::GradNorm}) {
    const auto [cx, clabels] = marks(kind, QStringLiteral("mark-checkpoint"));
    QCOMPARE(cx, checkpoints);
    QCOMPARE(clabels.size(), checkpoints.size());
    for (int i = 0; i < checkpoints.size(); ++i)
      QCOMPARE(clabels[i], QStringLiteral("checkpoint %1").arg(checkpoints[i]));
    const auto [ex, elabels] = marks(kind, QStringLiteral("mark-eval"));
    QCOMPARE(ex, evals);
    QCOMPARE(elabels.size(), evals.size());
    QVERIFY(marks(kind, QStringLiteral("mark")).first.isEmpty());  // no restart
    // Dashed and dotted, apart from a restart's line.
    QCustomPlot* plot = dash.plot(kind);
    for (int i = 0; i < plot->itemCount(); ++i)
      if (auto* line = qobject_cast<QCPItemStraightLine*>(plot->item(i)))
        QCOMPARE(line->pen().style(), line->objectName() == QStringLiteral("mark-checkpoint")
                                          ? Qt::DashLine
                                          : line->objectName() == QStringLiteral("mark-eval")
                                                ? Qt::DotLine
                                                : Qt::DashDotLine);
  }
}

// A 2-rank GPU run of 100 steps, 10 done at 2 s a step: the facts line says the ETA (90 steps x
// 2 s) and the last MFU; the activity chart draws each rank's utilisation and its power as a share
// of its limit, and hides while no run reports them.
void TestRunDashboard::mfuEtaAndGpuActivity() {
  std::vector<studio::Event> events;
  events.push_back(dash_test::parsed({{"event", "start"}, {"time", 1000.0}, {"world_size", 2},
                                      {"stage", "sft"}, {"total_steps", 100},
                                      {"device_name", "NVIDIA H100 80GB HBM3"},
                                      {"peak_tflops", 989.4}}));
  for (int step = 1; step <= 10; ++step) {
    nlohmann::json j = {{"event", "step"}, {"step", step}, {"loss", 2.0}, {"time", 1000.0 + 2 * step},
                        {"elapsed", 2.0 * step}, {"model_tflops", 400.0 + step},
                        {"mfu", (400.0 + step) / 989.4}};
    j["gpus"] = nlohmann::json::array();
    for (int rank = 0; rank < 2; ++rank)
      j["gpus"].push_back({{"rank", rank}, {"device", rank}, {"allocated_mib", 1000.0},
                           {"reserved_mib", 2000.0}, {"peak_mib", 1500.0}, {"total_mib", 81559.0},
                           {"util_percent", 90.0 + rank}, {"power_w", 350.0 + 10 * rank},
                           {"power_limit_w", 700.0}});
    events.push_back(dash_test::parsed(j));
  }
  RunDashboard dash;
  dash.feed(QStringLiteral("gpu-run"), events);
  dash.flush();
  const auto* facts = dash.findChild<QLabel*>(QStringLiteral("runFacts"));
  QVERIFY2(facts->text().contains(QStringLiteral("step 10 of 100, ETA 0:03:00")),
           qPrintable(facts->text()));
  QVERIFY2(facts->text().contains(QStringLiteral("MFU 41.4% (410 model TFLOP/s per rank of 989.4 "
                                                 "peak, NVIDIA H100 80GB HBM3)")),
           qPrintable(facts->text()));
  QVERIFY(dash.chartShown(ChartKind::GpuActivity));
  const auto graphs = dash.graphs(ChartKind::GpuActivity, QStringLiteral("gpu-run"));
  QCOMPARE(int(graphs.size()), 4);  // utilisation and power of two ranks
  QMap<QString, double> last;
  for (const QCPGraph* g : graphs) {
    QCOMPARE(g->data()->size(), 10);
    last[g->name()] = (g->data()->constEnd() - 1)->value;
  }
  QCOMPARE(last.value("gpu-run: rank 0 utilisation"), 90.0);
  QCOMPARE(last.value("gpu-run: rank 1 utilisation"), 91.0);
  QCOMPARE(last.value("gpu-run: rank 0 power"), 50.0);  // 350 W of 700
  QCOMPARE(last.value("gpu-run: rank 1 power"), 360.0 / 7.0);
  QCOMPARE(dash.plot(ChartKind::GpuActivity)->yAxis->range().upper, 105.0);

  // Once it ended, no ETA.
  dash.feed(QStringLiteral("gpu-run"),
            {dash_test::parsed({{"event", "end"}, {"state", "finished"}, {"reason", "done"}})});
  dash.flush();
  QVERIFY2(!facts->text().contains(QStringLiteral("ETA")), qPrintable(facts->text()));

  RunDashboard bare;
  bare.feed(QStringLiteral("bare"), threeSteps());
  bare.flush();
  QVERIFY(!bare.chartShown(ChartKind::GpuActivity));
}

// A CPU run has model TFLOP/s but no peak: the line says so and how to give one.
void TestRunDashboard::cpuRunNamesTheMissingPeak() {
  RunSeries series;
  series.ingest({dash_test::parsed({{"event", "start"}, {"time", 10.0}, {"device_name", "cpu"},
                                    {"peak_tflops", nullptr}, {"total_steps", 4}}),
                 dash_test::parsed({{"event", "step"}, {"step", 1}, {"time", 11.0},
                                    {"elapsed", 1.0}, {"model_tflops", 0.125}, {"mfu", nullptr}})});
  QCOMPARE(RunDashboard::utilisationText(series),
           QStringLiteral("0.125 model TFLOP/s per rank (MFU: no peak known for cpu; set "
                          "STUDIO_PEAK_TFLOPS)"));
  QCOMPARE(RunDashboard::etaText(series), QStringLiteral("step 1 of 4, ETA 0:00:03"));
  RunSeries none;
  none.ingest({dash_test::stepEvent(1, 2.0, 5.0)});
  QVERIFY(RunDashboard::utilisationText(none).isEmpty());
  QVERIFY(RunDashboard::etaText(none).isEmpty());  // no total_steps
}

QTEST_MAIN(TestRunDashboard)
#include "tst_run_dashboard.moc"
