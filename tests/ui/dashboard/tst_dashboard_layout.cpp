// RunDashboard's layout on the offscreen platform: charts reached and moved with the keyboard,
// rearranged and enlarged (and so again at the next start), and the time-per-rank view below
// the charts in windows short and tall.
#include <QAbstractButton>
#include <QGridLayout>
#include <QScopeGuard>
#include <QScrollArea>
#include <QSettings>
#include <QStackedWidget>
#include <QtTest>
#include <qcustomplot.h>

#include <cmath>

#include "dashboard_test_support.h"
#include "studio/ui/dashboard/chart_kind.h"
#include "studio/ui/dashboard/rank_time_view.h"
#include "studio/ui/dashboard/run_dashboard.h"

using studio::ui::ChartKind;
using studio::ui::RunDashboard;

class TestDashboardLayout : public QObject {
  Q_OBJECT

 private slots:
  void keyboardOnTheCharts_data();
  void keyboardOnTheCharts();
  void rearrangeAndEnlarge();
  void rankTimesBelowTheCharts_data();
  void rankTimesBelowTheCharts();
};

// Tab reaches each chart (named as its title, its keys in its description); the keys pan and
// zoom it like a drag or a wheel (the other charts' x axes follow) and 0 fits it again.
void TestDashboardLayout::keyboardOnTheCharts_data() {
  QTest::addColumn<int>("key");
  QTest::addColumn<double>("lowerShift");  // of the x range, in tenths of its size
  QTest::addColumn<double>("sizeFactor");
  QTest::newRow("Right pans right") << int(Qt::Key_Right) << 1.0 << 1.0;
  QTest::newRow("Left pans left") << int(Qt::Key_Left) << -1.0 << 1.0;
  QTest::newRow("+ zooms in") << int(Qt::Key_Plus) << 1.0 << 0.8;
  QTest::newRow("= zooms in (unshifted +)") << int(Qt::Key_Equal) << 1.0 << 0.8;
  QTest::newRow("- zooms out") << int(Qt::Key_Minus) << -1.25 << 1.25;
}

void TestDashboardLayout::keyboardOnTheCharts() {
  QFETCH(int, key);
  QFETCH(double, lowerShift);
  QFETCH(double, sizeFactor);
  RunDashboard dash;
  dash.feed(QStringLiteral("sft"), dash_test::loadEvents(QStringLiteral("sft-cpu")));
  dash.flush();
  QCustomPlot* loss = dash.plot(ChartKind::Loss);
  QVERIFY(loss->focusPolicy() & Qt::TabFocus);
  QCOMPARE(loss->accessibleName(), chartTitle(ChartKind::Loss));
  QVERIFY(loss->accessibleDescription().contains(QStringLiteral("menu key")));
  QCOMPARE(loss->contextMenuPolicy(), Qt::CustomContextMenu);  // the menu key opens it
  loss->resize(600, 400);
  loss->replot();
  const QCPRange before = loss->xAxis->range();
  QTest::keyClick(loss, Qt::Key(key));
  const QCPRange after = loss->xAxis->range();
  QVERIFY2(std::abs(after.size() - before.size() * sizeFactor) < 1e-9 * before.size(),
           qPrintable(QStringLiteral("%1 -> %2").arg(before.size()).arg(after.size())));
  QVERIFY2(std::abs((after.lower - before.lower) - lowerShift * before.size() / 10) < 1e-9 * before.size(),
           qPrintable(QStringLiteral("%1 -> %2").arg(before.lower).arg(after.lower)));
  const QCPRange linked = dash.plot(ChartKind::GradNorm)->xAxis->range();
  QCOMPARE(linked.lower, after.lower);
  QCOMPARE(linked.upper, after.upper);
  // New data does not undo it (the user moved the chart); 0 fits it to the data again.
  dash.feed(QStringLiteral("sft"), {dash_test::stepEvent(1000, 1.0, 1000)});
  dash.flush();
  QCOMPARE(loss->xAxis->range().upper, after.upper);
  QTest::keyClick(loss, Qt::Key_0);
  QVERIFY(loss->xAxis->range().upper >= 1000.0);
  // Up moves the value axis, not the x axis.
  const QCPRange x = loss->xAxis->range(), y = loss->yAxis->range();
  QTest::keyClick(loss, Qt::Key_Up);
  QCOMPARE(loss->xAxis->range().lower, x.lower);
  QVERIFY(std::abs(loss->yAxis->range().lower - (y.lower + y.size() / 10)) < 1e-9 * y.size());
  // Keys with Ctrl are the window's shortcuts, not the chart's.
  QTest::keyClick(loss, Qt::Key_Right, Qt::ControlModifier);
  QCOMPARE(loss->xAxis->range().lower, x.lower);
}

