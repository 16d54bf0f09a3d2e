// A failed run opens on its cause, end to end: real 2-process studio-train runs fail (an
// out-of-memory error injected on rank 1 at step 3, rank 1 SIGKILLed at step 3), their output
// goes to the run folder's train.log as the studio's launcher sends it, and the dashboard
// reading the folder names the rank, the step and the phase, what to change (the engine's own
// estimator suggestions) and the failing rank's last log lines.
#include <QtCore/QTemporaryDir>
#include <QtTest/QtTest>
#include <QtWidgets/QApplication>
#include <QtWidgets/QPushButton>

#include "studio/ui/dashboard/failure_panel.h"
#include "studio/ui/dashboard/run_dashboard.h"
#include "train_runs.h"

namespace {
const QString kSource = QStringLiteral(STUDIO_SOURCE_DIR);
}

class TestRunCauseLive : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString model_;

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    model_ = train_runs::make_tiny_model(dir_.path(), train_runs::TinyModel{});
    QVERIFY(!model_.isEmpty());
  }

  void failedRunOpensOnItsCause_data() {
    QTest::addColumn<QString>("fault");
    QTest::addColumn<QString>("badLine");  // a config line that fails validation, or ""
    QTest::addColumn<QString>("headline");
    QTest::addColumn<QString>("change");
    QTest::addColumn<QString>("logLine");
    QTest::addRow("out of memory")
        << "oom@3#1" << "" << "Failed (out of memory) on rank 1 at step 3, in the forward of micro-batch 1 of 1"
        << "• ZeRO stage 3 (zero_stage: 3)" << "out of memory on rank 1 at step 3";
    QTest::addRow("killed") << "crash@3#1" << ""
                            << "Failed (killed by a signal) on rank 1 after step 2 (the last one logged)"
                            << "out-of-memory killer" << "";
    // The studio's launch folder (it exists, no events yet) and a config it cannot run.
    QTest::addRow("config error") << "" << "cutoff_len: abc" << "Failed (config error)"
                                  << "• cutoff_len on line 8 of" << "cutoff_len: expected";
  }
  void failedRunOpensOnItsCause() {
    QFETCH(QString, fault);
    QFETCH(QString, badLine);
    QFETCH(QString, headline);
    QFETCH(QString, change);
    QFETCH(QString, logLine);
    const QString out =
        dir_.filePath(fault.isEmpty() ? QStringLiteral("bad-config")
                                      : QString(fault).replace('@', '-').replace('#', '-'));
    QDir().mkpath(out);
    const QString config = train_runs::write_yaml(
        out + "/config.yaml",
        {"model_name_or_path: " + model_, "stage: sft", "do_train: true",
         "finetuning_type: full", "dataset: demo_sft",
         "dataset_dir: " + kSource + "/resources/demo/data", "template: qwen", "cutoff_len: 64",
         "max_samples: 64", "output_dir: " + out, "logging_steps: 1", "save_steps: 100",
         "per_device_train_batch_size: 2", "max_steps: 5", "eval_strategy: 'no'",
         "sequence_parallel_size: 2",
         // As the studio's launch folder: config.yaml and train.log are already there.
         "overwrite_output_dir: true"},
        badLine.isEmpty() ? QStringList{} : QStringList{badLine});
    QProcess p;
    auto env = QProcessEnvironment::systemEnvironment();
    if (!fault.isEmpty()) env.insert("STUDIO_INJECT_FAULT", fault);
    p.setProcessEnvironment(env);
    p.setStandardOutputFile(out + "/train.log", QIODevice::Append);
    p.setStandardErrorFile(out + "/train.log", QIODevice::Append);
    p.start(QStringLiteral(STUDIO_TRAIN_EXE), {"train", config, "--nproc", "2"});
    QVERIFY(p.waitForFinished(300000));
    QVERIFY(p.exitCode() != 0);

    studio::ui::RunDashboard dash;
    dash.resize(1200, 900);
    dash.show();
    auto* panel = dash.failurePanel();
    QSignalSpy logRead(panel, &studio::ui::FailurePanel::logRead);
    dash.showRun(out);
    QTRY_VERIFY_WITH_TIMEOUT(dash.series(QDir::cleanPath(out)) &&
                                 dash.series(QDir::cleanPath(out))->facts().ended,
                             20000);
    dash.flush();
    QVERIFY(panel->isVisible());
    QCOMPARE(panel->headline(), headline);
    QVERIFY2(panel->changesText().contains(change), qPrintable(panel->changesText()));
    QTRY_VERIFY(logRead.count() >= 1);
    if (!logLine.isEmpty())
      QVERIFY2(panel->logText().contains(logLine), qPrintable(panel->logText()));
    QVERIFY2(!panel->logText().isEmpty(), "the failing rank's log");
    if (badLine.isEmpty()) return;
    // The config at the failing line.
    QSignalSpy opened(&dash, &studio::ui::RunDashboard::openConfigRequested);
    auto* open = panel->findChild<QPushButton*>(QStringLiteral("failureOpenConfig"));
    QVERIFY(open && open->isVisible());
    open->click();
    QCOMPARE(opened.count(), 1);
    QCOMPARE(QFileInfo(opened[0][0].toString()).canonicalFilePath(),
             QFileInfo(config).canonicalFilePath());
    QCOMPARE(opened[0][1].toInt(), 8);
  }
};

QTEST_MAIN(TestRunCauseLive)
#include "tst_run_cause_live.moc"
