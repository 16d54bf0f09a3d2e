// A diverged Hugging Face Trainer run, for real (issue #35 item 1): transformers trains a tiny
// random Llama on the CPU with a learning rate of 1e30 (tests/ui/dashboard/data/
// diverge_trainer.py), and its checkpoints' trainer_state.json hold "grad_norm": NaN as Python's
// json writes it. The studio reads the folder (before, the whole file was "not valid JSON": no
// curve, state Unknown): every step is on the charts, the diverged steps' gradient norms are
// marks at the foot of the chart, and the run is finished at step 8 of 8.
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>

#include <qcustomplot.h>

#include "studio/ui/dashboard/run_dashboard.h"
#include "studio/ui/dashboard/run_series.h"
#include "studio/ui/runs/run_info.h"

using namespace studio::ui;

class TestDivergedTrainerRun : public QObject {
  Q_OBJECT

 private slots:
  void nanGradNormsAreMarked() {
    QTemporaryDir tmp;
    QVERIFY(tmp.isValid());
    const QString out = tmp.filePath(QStringLiteral("run"));
    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.start(QStringLiteral(STUDIO_PYTHON),
            {QStringLiteral(DASHBOARD_TEST_DATA_DIR "/diverge_trainer.py"), out});
    QVERIFY2(p.waitForFinished(240000), "transformers' Trainer did not end in 4 minutes");
    QVERIFY2(p.exitCode() == 0, p.readAll().right(3000).constData());
    QFile state(out + "/checkpoint-8/trainer_state.json");
    QVERIFY(state.open(QIODevice::ReadOnly));
    const QByteArray text = state.readAll();
    QVERIFY2(text.contains("\"grad_norm\": NaN"), text.left(2000).constData());

    const RunInfo info = readRunInfo(out);
    QCOMPARE(info.state, RunState::Finished);
    QCOMPARE(info.lastStep, qint64(8));

    RunDashboard dash;
    dash.resize(1200, 800);
    dash.showRun(out);
    QTRY_VERIFY_WITH_TIMEOUT(dash.series(out) && dash.series(out)->size() == 8, 20000);
    dash.flush();
    const RunSeries& s = *dash.series(out);
    QVERIFY(std::isfinite(s.values(Metric::GradNorm)[0]));
    QCOMPARE(int(s.notFiniteAt(Metric::GradNorm, 0)), 0);
    for (std::size_t row = 1; row < 8; ++row) {
      QVERIFY(std::isnan(s.values(Metric::GradNorm)[row]));
      QCOMPARE(int(s.notFiniteAt(Metric::GradNorm, row)), 1);
    }
    // The learning rate and the loss of the same entries are all there.
    for (std::size_t row = 0; row < 8; ++row) {
      QVERIFY(std::isfinite(s.values(Metric::LearningRate)[row]));
      QVERIFY(std::isfinite(s.values(Metric::Loss)[row]));
    }

    QCPGraph* marks = nullptr;
    QCPGraph* line = nullptr;
    for (QCPGraph* g : dash.graphs(ChartKind::GradNorm, out))
      (g->valueAxis() == g->parentPlot()->yAxis2 ? marks : line) = g;
    QVERIFY(marks != nullptr && line != nullptr);
    QCOMPARE(marks->data()->size(), 7);
    for (int i = 0; i < 7; ++i) QCOMPARE(marks->data()->at(i)->key, double(i + 2));
    QCOMPARE(line->data()->size(), 1);  // step 1's norm; nothing drawn as a gap
    const QString readout = dash.readoutAt(ChartKind::GradNorm, 5.0);
    QVERIFY2(readout.contains(QStringLiteral("grad norm not finite (NaN or Infinity): NaN (step 5)")),
             qPrintable(readout));
  }
};

QTEST_MAIN(TestDivergedTrainerRun)
#include "tst_diverged_trainer_run.moc"