// Charts moved from their context menu and enlarged from their title bar: the grid follows, and
// the next dashboard (the next start) comes back the same.
void TestDashboardLayout::rearrangeAndEnlarge() {
  QSettings().remove(QStringLiteral("dashboard"));
  auto cleanup = qScopeGuard([] { QSettings().remove(QStringLiteral("dashboard")); });
  auto position = [](RunDashboard& dash, ChartKind kind) {
    QWidget* panel = dash.plot(kind)->parentWidget()->parentWidget();  // plot, stack, panel
    auto* grid = qobject_cast<QGridLayout*>(panel->parentWidget()->layout());
    int row = -1, col = -1, rs = 0, cs = 0;
    if (grid) grid->getItemPosition(grid->indexOf(panel), &row, &col, &rs, &cs);
    return QPoint(col, row);
  };
  {
    RunDashboard dash;
    dash.feed(QStringLiteral("sft"), dash_test::loadEvents(QStringLiteral("sft-cpu")));
    dash.flush();
    QCOMPARE(position(dash, ChartKind::Memory), QPoint(2, 0));
    QCOMPARE(position(dash, ChartKind::LearningRate), QPoint(0, 1));
    dash.moveChart(ChartKind::Memory, -1);  // before tokens/s
    QCOMPARE(position(dash, ChartKind::Memory), QPoint(1, 0));
    QCOMPARE(position(dash, ChartKind::TokensPerSec), QPoint(2, 0));
    // Enlarge from the title bar: the memory chart alone, across the whole width.
    auto* enlarge = dash.findChild<QAbstractButton*>(QStringLiteral("memory-enlarge"));
    QVERIFY(enlarge);
    enlarge->click();
    QCOMPARE(dash.enlargedChart(), std::optional<ChartKind>(ChartKind::Memory));
    QVERIFY(dash.plot(ChartKind::Memory)->isVisibleTo(&dash));
    QVERIFY(!dash.plot(ChartKind::Loss)->parentWidget()->parentWidget()->isVisibleTo(&dash));
    QVERIFY(dash.chartShown(ChartKind::Loss));  // hidden by the user, not by the run's kind
  }
  {
    RunDashboard again;  // the next start
    QCOMPARE(again.enlargedChart(), std::optional<ChartKind>(ChartKind::Memory));
    QCOMPARE(again.chartOrder()[1], ChartKind::Memory);
    again.setEnlargedChart(std::nullopt);
    QCOMPARE(position(again, ChartKind::Memory), QPoint(1, 0));
    QVERIFY(again.plot(ChartKind::Loss)->parentWidget()->parentWidget()->isVisibleTo(&again));
  }
}

// Two ranks' times under the charts, in windows short and tall: the charts keep rows of 300 px
// or the whole visible height (the view then lies below, scrolled to); in a tall window both
// show at once. A chart enlarged from any grid cell is drawn across the whole width, never at
// its cell's old size in that cell's corner.
void TestDashboardLayout::rankTimesBelowTheCharts_data() {
  QTest::addColumn<int>("height");
  QTest::addColumn<int>("enlarged");  // a ChartKind, or -1
  QTest::newRow("short window") << 560 << -1;
  QTest::newRow("medium window") << 770 << -1;  // where the view used to squeeze the rows
  QTest::newRow("tall window") << 1500 << -1;
  QTest::newRow("short, memory (top right) enlarged") << 560 << int(ChartKind::Memory);
  QTest::newRow("tall, straggler (third row) enlarged") << 1500 << int(ChartKind::Straggler);
}

