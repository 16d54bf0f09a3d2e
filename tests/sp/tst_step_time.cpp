// Where each rank's time goes (docs/events.md, "Where the time goes"), measured in real
// multi-process Gloo runs of studio-train: every step event that carries memory carries each
// rank's compute, SP communication, gradient communication, data and waiting; a rank slowed on
// purpose shows as the straggler, and the ranks that wait for it show it as waiting.
#include <QtCore/QJsonArray>
#include <QtCore/QJsonObject>
#include <QtCore/QTemporaryDir>
#include <QtTest/QtTest>

#include <algorithm>
#include <cmath>
#include <map>

#include "train_runs.h"

#if STUDIO_TEST_DASHBOARD
#include <QtWidgets/QApplication>

#include "studio/ui/dashboard/chart_kind.h"
#include "studio/ui/dashboard/rank_time_view.h"
#include "studio/ui/dashboard/run_dashboard.h"
#endif

namespace {

const QString kSource = QStringLiteral(STUDIO_SOURCE_DIR);

struct Parts {
  double compute = 0, sp = 0, grad = 0, data = 0, wait = 0;
  double total() const { return compute + sp + grad + data + wait; }
};

// step -> rank -> parts, from the run's step events with rank_times; and each step's elapsed.
struct Times {
  std::map<int, std::map<int, Parts>> steps;
  std::map<int, double> elapsed;
};

Times read_times(const QString& out) {
  Times t;
  for (const QJsonObject& e : train_runs::events(out)) {
    if (e["event"].toString() != "step") continue;
    const int step = e["step"].toInt();
    t.elapsed[step] = e["elapsed"].toDouble();
    for (const auto& v : e["rank_times"].toArray()) {
      const QJsonObject r = v.toObject();
      t.steps[step][r["rank"].toInt()] = {r["compute_s"].toDouble(-1), r["sp_comm_s"].toDouble(-1),
                                          r["grad_comm_s"].toDouble(-1), r["data_s"].toDouble(-1),
                                          r["wait_s"].toDouble(-1)};
    }
  }
  return t;
}

}  // namespace

