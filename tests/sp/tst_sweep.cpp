// studio-train sweep end to end: a grid of learning rates x SP sizes trained as a queue of real
// 2-process runs, two at a time; a point that cannot run refuses the whole sweep before
// anything starts; a stopped sweep continues with --resume.
#include <QtCore/QDirIterator>
#include <QtCore/QTemporaryDir>
#include <QtTest/QtTest>

#include <csignal>
#include <optional>

#include "train_runs.h"

#if STUDIO_TEST_GUI
#include <QtWidgets/QApplication>
#include <QtWidgets/QHeaderView>
#include <QtWidgets/QTableWidget>

#include "studio/runs/events.h"
#include "studio/ui/runs/local_launcher.h"
#include "studio/ui/runs/process_probe.h"
#include "studio/ui/runs/run_comparison.h"
#include "studio/ui/runs/run_store.h"
#include "studio/ui/runs/runs_model.h"
#include "studio/ui/shell/comparison_dialog.h"
#include "studio/ui/shell/runs_panel.h"
#endif

namespace {
const QString kSource = QStringLiteral(STUDIO_SOURCE_DIR);

QString readAll(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
}
}  // namespace

class TestSweep : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString model_;

  QString base(const QString& name, const QStringList& extra = {}) {
    return train_runs::write_yaml(
        dir_.filePath(name + ".yaml"),
        {"model_name_or_path: " + model_, "stage: sft", "do_train: true", "finetuning_type: full",
         "dataset: demo_sft", "dataset_dir: " + kSource + "/resources/demo/data", "template: qwen",
         "cutoff_len: 64", "max_samples: 32", "output_dir: unused", "logging_steps: 1",
         "save_steps: 2", "per_device_train_batch_size: 2", "max_steps: 4", "eval_strategy: 'no'",
         "seed: 3"},
        extra);
  }

  // `studio-train sweep` of two learning rates, killed if the test ends before it does.
  struct SweepProcess {
    QProcess p;
    QString out, first, second;  // its folder and its two points' folders
    ~SweepProcess() {
      if (p.state() != QProcess::NotRunning) {
        p.kill();
        p.waitForFinished();
      }
    }
  };
  // Starts it under the fault `fault` (STUDIO_INJECT_FAULT), into dir_/`name`.
  void startSweep(SweepProcess& s, const QString& name, const QString& fault,
                  const QStringList& extra) {
    s.out = dir_.filePath(name);
    s.first = s.out + "/00-learning_rate=1e-3";
    s.second = s.out + "/01-learning_rate=2e-3";
    auto e = QProcessEnvironment::systemEnvironment();
    e.insert("STUDIO_INJECT_FAULT", fault);
    s.p.setProcessEnvironment(e);
    s.p.start(QStringLiteral(STUDIO_TRAIN_EXE),
              {"sweep", base(name, extra), "--sweep", "learning_rate=1e-3,2e-3", "--out", s.out});
  }

  static train_runs::Run sweep(const QStringList& args, const QStringList& env = {}) {
    QProcess p;
    auto e = QProcessEnvironment::systemEnvironment();
    for (const QString& kv : env) e.insert(kv.section('=', 0, 0), kv.section('=', 1));
    p.setProcessEnvironment(e);
    p.start(QStringLiteral(STUDIO_TRAIN_EXE), QStringList{"sweep"} + args);
    if (!p.waitForFinished(600000)) return {-1, "timed out"};
    return {p.exitCode(), QString::fromUtf8(p.readAllStandardOutput() + p.readAllStandardError())};
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    model_ = train_runs::make_tiny_model(dir_.path(), train_runs::TinyModel{});
    QVERIFY(!model_.isEmpty());
  }

  // 2 learning rates x SP 1 and 2, each point 2 processes, two points at a time on the CPU.
  void gridTrainsEveryPoint() {
    const QString out = dir_.filePath("grid");
    const auto r = sweep({base("grid"), "--sweep", "learning_rate=1e-3,1e-2", "--sweep",
                          "sequence_parallel_size=1,2", "--nproc", "2", "--parallel", "2", "--out",
                          out});
    QVERIFY2(r.code == 0, qPrintable(r.err.right(3000)));
    const QStringList names{"00-learning_rate=1e-3,sequence_parallel_size=1",
                            "01-learning_rate=1e-3,sequence_parallel_size=2",
                            "02-learning_rate=1e-2,sequence_parallel_size=1",
                            "03-learning_rate=1e-2,sequence_parallel_size=2"};
    const QJsonObject sweepFile = train_runs::read_json(out + "/sweep.json");
    QCOMPARE(sweepFile["points"].toArray().size(), 4);
    QCOMPARE(sweepFile["nproc"].toInt(), 2);
    std::map<QString, double> lastLoss;
    for (const QString& name : names) {
      const QString point = out + "/" + name;
      QCOMPARE(train_runs::read_json(point + "/status.json")["state"].toString(), "finished");
      // The run's own start event has the point's values.
      QJsonObject start;
      double loss = 0;
      for (const QJsonObject& e : train_runs::events(point)) {
        if (e["event"].toString() == "start") start = e;
        if (e["event"].toString() == "step") loss = e["loss"].toDouble();
      }
      const QJsonObject config = start["config"].toObject();
      QCOMPARE(config["learning_rate"].toDouble(), name.contains("1e-3") ? 1e-3 : 1e-2);
      QCOMPARE(start["sequence_parallel_size"].toInt(), name.endsWith("=2") ? 2 : 1);
      QCOMPARE(QDir::cleanPath(config["output_dir"].toString()), QDir::cleanPath(point));
      QVERIFY(readAll(point + "/train.log").contains("finished at step 4"));
      lastLoss[name] = loss;
    }
    // The learning rate changes the run (SP 1 on 2 processes is dp 2, another global batch).
    QVERIFY(std::abs(lastLoss[names[0]] - lastLoss[names[2]]) > 1e-3);
    QVERIFY(std::abs(lastLoss[names[1]] - lastLoss[names[3]]) > 1e-3);
    QVERIFY2(r.err.contains("4 of 4 finished"), qPrintable(r.err));
    const QJsonObject queue = train_runs::read_json(out + "/sweep-status.json");
    QCOMPARE(queue["state"].toString(), "finished");
    QCOMPARE(queue["exit_code"].toInt(-1), 0);
    QCOMPARE(queue["reason"].toString(), "4 of 4 finished");

#if STUDIO_TEST_GUI
    // The studio: the runs list holds the sweep's points together, in point order, named by
    // the sweep; Compare Sweep reads them as a table of points with the swept keys as columns.
    studio::ui::RunStore store;
    store.setRoot(dir_.path());
    auto points = [&] {
      QStringList found;
      for (const auto& run : store.runs())
        if (run.sweep == QStringLiteral("grid")) found << run.dir;
      return found;
    };
    QTRY_COMPARE_WITH_TIMEOUT(points().size(), 4, 20000);
    int first = -1;
    for (int i = 0; i < store.runs().size(); ++i)
      if (store.runs()[i].sweep == QStringLiteral("grid")) {
        if (first < 0) first = i;
        QCOMPARE(i - first, names.indexOf(store.runs()[i].name));  // together, in order
      }
    studio::ui::RunsModel model(&store);
    QTRY_VERIFY(model.rowCount() >= 4);
    QCOMPARE(model.index(first, studio::ui::RunsModel::NameColumn).data().toString(),
             "grid / " + names[0]);
    studio::ui::ComparisonDialog dialog(points(), nullptr);
    QTRY_VERIFY_WITH_TIMEOUT(dialog.isLoaded(), 20000);
    QCOMPARE(dialog.comparison().swept,
             (QStringList{"learning_rate", "sequence_parallel_size"}));
    QTableWidget* table = dialog.table();
    QCOMPARE(table->rowCount(), 4);
    QCOMPARE(table->horizontalHeaderItem(0)->text(), "learning_rate");
    QCOMPARE(table->horizontalHeaderItem(1)->text(), "sequence_parallel_size");
    QCOMPARE(table->horizontalHeaderItem(2)->text(), "final loss");
    for (int row = 0; row < 4; ++row) {
      const QString name = table->verticalHeaderItem(row)->text();
      QCOMPARE(table->item(row, 0)->text(), name.contains("1e-3") ? "0.001" : "0.01");
      QCOMPARE(table->item(row, 1)->text(), name.endsWith("=2") ? "2" : "1");
      // Shown to 6 significant digits.
      QVERIFY(std::abs(table->item(row, 2)->text().toDouble() - lastLoss[name]) <=
              1e-5 * std::abs(lastLoss[name]));
    }
    QVERIFY(dialog.comparison().toCsv().startsWith(
        "run,learning_rate,sequence_parallel_size,final loss,best loss"));
#endif
  }

  // SP 3 does not divide 2 processes: the sweep names the point and the key, and writes nothing.
  void invalidPointRefusesTheSweep() {
    const QString out = dir_.filePath("invalid");
    const auto r = sweep({base("invalid"), "--sweep", "sequence_parallel_size=1,3", "--nproc", "2",
                          "--out", out});
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains("point 01-sequence_parallel_size=3") &&
                 r.err.contains("sequence_parallel_size"),
             qPrintable(r.err));
    QVERIFY(r.err.contains("nothing was started"));
    QVERIFY(!QFileInfo::exists(out));
  }

  // A sweep stopped (SIGTERM) while its first point trains: the point stops at a step boundary
  // with its checkpoint, no other point starts; --resume continues that point from its
  // checkpoint and trains the rest.
  void stoppedSweepResumes() {
    const QString out = dir_.filePath("stopped");
    QProcess p;
    auto e = QProcessEnvironment::systemEnvironment();
    e.insert("STUDIO_INJECT_FAULT", "slow");  // every step 1 s slower: time to stop it
    p.setProcessEnvironment(e);
    p.start(QStringLiteral(STUDIO_TRAIN_EXE),
            {"sweep", base("stopped", {"save_on_stop: true"}), "--sweep", "learning_rate=1e-3,2e-3",
             "--out", out});
    const QString first = out + "/00-learning_rate=1e-3";
    QTRY_VERIFY_WITH_TIMEOUT(readAll(first + "/events.jsonl").contains("\"step\":2"), 60000);
    const qint64 pid = p.processId();
    ::kill(static_cast<pid_t>(pid), SIGTERM);
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 130);
    const QString said = QString::fromUtf8(p.readAllStandardOutput());
    QVERIFY2(said.contains("--resume"), qPrintable(said));
    const QJsonObject stopped = train_runs::read_json(out + "/sweep-status.json");
    QCOMPARE(stopped["state"].toString(), "stopped");
    QCOMPARE(stopped["exit_code"].toInt(), 130);
    QCOMPARE(stopped["pid"].toInteger(), pid);
    QCOMPARE(train_runs::read_json(first + "/status.json")["state"].toString(), "stopped");
    QVERIFY(!QFileInfo::exists(out + "/01-learning_rate=2e-3/status.json"));
