// Runs compared by what differs: the config keys whose values differ (nested keys dotted, a key
// one run lacks included, output_dir left out), final and best train/eval losses side by side,
// the CSV, and the studio's Compare: two runs selected in the list, overlaid on the dashboard,
// the table filled off the GUI thread, exported as CSV and PNG.
#include <QAction>
#include <QFile>
#include <QHeaderView>
#include <QImage>
#include <QItemSelectionModel>
#include <QSignalSpy>
#include <QTableView>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QtTest>

#include "runs_test_support.h"
#include "studio/ui/dashboard/run_dashboard.h"
#include "studio/ui/main_window.h"
#include "studio/ui/runs/run_comparison.h"
#include "studio/ui/runs/run_store.h"
#include "studio/ui/runs/runs_model.h"
#include "studio/ui/shell/comparison_dialog.h"
#include "studio/ui/shell/runs_panel.h"

using studio::ui::compareRuns;
using studio::ui::RunComparison;

class TestRunComparison : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir root_;

  QString writeRun(const QString& name, const nlohmann::json& config, std::vector<double> losses,
                   std::vector<double> evals, double time) {
    const QString dir = root_.filePath(name);
    if (!QDir().mkpath(dir)) return {};
    runs_test::writeStatus(dir, studio::RunState::Finished, 4242);
    auto start = runs_test::startEvent(time);
    start.config = config;
    runs_test::appendEvents(dir, start);
    for (size_t i = 0; i < losses.size(); ++i)
      runs_test::appendEvents(dir, runs_test::stepEvent(static_cast<long long>(i + 1) * 10, losses[i],
                                                        time + double(i) + 1));
    for (size_t i = 0; i < evals.size(); ++i) {
      studio::EvalEvent e;
      e.step = static_cast<long long>(i + 1) * 10;
      e.loss = evals[i];
      runs_test::appendEvents(dir, e);
    }
    return dir;
  }

  QStringList dirs_;

 private slots:
  void initTestCase() {
    QVERIFY(root_.isValid());
    dirs_ << writeRun(QStringLiteral("sp1"),
                      {{"learning_rate", 1e-5}, {"sequence_parallel_size", 1}, {"cutoff_len", 4096},
                       {"output_dir", "/runs/sp1"}, {"lr_scheduler_kwargs", {{"min_lr_rate", 0.1}}}},
                      {3.0, 2.0, 2.5}, {2.8, 2.6}, 1.8e9);
    dirs_ << writeRun(QStringLiteral("sp2"),
                      {{"learning_rate", 1e-5}, {"sequence_parallel_size", 2}, {"cutoff_len", 4096},
                       {"output_dir", "/runs/sp2"}, {"lr_scheduler_kwargs", {{"min_lr_rate", 0.2}}}},
                      {3.0, 1.5, 1.75}, {2.7}, 1.8e9 + 100);
    dirs_ << writeRun(QStringLiteral("sp4, lr 2e-5"),
                      {{"learning_rate", 2e-5}, {"sequence_parallel_size", 4}, {"cutoff_len", 4096},
                       {"output_dir", "/runs/sp4"}},
                      {2.9, 2.2}, {}, 1.8e9 + 200);
    for (const QString& d : dirs_) QVERIFY(!d.isEmpty());
    // A line another writer broke costs only itself.
    runs_test::appendRaw(dirs_[2], "events.jsonl", "{\"event\": \"step\", \"step\": \n");
  }

  void differingKeysAndLosses() {
    const RunComparison c = compareRuns(dirs_);
    QCOMPARE(c.runs.size(), qsizetype(3));
    QCOMPARE(c.differing, (QStringList{"learning_rate", "lr_scheduler_kwargs.min_lr_rate",
                                       "sequence_parallel_size"}));
    QCOMPARE(c.value(2, QStringLiteral("lr_scheduler_kwargs.min_lr_rate")), QStringLiteral("(unset)"));
    QCOMPARE(c.runs[0].finalLoss, 2.5);
    QCOMPARE(c.runs[0].bestLoss, 2.0);
    QCOMPARE(c.runs[0].finalEvalLoss, 2.6);
    QCOMPARE(c.runs[1].bestLoss, 1.5);
    QCOMPARE(c.runs[1].bestEvalLoss, 2.7);
    QVERIFY(std::isnan(c.runs[2].finalEvalLoss));
    QCOMPARE(c.runs[2].steps, qint64(20));
    QCOMPARE(c.toCsv(), QStringLiteral(
                            "key,sp1,sp2,\"sp4, lr 2e-5\"\n"
                            "final loss,2.5,1.75,2.2\n"
                            "best loss,2,1.5,2.2\n"
                            "final eval loss,2.6,2.7,\n"
                            "best eval loss,2.6,2.7,\n"
                            "steps,30,30,20\n"
                            "learning_rate,1e-05,1e-05,2e-05\n"
                            "lr_scheduler_kwargs.min_lr_rate,0.1,0.2,(unset)\n"
                            "sequence_parallel_size,1,2,4\n"));
    // The same config twice: nothing differs.
    QVERIFY(compareRuns({dirs_[0], dirs_[0]}).differing.isEmpty());
  }

  // Two runs selected in the list (Ctrl-click), Compare: overlaid, tabulated, exported.
  void compareFromTheRunsList() {
    studio::ui::StudioPaths paths;
    paths.runsRoot = root_.path();
    studio::ui::MainWindow window(paths);
    window.show();
    QVERIFY(QTest::qWaitForWindowExposed(&window));
    studio::ui::RunsPanel* panel = window.runsPanel();
    auto rowOf = [&](const QString& dir) {
      for (int row = 0; row < panel->view()->model()->rowCount(); ++row)
        if (panel->view()->model()->index(row, 0).data(studio::ui::RunsModel::DirRole) == dir) return row;
      return -1;
    };
    QTRY_VERIFY_WITH_TIMEOUT(rowOf(dirs_[0]) >= 0 && rowOf(dirs_[1]) >= 0, 10000);
    QAction* compare = panel->compareAction();
    QVERIFY(!compare->isEnabled());
    QTableView* view = panel->view();
    auto click = [&](int row, Qt::KeyboardModifiers mods) {
      const QRect r = view->visualRect(view->model()->index(row, 0));
      QTest::mouseClick(view->viewport(), Qt::LeftButton, mods, r.center());
    };
    click(rowOf(dirs_[0]), Qt::NoModifier);
    QVERIFY(!compare->isEnabled());
    click(rowOf(dirs_[1]), Qt::ControlModifier);
    QVERIFY(compare->isEnabled());
    QCOMPARE(panel->selectedRuns().size(), 2);
    QSignalSpy opened(&window, &studio::ui::MainWindow::comparisonOpened);
    compare->trigger();
    QCOMPARE(opened.size(), 1);
    auto* dialog = opened[0][0].value<studio::ui::ComparisonDialog*>();
    QVERIFY(dialog);
    QTRY_VERIFY_WITH_TIMEOUT(dialog->isLoaded(), 10000);
    // Both runs on the dashboard's charts.
    const QStringList shown = window.dashboard()->runs();
    QVERIFY2(shown.contains(dirs_[0]) && shown.contains(dirs_[1]), qPrintable(shown.join(", ")));
    // The table: 5 loss rows and the 2 keys that differ between sp1 and sp2.
    QTableWidget* table = dialog->table();
    QCOMPARE(table->columnCount(), 2);
    QCOMPARE(table->rowCount(), 7);
    QCOMPARE(table->verticalHeaderItem(5)->text(), QStringLiteral("lr_scheduler_kwargs.min_lr_rate"));
    QCOMPARE(table->verticalHeaderItem(6)->text(), QStringLiteral("sequence_parallel_size"));
    QTemporaryDir out;
    QString error;
    const QString csv = out.filePath(QStringLiteral("comparison.csv"));
    QVERIFY2(dialog->exportCsv(csv, &error), qPrintable(error));
    QFile f(csv);
    QVERIFY(f.open(QIODevice::ReadOnly));
    QCOMPARE(QString::fromUtf8(f.readAll()), dialog->comparison().toCsv());
    QWidget* chart = window.dashboard()->findChild<QWidget*>(QStringLiteral("loss"));
    QVERIFY(chart);
    const QSize onDashboard = chart->size();
    const QString png = out.filePath(QStringLiteral("comparison.png"));
    QVERIFY2(dialog->exportPng(png, &error), qPrintable(error));
    const QImage image(png);
    QVERIFY(!image.isNull());
    // Drawn off screen at a readable size: the chart on the dashboard keeps its own.
    QCOMPARE(chart->size(), onDashboard);
    QVERIFY2(image.width() >= 720, qPrintable(QString::number(image.width())));
    // The loss chart above the whole table.
    QVERIFY(image.width() >= chart->width());
    QVERIFY(image.height() > chart->height() + table->rowCount() * table->verticalHeader()->defaultSectionSize());
    // An unwritable path: a clear error, nothing half-written.
    QVERIFY(!dialog->exportCsv(QStringLiteral("/nonexistent/dir/c.csv"), &error));
    QVERIFY2(error.contains(QStringLiteral("/nonexistent/dir/c.csv")), qPrintable(error));
    dialog->close();
  }
};

QTEST_MAIN(TestRunComparison)
#include "tst_run_comparison.moc"