class TestStepTime : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString model_;

  QString config(const QString& name, const QString& out, const QStringList& extra) {
    const QStringList lines{"model_name_or_path: " + model_,
                            "stage: sft",
                            "do_train: true",
                            "finetuning_type: full",
                            "dataset: demo_sft",
                            "dataset_dir: " + kSource + "/resources/demo/data",
                            "template: qwen",
                            "cutoff_len: 64",
                            "max_samples: 64",
                            "output_dir: " + out,
                            "logging_steps: 1",
                            "save_steps: 100",
                            "learning_rate: 1.0e-3",
                            "per_device_train_batch_size: 2",
                            "max_steps: 5",
                            "eval_strategy: 'no'",
                            "seed: 3"};
    return train_runs::write_yaml(dir_.filePath(name + ".yaml"), lines, extra);
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    model_ = train_runs::make_tiny_model(dir_.path(), train_runs::TinyModel{});
    QVERIFY(!model_.isEmpty());
  }

  // Rows: the layout, its processes, and which parts must have been measured (> 0) or must be
  // exactly 0 (no such communication in the layout). Rank 1 is made 1 s slower at step 3
  // (STUDIO_INJECT_FAULT=slow@3#1) in every multi-process row.
  void eachRanksTime_data() {
    QTest::addColumn<QStringList>("keys");
    QTest::addColumn<int>("processes");
    QTest::addColumn<bool>("spComm");
    QTest::addColumn<bool>("gradComm");
    QTest::addRow("one process") << QStringList{} << 1 << false << false;
    // Without data parallelism the gradients are still summed over the SP group's ranks.
    QTest::addRow("zigzag-ring SP 2")
        << QStringList{"sequence_parallel_size: 2", "sequence_parallel_mode: zigzag-ring"} << 2
        << true << true;
    QTest::addRow("ulysses SP 2 x dp 2, ZeRO-2")
        << QStringList{"sequence_parallel_size: 2", "sequence_parallel_mode: ulysses",
                       "zero_stage: 2"}
        << 4 << true << true;
    QTest::addRow("dp 2, ZeRO-3") << QStringList{"zero_stage: 3"} << 2 << false << true;
  }
  void eachRanksTime() {
    QFETCH(QStringList, keys);
    QFETCH(int, processes);
    QFETCH(bool, spComm);
    QFETCH(bool, gradComm);
    const QString name = QString(QTest::currentDataTag()).replace(' ', '-').replace(',', "");
    const QString out = dir_.filePath(name);
    QStringList env;
    if (processes > 1) env << "STUDIO_INJECT_FAULT=slow@3#1";
    QProcess p;
    auto e = QProcessEnvironment::systemEnvironment();
    e.insert("STUDIO_VERIFY_COLLECTIVES", "1");
    for (const QString& kv : env) e.insert(kv.section('=', 0, 0), kv.section('=', 1));
    p.setProcessEnvironment(e);
    p.start(QStringLiteral(STUDIO_TRAIN_EXE),
            {"train", config(name, out, keys), "--nproc", QString::number(processes)});
    QVERIFY(p.waitForFinished(300000));
    QVERIFY2(p.exitCode() == 0, qPrintable(QString::fromUtf8(p.readAllStandardError()).right(3000)));

    const Times t = read_times(out);
    QCOMPARE(int(t.steps.size()), 5);  // every step (logging_steps: 1)
    for (const auto& [step, ranks] : t.steps) {
      QCOMPARE(int(ranks.size()), processes);
      // The parts of a rank's step fit in the time between two step events (the step plus the
      // event's writing), and each is measured or exactly 0.
      const double between = t.elapsed.at(step) - (step > 1 ? t.elapsed.at(step - 1) : 0.0);
      for (const auto& [rank, parts] : ranks) {
        const QString where = QStringLiteral("step %1 rank %2").arg(step).arg(rank);
        for (double v : {parts.compute, parts.sp, parts.grad, parts.data, parts.wait})
          QVERIFY2(v >= 0, qPrintable(where));
        QVERIFY2(parts.compute > 0, qPrintable(where));
        QVERIFY2(parts.data > 0, qPrintable(where));
        QVERIFY2(spComm ? parts.sp > 0 : parts.sp == 0, qPrintable(where + ": SP communication"));
        QVERIFY2(gradComm ? parts.grad > 0 : parts.grad == 0,
                 qPrintable(where + ": gradient communication"));
        if (processes == 1) QCOMPARE(parts.wait, 0.0);
        if (step > 1)
          QVERIFY2(parts.total() <= between + 0.05,
                   qPrintable(QStringLiteral("%1: %2 s of parts in %3 s between step events")
                                  .arg(where).arg(parts.total()).arg(between)));
      }
    }
    if (processes == 1) return;
    // Step 3: rank 1 computed 1 s longer (its busy time, not a wait), and every other rank
    // waited for it -- at the step's first sum, or in its first collective.
    const auto& slow = t.steps.at(3);
    const double mean_other = [&] {
      double s = 0;
      for (const auto& [rank, parts] : slow) s += rank == 1 ? 0 : parts.compute;
      return s / (processes - 1);
    }();
    QVERIFY2(slow.at(1).compute >= mean_other + 0.8,
             qPrintable(QStringLiteral("rank 1 compute %1 s, others %2 s")
                            .arg(slow.at(1).compute).arg(mean_other)));
    for (const auto& [rank, parts] : slow) {
      if (rank == 1) continue;
      QVERIFY2(parts.wait + parts.sp + parts.grad >= 0.8,
               qPrintable(QStringLiteral("rank %1 waited %2 s (+ %3 s SP, %4 s gradients)")
                              .arg(rank).arg(parts.wait).arg(parts.sp).arg(parts.grad)));
      QVERIFY2(parts.compute < slow.at(1).compute - 0.8, qPrintable(QString::number(rank)));
    }
    // The other steps have no such straggler.
    for (int step : {2, 4, 5})
      QVERIFY2(t.steps.at(step).at(1).compute < slow.at(1).compute - 0.8,
               qPrintable(QString::number(step)));

#if STUDIO_TEST_DASHBOARD
    // The dashboard, reading the run's folder: the straggler chart peaks at step 3 and the
    // bars of a step picked there are the events' numbers, stacked per rank.
    studio::ui::RunDashboard dash;
    dash.showRun(out);
    QTRY_VERIFY_WITH_TIMEOUT(dash.series(QDir::cleanPath(out)) &&
                                 dash.series(QDir::cleanPath(out))->rankTimes().size() == 5,
                             20000);
    dash.flush();
    QVERIFY(dash.chartShown(studio::ui::ChartKind::Straggler));
    QCOMPARE(int(dash.graphs(studio::ui::ChartKind::Straggler, QDir::cleanPath(out)).size()), 1);
    const studio::ui::RunSeries* series = dash.series(QDir::cleanPath(out));
    const auto& ratio = series->values(studio::ui::Metric::Straggler);
    QCOMPARE(int(ratio.size()), 5);
    const auto peak = std::max_element(ratio.begin(), ratio.end()) - ratio.begin();
    QCOMPARE(series->steps()[std::size_t(peak)], 3.0);
    QVERIFY2(ratio[std::size_t(peak)] > 1.5, qPrintable(QString::number(ratio[std::size_t(peak)])));
    studio::ui::RankTimeView* view = dash.rankTimeView();
    QVERIFY(!view->isHidden());
    QCOMPARE(view->shownStep(), 5.0);  // the newest, until one is picked
    view->selectStep(3);
    QCOMPARE(view->shownStep(), 3.0);
    for (int part = 0; part < studio::ui::RankTimeView::kParts; ++part) {
      const auto bars = view->barValues(part);
      QCOMPARE(int(bars.size()), processes);
      for (const auto& [rank, value] : bars) {
        const Parts& p = slow.at(int(rank));
        const double want = part == 0 ? p.compute : part == 1 ? p.sp : part == 2 ? p.grad
                            : part == 3 ? p.data : p.wait;
        QVERIFY(std::abs(value - want) <= 1e-9 + 1e-6 * want);
      }
    }
    QVERIFY2(view->summary().contains("slowest rank 1"), qPrintable(view->summary()));
#endif
  }
};

#if STUDIO_TEST_DASHBOARD
QTEST_MAIN(TestStepTime)
#else
QTEST_GUILESS_MAIN(TestStepTime)
#endif
#include "tst_step_time.moc"