#if STUDIO_TEST_GUI
    // The runs list shows the point that never started as Queued, saying how to continue.
    {
      studio::ui::RunStore store;
      store.setRoot(dir_.path());
      auto find = [&](const QString& dir) -> std::optional<studio::ui::RunInfo> {
        for (const auto& run : store.runs())
          if (run.dir == dir) return run;
        return std::nullopt;
      };
      const QString second = out + "/01-learning_rate=2e-3";
      QTRY_VERIFY_WITH_TIMEOUT(find(second).has_value() && find(first).has_value(), 20000);
      QCOMPARE(find(second)->state, studio::ui::RunState::Queued);
      QCOMPARE(find(second)->stateText, QString("Queued"));
      QVERIFY2(find(second)->reason.contains("studio-train sweep --resume " + out),
               qPrintable(find(second)->reason));
      QCOMPARE(find(second)->sweep, QString("stopped"));
      QCOMPARE(find(first)->state, studio::ui::RunState::Stopped);
    }
#endif

    const auto r = sweep({"--resume", out});
    QVERIFY2(r.code == 0, qPrintable(r.err.right(3000)));
    for (const QString& point : {first, out + "/01-learning_rate=2e-3"})
      QCOMPARE(train_runs::read_json(point + "/status.json")["state"].toString(), "finished");
    QCOMPARE(train_runs::read_json(out + "/sweep-status.json")["state"].toString(), "finished");
    QVERIFY2(readAll(first + "/train.log").contains("resuming from"), qPrintable(readAll(first + "/train.log")));
  }

