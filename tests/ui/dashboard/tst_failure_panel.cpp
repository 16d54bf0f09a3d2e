// The failure panel of the run dashboard: a failed run's folder opens on its cause.
#include <QDir>
#include <QFile>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include <nlohmann/json.hpp>

#include "studio/ui/dashboard/failure_panel.h"
#include "studio/ui/dashboard/run_dashboard.h"

using studio::ui::RunDashboard;

class TestFailurePanel : public QObject {
  Q_OBJECT

 private slots:
  void failedRunOpensOnItsCause_data();
  void failedRunOpensOnItsCause();
};

// A failed run's folder (events.jsonl ending in a failure, train.log with the launcher's rank
// tags) opens on its cause above the charts: rank, step and phase, what to change, and the
// failing rank's last log lines (read off the GUI thread); a config error offers the config at
// its line. A finished run shows no panel.
void TestFailurePanel::failedRunOpensOnItsCause_data() {
  QTest::addColumn<QString>("state");
  QTest::addColumn<QString>("reason");
  QTest::addColumn<QString>("headline");
  QTest::addColumn<QString>("change");
  QTest::addColumn<QString>("logLine");
  QTest::addRow("out of memory")
      << "failed"
      << "rank 1 exited with code 1: studio-train train: out of memory on rank 1 at step 3, in "
         "the backward of micro-batch 2 of 2: CUDA out of memory. Tried to allocate 2.00 GiB. The "
         "memory estimate for this run is 70.1 GiB per rank of the GPU's 79.1 GiB; what lowers "
         "it (studio-train estimate shows each): sequence_parallel_size: 4, cutoff_len: 24576"
      << "Failed (out of memory) on rank 1 at step 3, in the backward of micro-batch 2 of 2"
      << "• sequence_parallel_size: 4" << "rank 1 line 2";
  QTest::addRow("killed") << "failed" << "rank 0 was killed by signal 9 (SIGKILL)"
                          << "Failed (killed by a signal) on rank 0 after step 2 (the last one logged)"
                          << "out-of-memory killer" << "rank 0 line 2";
  QTest::addRow("config error")
      << "failed" << "config.yaml:4:13: cutoff_len: expected a whole number, got 'abc'"
      << "Failed (config error) after step 2 (the last one logged)"
      << "• cutoff_len on line 4 of config.yaml" << "rank 0 line 2";
  QTest::addRow("finished") << "finished" << "trained 2 steps" << "" << "" << "";
}
void TestFailurePanel::failedRunOpensOnItsCause() {
  QFETCH(QString, state);
  QFETCH(QString, reason);
  QFETCH(QString, headline);
  QFETCH(QString, change);
  QFETCH(QString, logLine);
  QTemporaryDir dir;
  {
    QFile events(dir.filePath("events.jsonl"));
    QVERIFY(events.open(QIODevice::WriteOnly));
    for (const nlohmann::json& e :
         {nlohmann::json{{"event", "start"}, {"time", 1000.0}, {"stage", "sft"}, {"world_size", 2}},
          nlohmann::json{{"event", "step"}, {"step", 1}, {"loss", 2.0}, {"time", 1001.0}},
          nlohmann::json{{"event", "step"}, {"step", 2}, {"loss", 1.9}, {"time", 1002.0}},
          nlohmann::json{{"event", "end"}, {"state", state.toStdString()},
                         {"reason", reason.toStdString()}}})
      events.write(QByteArray::fromStdString(e.dump()) + '\n');
    QFile log(dir.filePath("train.log"));
    QVERIFY(log.open(QIODevice::WriteOnly));
    log.write("studio-train: launching 2 workers\nrank 0 line 1\n[rank 1] rank 1 line 1\n"
              "[##########--] 2/3\nrank 0 line 2\n[rank 1] rank 1 line 2\n"
              "[launcher] rank 1 exited with code 1\n");
    QFile config(dir.filePath("config.yaml"));
    QVERIFY(config.open(QIODevice::WriteOnly));
    config.write("model_name_or_path: m\nstage: sft\ndo_train: true\ncutoff_len: abc\n");
  }
  RunDashboard dash;
  dash.resize(1200, 900);
  dash.show();
  auto* panel = dash.failurePanel();
  QSignalSpy logRead(panel, &studio::ui::FailurePanel::logRead);
  dash.showRun(dir.path());
  QTRY_VERIFY(dash.series(QDir::cleanPath(dir.path())) &&
              dash.series(QDir::cleanPath(dir.path()))->facts().ended);
  dash.flush();
  if (state != QStringLiteral("failed")) {
    QVERIFY(panel->isHidden());
    return;
  }
  QVERIFY(panel->isVisible());
  QCOMPARE(panel->headline(), headline);
  QVERIFY2(panel->changesText().contains(change), qPrintable(panel->changesText()));
  QTRY_VERIFY(logRead.count() >= 1);
  QVERIFY2(panel->logText().endsWith(logLine), qPrintable(panel->logText()));
  QVERIFY(!panel->logText().contains(QStringLiteral("[launcher]")));
  // The panel sits above the charts: the first thing under the facts line.
  QVERIFY(panel->mapTo(&dash, QPoint(0, 0)).y() <
          dash.findChild<QWidget*>(QStringLiteral("chartsArea"))->mapTo(&dash, QPoint(0, 0)).y());
  auto* open = panel->findChild<QPushButton*>(QStringLiteral("failureOpenConfig"));
  if (!reason.startsWith(QStringLiteral("config.yaml"))) {
    QVERIFY(open->isHidden());
    return;
  }
  QVERIFY(open->isVisible());
  QSignalSpy opened(&dash, &RunDashboard::openConfigRequested);
  open->click();
  QCOMPARE(opened.count(), 1);
  QCOMPARE(opened[0][0].toString(), QDir(dir.path()).filePath("config.yaml"));
  QCOMPARE(opened[0][1].toInt(), 4);
  QCOMPARE(opened[0][2].toInt(), 13);
}

QTEST_MAIN(TestFailurePanel)
#include "tst_failure_panel.moc"