void TestDashboardLayout::rankTimesBelowTheCharts() {
  QFETCH(int, height);
  QFETCH(int, enlarged);
  QSettings().remove(QStringLiteral("dashboard"));
  auto cleanup = qScopeGuard([] { QSettings().remove(QStringLiteral("dashboard")); });
  RunDashboard dash;
  std::vector<studio::Event> events;
  for (int step = 1; step <= 6; ++step) {
    nlohmann::json j = {{"event", "step"}, {"step", step}, {"loss", 2.0 - 0.1 * step},
                        {"elapsed", 0.1 * step}, {"tokens_per_sec", 1000.0}};
    j["rank_times"] = nlohmann::json::array(
        {{{"rank", 0}, {"compute_s", 0.05}, {"sp_comm_s", 0.01}, {"grad_comm_s", 0.005},
          {"data_s", 0.001}, {"wait_s", step == 3 ? 0.04 : 0.002}},
         {{"rank", 1}, {"compute_s", step == 3 ? 0.09 : 0.05}, {"sp_comm_s", 0.01},
          {"grad_comm_s", 0.005}, {"data_s", 0.001}, {"wait_s", 0.002}}});
    events.push_back(dash_test::parsed(j));
  }
  dash.feed(QStringLiteral("two-ranks"), events);
  dash.resize(1200, height);
  dash.show();
  QVERIFY(QTest::qWaitForWindowExposed(&dash));
  dash.flush();
  auto* view = dash.rankTimeView();
  QTRY_VERIFY(view->isVisible());
  auto* area = dash.findChild<QScrollArea*>(QStringLiteral("chartsArea"));
  QVERIFY(area);
  QWidget* grid = dash.plot(ChartKind::Loss)->parentWidget()->parentWidget()->parentWidget();
  // Two rows of charts: loss, tokens/s, memory; learning rate, gradient norm, straggler.
  const int rows = 2;
  QTRY_VERIFY2(grid->height() >= std::min(area->viewport()->height(), rows * 300),
               qPrintable(QString("charts %1 px tall in a viewport of %2")
                              .arg(grid->height())
                              .arg(area->viewport()->height())));
  if (height >= 1500) {  // room for both: the view in sight without scrolling
    QVERIFY(view->mapTo(area->viewport(), QPoint(0, view->height())).y() <= area->viewport()->height());
  }
  QTRY_VERIFY2(view->mapTo(area->widget(), QPoint(0, 0)).y() > grid->geometry().bottom(),
               qPrintable(QString("view at y %1, charts %2..%3, viewport %4")
                              .arg(view->mapTo(area->widget(), QPoint(0, 0)).y())
                              .arg(grid->geometry().top())
                              .arg(grid->geometry().bottom())
                              .arg(area->viewport()->height())));
  dash.revealRankTimes();
  auto shownOfView = [&] {
    const QRect inViewport(view->mapTo(area->viewport(), QPoint(0, 0)), view->size());
    return inViewport.intersected(area->viewport()->rect()).height();
  };
  QTRY_VERIFY2(shownOfView() >= std::min(view->height(), area->viewport()->height()) * 9 / 10,
               qPrintable(QString("%1 px of the view shown, %2 tall, viewport %3")
                              .arg(shownOfView())
                              .arg(view->height())
                              .arg(area->viewport()->height())));
  if (enlarged < 0) return;

  const auto kind = static_cast<ChartKind>(enlarged);
  dash.setEnlargedChart(kind);
  QCOMPARE(dash.enlargedChart(), std::optional<ChartKind>(kind));
  QVERIFY(!view->isVisibleTo(&dash));  // one chart alone fills the area
  QCustomPlot* plot = dash.plot(kind);
  auto* stack = qobject_cast<QStackedWidget*>(plot->parentWidget());
  QVERIFY(stack);
  // What the panel shows (the chart, or the text saying why there is none) fills the whole
  // width at once, as the replot right after the enlarge draws it, and after the next events;
  // and the chart drawn there has the size it is drawn at.
  auto fills = [&](const char* when) {
    QWidget* shown = stack->currentWidget();
    QVERIFY2(shown->width() >= area->viewport()->width() * 9 / 10,
             qPrintable(QString("%1: %2 of %3").arg(when).arg(shown->width()).arg(area->viewport()->width())));
    QVERIFY(shown->mapTo(area->widget(), QPoint(0, 0)).x() < 40);
    if (shown == plot) QCOMPARE(plot->viewport(), plot->rect());
  };
  fills("at once");
  QTest::qWait(50);
  fills("after the events");
  // A chart that had nothing to draw when enlarged (no memory readings yet) gets its data:
  // drawn across the whole width, not at the grid cell's size it last had.
  nlohmann::json more = {{"event", "step"}, {"step", 7}, {"loss", 1.0}, {"elapsed", 0.7}};
  more["gpus"] = nlohmann::json::array(
      {{{"rank", 0}, {"device", 0}, {"allocated_mib", 100}, {"reserved_mib", 120}, {"total_mib", 81559}}});
  dash.feed(QStringLiteral("two-ranks"), {dash_test::parsed(more)});
  dash.flush();
  QVERIFY(dash.chartHasPlot(kind));
  fills("with data");
  // Back to the grid: the view below the charts again.
  dash.setEnlargedChart(std::nullopt);
  QTRY_VERIFY(view->isVisible());
  QTRY_VERIFY(grid->height() >= std::min(area->viewport()->height(), rows * 300));
}

QTEST_MAIN(TestDashboardLayout)
#include "tst_dashboard_layout.moc"