#if STUDIO_TEST_GUI
  // The studio's Stop Sweep on a sweep started in a terminal: the process that runs the queue
  // (sweep-status.json) gets SIGTERM, so the second point never starts, and the running point
  // is stopped as a run is. While the queue runs, a second `--resume` of it is refused; once it
  // ended, or when its record names a process that is not it, nothing is signalled.
  void studioStopsTheSweep() {
    SweepProcess started;
    startSweep(started, "studio-stop", "slow", {"max_steps: 40"});
    QProcess& p = started.p;
    const QString &out = started.out, &first = started.first, &second = started.second;
    QTRY_VERIFY_WITH_TIMEOUT(readAll(first + "/events.jsonl").contains("\"step\":1"), 60000);
    const QJsonObject queue = train_runs::read_json(out + "/sweep-status.json");
    QCOMPARE(queue["state"].toString(), "running");
    QCOMPARE(queue["pid"].toInteger(), p.processId());
    QCOMPARE(queue["host"].toString(), studio::ui::localHostName());
    QVERIFY(studio::ui::isSweepProcess(p.processId(), out, STUDIO_TRAIN_EXE));
    QVERIFY(!studio::ui::isSweepProcess(p.processId(), dir_.filePath("stopped"), STUDIO_TRAIN_EXE));
    const auto twice = sweep({"--resume", out});
    QCOMPARE(twice.code, 2);
    QVERIFY2(twice.err.contains(QString("another studio-train sweep (pid %1 on ").arg(p.processId())),
             qPrintable(twice.err));

    studio::ui::LocalLauncher launcher;
    launcher.setEngineProgram(QStringLiteral(STUDIO_TRAIN_EXE));
    QSignalSpy requested(&launcher, &studio::ui::LocalLauncher::stopRequested);
    QSignalSpy finished(&launcher, &studio::ui::LocalLauncher::stopFinished);
    QSignalSpy failed(&launcher, &studio::ui::LocalLauncher::stopFailed);
    launcher.stopSweep(out, {first, second}, 30);
    QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 2, 60000);  // the point, then its queue
    QCOMPARE(failed.size(), 0);
    QStringList ended;
    for (const auto& args : finished) {
      ended << args.at(0).toString();
      QCOMPARE(args.at(1).toBool(), false);  // both ended on SIGTERM
    }
    QVERIFY2(ended.contains(first) && ended.contains(out), qPrintable(ended.join(", ")));
    // The studio saw it end, so QProcess may have reaped it already.
    QVERIFY(p.state() == QProcess::NotRunning || p.waitForFinished(10000));
    QCOMPARE(p.exitCode(), 130);
    QCOMPARE(train_runs::read_json(first + "/status.json")["state"].toString(), "stopped");
    QVERIFY(!QFileInfo::exists(second + "/status.json"));
    QCOMPARE(train_runs::read_json(out + "/sweep-status.json")["state"].toString(), "stopped");
    QVERIFY(requested.size() >= 2);

    // Ended: nothing to signal, and the message says so.
    launcher.stopSweep(out, {first, second}, 30);
    QTRY_COMPARE(failed.size(), 1);
    QVERIFY2(failed[0].at(1).toString().contains("is not running: its queue ended (stopped)"),
             qPrintable(failed[0].at(1).toString()));

    // A record naming another process (a queue killed without a record, its pid reused).
    QProcess other;
    other.start("sleep", {"30"});
    QVERIFY(other.waitForStarted());
    studio::RunStatus forged;
    forged.state = studio::RunState::Running;
    forged.pid = other.processId();
    forged.host = studio::ui::localHostName().toStdString();
    QCOMPARE(forged.write((out + "/sweep-status.json").toStdString()), std::string());
    launcher.stopSweep(out, {first, second}, 30);
    QTRY_COMPARE(failed.size(), 2);
    QVERIFY2(failed[1].at(1).toString().contains(
                 QString("process %1, which sweep-status.json names, is not its queue (it runs '")
                     .arg(other.processId())) &&
                 failed[1].at(1).toString().contains("sleep 30'"),
             qPrintable(failed[1].at(1).toString()));
    QVERIFY(studio::ui::processAlive(other.processId()));
    other.kill();
    other.waitForFinished();
  }

  // Between two points no point runs: here the queue waits 300 s before point 1 (fault point
  // sweep.slow, the gap a large checkpoint's verification makes). The runs list still offers
  // Stop Sweep, because the queued point's queue runs here; the stop ends the queue in the gap,
  // and point 1 never starts.
  void studioStopsTheSweepBetweenPoints() {
    SweepProcess started;
    startSweep(started, "gap-stop", "sweep.slow@1", {"max_steps: 2"});
    QProcess& p = started.p;
    const QString &out = started.out, &first = started.first, &second = started.second;
    // The queue says a point's end once it reaped the point's process: then none runs.
    QByteArray said;
    auto queueSaid = [&](const char* what) {
      return (said += p.readAllStandardOutput()).contains(what);
    };
    QTRY_VERIFY_WITH_TIMEOUT(queueSaid("00-learning_rate=1e-3: finished"), 120000);
    studio::ui::RunStore store;
    store.setRoot(dir_.path());
    studio::ui::RunsPanel panel(&store);
    auto find = [&](const QString& dir) -> std::optional<studio::ui::RunInfo> {
      for (const auto& run : store.runs())
        if (run.dir == dir) return run;
      return std::nullopt;
    };
    QTRY_VERIFY_WITH_TIMEOUT(find(second).has_value() && find(second)->sweepQueueAlive, 20000);
    QCOMPARE(find(second)->state, studio::ui::RunState::Queued);
    QCOMPARE(find(first)->state, studio::ui::RunState::Finished);
    QVERIFY(panel.selectRun(second));
    QTRY_VERIFY(panel.stopSweepAction()->isEnabled());
    QVERIFY(!panel.stopAction()->isEnabled());

    studio::ui::LocalLauncher launcher;
    launcher.setEngineProgram(QStringLiteral(STUDIO_TRAIN_EXE));
    QSignalSpy finished(&launcher, &studio::ui::LocalLauncher::stopFinished);
    QSignalSpy failed(&launcher, &studio::ui::LocalLauncher::stopFailed);
    launcher.stopSweep(out, {first, second}, 30);
    QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, 20000);  // the queue, long before its wait ends
    QCOMPARE(failed.size(), 0);
    QCOMPARE(finished[0].at(0).toString(), out);
    QCOMPARE(finished[0].at(1).toBool(), false);  // it ended on SIGTERM
    QVERIFY(p.state() == QProcess::NotRunning || p.waitForFinished(10000));
    QCOMPARE(p.exitCode(), 130);
    QVERIFY(!QFileInfo::exists(second + "/status.json"));
    QCOMPARE(train_runs::read_json(out + "/sweep-status.json")["state"].toString(), "stopped");
    // Its queue ended: the point stays Queued (--resume continues it), and the action goes off.
    QTRY_VERIFY_WITH_TIMEOUT(!find(second)->sweepQueueAlive, 20000);
    QCOMPARE(find(second)->state, studio::ui::RunState::Queued);
    QTRY_VERIFY(!panel.stopSweepAction()->isEnabled());
  }
#endif
};

#if STUDIO_TEST_GUI
QTEST_MAIN(TestSweep)
#else
QTEST_GUILESS_MAIN(TestSweep)
#endif
#include "tst_sweep.moc"
