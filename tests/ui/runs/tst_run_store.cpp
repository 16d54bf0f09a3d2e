// RunStore and RunsModel: the runs under a root plus added ones, kept across studio sessions,
// rescanned as their files change, shown newest first in a model that passes the model tester.
#include <QAbstractItemModelTester>
#include <QSettings>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "runs_test_support.h"
#include "studio/config/sweep.h"
#include "studio/runs/run_folder.h"
#include "studio/ui/runs/launch_record.h"
#include "studio/ui/runs/run_store.h"
#include "studio/ui/runs/runs_model.h"

using studio::ui::RunInfo;
using studio::ui::RunsModel;
using studio::ui::RunState;
using studio::ui::RunStore;
using namespace runs_test;

namespace {

// A finished run on another host (so no pid is checked) that started at `started`.
QString makeRun(const QString& root, const QString& name, double started, int sp = 1,
                const char* mode = "zigzag-ring", long long maxSteps = -1) {
  const QString dir = QDir(root).filePath(name);
  if (!QDir().mkpath(dir)) qFatal("cannot create %s", qPrintable(dir));
  appendEvents(dir, startEvent(started, sp, mode, sp, maxSteps),
               stepEvent(120, 1.8125, started + 60));
  writeStatus(dir, studio::RunState::Finished, 4242, QStringLiteral("gpu-node-7"), "done");
  return QDir::cleanPath(dir);
}

QStringList dirs(const QVector<RunInfo>& runs) {
  QStringList out;
  for (const RunInfo& r : runs) out << r.dir;
  return out;
}

QStringList modelDirs(const RunsModel& model) {
  QStringList out;
  for (int row = 0; row < model.rowCount(); ++row)
    out << model.index(row, 0).data(RunsModel::DirRole).toString();
  return out;
}

}  // namespace

class TestRunStore : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void init();
  void scansRoot();
  void addedRunPersists();
  void addRunRefusesNonRuns_data();
  void addRunRefusesNonRuns();
  void runChangedOnStatusChange();
  void pollsWhileRunning();
  void listsRunsStartedElsewhere();
  void sweepPollRate_data();
  void sweepPollRate();
  void listsLaunchedRunsBeforeTheyReport();
  void sortOrder_data();
  void sortOrder();
  void modelFollowsStore();
  void modelColumns();

 private:
  // Rescans and waits until no scan is left to come.
  static void settle(RunStore& store);
};

void TestRunStore::initTestCase() {
  QCoreApplication::setOrganizationName(QStringLiteral("SeqStudioTest"));
  QCoreApplication::setApplicationName(QStringLiteral("tst_run_store"));
}

void TestRunStore::init() {
  QSettings().clear();
}

void TestRunStore::settle(RunStore& store) {
  QSignalSpy finished(&store, &RunStore::scanFinished);
  store.refresh();
  QTRY_VERIFY(!finished.isEmpty() && !store.isScanning());
}

void TestRunStore::scansRoot() {
  QTemporaryDir root;
  const QString a = makeRun(root.path(), QStringLiteral("a"), 1000);
  const QString b = makeRun(root.path(), QStringLiteral("b"), 3000);
  const QString c = makeRun(root.path(), QStringLiteral("c"), 2000);
  QVERIFY(QDir(root.path()).mkdir(QStringLiteral("not-a-run")));
  appendRaw(root.path(), "stray-file.txt", "hello");

  RunStore store;
  QSignalSpy changed(&store, &RunStore::runsChanged);
  store.setRoot(root.path());
  QTRY_COMPARE(store.runs().size(), 3);
  QCOMPARE(dirs(store.runs()), (QStringList{b, c, a}));
  QVERIFY(!changed.isEmpty());
  QCOMPARE(store.run(a + QStringLiteral("/"))->lastStep, qint64{120});
  QVERIFY(!store.run(QDir(root.path()).filePath(QStringLiteral("not-a-run"))));

  // Deleting a run folder removes it from the list at the next scan.
  QVERIFY(QDir(c).removeRecursively());
  store.refresh();
  QTRY_COMPARE(store.runs().size(), 2);
  QCOMPARE(dirs(store.runs()), (QStringList{b, a}));
}

void TestRunStore::addedRunPersists() {
  QTemporaryDir root, elsewhere;
  makeRun(root.path(), QStringLiteral("in-root"), 1000);
  const QString outside =
      makeRun(elsewhere.path(), QStringLiteral("started from a terminal"), 2000);
  {
    RunStore store;
    store.setRoot(root.path());
    QString error;
    QVERIFY2(store.addRun(outside, &error), qPrintable(error));
    QTRY_COMPARE(store.runs().size(), 2);
    QCOMPARE(store.runs().front().dir, outside);
    QCOMPARE(store.addedRuns(), QStringList{outside});
  }
  {
    // A later studio session: the added run comes back from QSettings.
    RunStore store;
    store.setRoot(root.path());
    QTRY_COMPARE(store.runs().size(), 2);
    QVERIFY(store.run(outside));
    store.forgetRun(outside);
    QTRY_COMPARE(store.runs().size(), 1);
  }
  RunStore store;
  store.setRoot(root.path());
  settle(store);
  QCOMPARE(store.runs().size(), 1);
  QVERIFY(!store.run(outside));
  QVERIFY(QFileInfo::exists(outside + QStringLiteral("/status.json")));  // files untouched

  // Forgetting a run under the root hides it too, also in later sessions; addRun brings it back.
  const QString inRoot = store.runs().front().dir;
  store.forgetRun(inRoot);
  QTRY_VERIFY(store.runs().isEmpty());
  RunStore later;
  later.setRoot(root.path());
  settle(later);
  QVERIFY(later.runs().isEmpty());
  QVERIFY(later.addRun(inRoot));
  QTRY_COMPARE(later.runs().size(), 1);
}

void TestRunStore::addRunRefusesNonRuns_data() {
  QTest::addColumn<QString>("what");
  QTest::addColumn<QString>("message");
  QTest::newRow("missing folder") << "missing"
                                  << "does not exist";
  QTest::newRow("folder without run files") << "plain"
                                            << "is not a run folder";
}

void TestRunStore::addRunRefusesNonRuns() {
  QFETCH(QString, what);
  QFETCH(QString, message);
  QTemporaryDir tmp;
  const QString dir = tmp.filePath(what);
  if (what == QLatin1String("plain")) QVERIFY(QDir().mkpath(dir));
  RunStore store;
  store.setRoot(QString());
  QString error;
  QVERIFY(!store.addRun(dir, &error));
  QVERIFY2(error.contains(message) && error.contains(dir), qPrintable(error));
  QVERIFY(store.addedRuns().isEmpty());
}

void TestRunStore::runChangedOnStatusChange() {
  QTemporaryDir root;
  const QString a = makeRun(root.path(), QStringLiteral("a"), 1000);
  const QString b = makeRun(root.path(), QStringLiteral("b"), 2000);
  writeStatus(b, studio::RunState::Running, 4242, QStringLiteral("gpu-node-7"));
  RunStore store;
  store.setRoot(root.path());
  QTRY_COMPARE(store.runs().size(), 2);
  QCOMPARE(store.run(b)->state, RunState::Running);

  QSignalSpy runChanged(&store, &RunStore::runChanged);
  QSignalSpy runsChanged(&store, &RunStore::runsChanged);
  settle(store);  // a rescan with nothing new says nothing
  settle(store);
  QCOMPARE(runChanged.size(), 0);
  QCOMPARE(runsChanged.size(), 0);

  writeStatus(b, studio::RunState::Failed, 4242, QStringLiteral("gpu-node-7"), "rank 3 hung");
  store.refresh();
  QTRY_COMPARE(runChanged.size(), 1);
  QCOMPARE(runChanged.front().front().toString(), b);
  QCOMPARE(runsChanged.size(), 1);
  QCOMPARE(store.run(b)->state, RunState::Failed);
  QCOMPARE(store.run(b)->reason, QStringLiteral("rank 3 hung"));
  QCOMPARE(store.run(a)->state, RunState::Finished);
}

// While a run is running, the store rescans on its own; once none is, it stops.
void TestRunStore::pollsWhileRunning() {
  QTemporaryDir root;
  const QString a = makeRun(root.path(), QStringLiteral("a"), 1000);
  writeStatus(a, studio::RunState::Running, 4242, QStringLiteral("gpu-node-7"));
  RunStore store;
  QCOMPARE(store.pollInterval(), RunStore::kDefaultPollMs);
  constexpr int kPollMs = 100;
  store.setPollInterval(kPollMs);
  store.setRoot(root.path());
  QTRY_COMPARE(store.runs().size(), 1);
  QSignalSpy runChanged(&store, &RunStore::runChanged);
  QSignalSpy finished(&store, &RunStore::scanFinished);
  appendEvents(a, stepEvent(121, 1.5, 1200));
  QTRY_VERIFY(!runChanged.isEmpty());  // nobody called refresh()
  QCOMPARE(store.run(a)->lastStep, qint64{121});
  QCOMPARE(store.run(a)->lastLoss, 1.5);

  writeStatus(a, studio::RunState::Finished, 4242, QStringLiteral("gpu-node-7"), "done");
  QTRY_COMPARE(store.run(a)->state, RunState::Finished);
  // Nothing active: the slow idle poll only.
  QCOMPARE(store.currentPollInterval(), RunStore::kDefaultIdlePollMs);
  finished.clear();
  QTest::qWait(10 * kPollMs);
  QCOMPARE(finished.size(), 0);
  store.setIdlePollInterval(0);
  QCOMPARE(store.currentPollInterval(), 0);
  // Running again (a resume from a terminal) is noticed at the next refresh, then polled fast.
  writeStatus(a, studio::RunState::Running, 4242, QStringLiteral("gpu-node-7"));
  settle(store);
  QCOMPARE(store.currentPollInterval(), kPollMs);
}

// A run started from a terminal in the runs folder (not launched by this studio, not added)
// appears on the idle poll, with nothing else running and nobody calling refresh().
void TestRunStore::listsRunsStartedElsewhere() {
  QTemporaryDir root;
  RunStore store;
  store.setIdlePollInterval(200);
  store.setRoot(root.path());
  QSignalSpy finished(&store, &RunStore::scanFinished);
  QTRY_VERIFY(!finished.isEmpty());
  QVERIFY(store.runs().isEmpty());
  QCOMPARE(store.currentPollInterval(), 200);

  Sleeper engine;
  const QString dir = QDir::cleanPath(QDir(root.path()).filePath(QStringLiteral("from-a-shell")));
  QVERIFY(QDir().mkpath(dir));
  appendEvents(dir, startEvent(1000));
  writeStatus(dir, studio::RunState::Running, engine.pid());
  QTRY_COMPARE(store.runs().size(), 1);
  QCOMPARE(store.runs().front().state, RunState::Running);
  QCOMPARE(store.currentPollInterval(), store.pollInterval());
}

// A sweep's Queued points keep the store polling fast only while the sweep's queue runs on this
// machine (it starts them); a stopped sweep's points wait for a resume, which the idle poll sees.
void TestRunStore::sweepPollRate_data() {
  QTest::addColumn<QString>("queue");  // "none", "stopped", "dead", "running"
  QTest::addColumn<bool>("fast");
  QTest::newRow("prepared, no queue (a Slurm array's)") << "none" << false;
  QTest::newRow("queue stopped") << "stopped" << false;
  QTest::newRow("queue says running, its process is gone") << "dead" << false;
  QTest::newRow("queue running here, holding the lock") << "running" << true;
}

void TestRunStore::sweepPollRate() {
  QFETCH(QString, queue);
  QFETCH(bool, fast);
  QTemporaryDir root;
  const QString sweepDir = QDir::cleanPath(QDir(root.path()).filePath(QStringLiteral("sweep")));
  studio::SweepFile sweep;
  sweep.name = "sweep";
  sweep.spec.axes = {studio::parse_sweep_axis("learning_rate=1e-4,2e-4")};
  sweep.points = studio::expand_sweep(sweep.spec);
  for (const studio::SweepPoint& p : sweep.points) {
    const QString point = QDir(sweepDir).filePath(QString::fromStdString(p.name));
    QVERIFY(QDir().mkpath(point));
    appendRaw(point, studio::kRunConfigFileName, "stage: sft\n");
  }
  appendRaw(sweepDir, studio::kSweepFileName,
            QByteArray::fromStdString(studio::sweep_to_json(sweep).dump(2)));

  // The queue's process: flock(1) holds the sweep's lock file open, as studio-train sweep does.
  QProcess holder;
  studio::RunStatus status;
  status.host = studio::ui::localHostName().toStdString();
  status.state = queue == QLatin1String("stopped") ? studio::RunState::Stopped
                                                   : studio::RunState::Running;
  if (queue == QLatin1String("running")) {
    appendRaw(sweepDir, studio::kSweepLockFileName, "");
    holder.start(QStringLiteral("flock"),
                 {QDir(sweepDir).filePath(QString::fromUtf8(studio::kSweepLockFileName)),
                  QStringLiteral("sleep"), QStringLiteral("30")});
    QVERIFY(holder.waitForStarted());
    status.pid = holder.processId();
    // flock opens the file before it forks sleep: wait until the studio's probe sees it held.
    QTRY_VERIFY(studio::ui::holdsSweepLock(status.pid, sweepDir));
  } else {
    status.pid = qint64{1} << 22;  // pid_max's ceiling: never a process
  }
  if (queue != QLatin1String("none")) {
    if (status.state != studio::RunState::Running) status.exit_code = 0;
    QCOMPARE(QString::fromStdString(status.write(path(sweepDir, studio::kSweepStatusFileName))),
             QString());
  }

  RunStore store;
  constexpr int kPollMs = 100;
  store.setPollInterval(kPollMs);
  store.setRoot(root.path());
  QTRY_COMPARE(store.runs().size(), 2);
  for (const RunInfo& r : store.runs()) {
    QCOMPARE(r.state, RunState::Queued);
    QCOMPARE(r.sweepQueueAlive, fast);
  }
  QCOMPARE(store.currentPollInterval(), fast ? kPollMs : RunStore::kDefaultIdlePollMs);
  if (holder.state() != QProcess::NotRunning) {
    holder.kill();
    holder.waitForFinished();
  }
}

// A run the studio launched is listed from its launch record on, before the engine writes a file.
void TestRunStore::listsLaunchedRunsBeforeTheyReport() {
  QTemporaryDir root;
  const QString dir = QDir::cleanPath(QDir(root.path()).filePath(QStringLiteral("launched")));
  QVERIFY(QDir().mkpath(dir));
  Sleeper engine;
  studio::ui::LaunchRecord record;
  record.pid = engine.pid();
  record.host = studio::ui::localHostName();
  record.nproc = 2;
  record.started = QDateTime::currentDateTime();
  QCOMPARE(record.write(dir), QString());

  RunStore store;
  store.setPollInterval(100);
  store.setRoot(root.path());
  QTRY_COMPARE(store.runs().size(), 1);
  QCOMPARE(store.runs().front().dir, dir);
  QCOMPARE(store.runs().front().state, RunState::Starting);
  QCOMPARE(store.runs().front().worldSize, 2);

  writeStatus(dir, studio::RunState::Running, engine.pid());
  QTRY_COMPARE(store.run(dir)->state, RunState::Running);  // noticed by the store's own poll
}

void TestRunStore::sortOrder_data() {
  QTest::addColumn<QList<double>>("started");  // one run per entry, named r0, r1, ...; 0: undated
  QTest::addColumn<QStringList>("order");
  QTest::newRow("newest first") << QList<double>{1000, 3000, 2000} << QStringList{"r1", "r2", "r0"};
  QTest::newRow("same time: by name")
      << QList<double>{5000, 5000, 4000} << QStringList{"r0", "r1", "r2"};
  QTest::newRow("undated last") << QList<double>{0, 2000, 1000} << QStringList{"r1", "r2", "r0"};
}

void TestRunStore::sortOrder() {
  QFETCH(QList<double>, started);
  QFETCH(QStringList, order);
  QTemporaryDir root;
  for (int i = 0; i < started.size(); ++i) {
    const QString name = QStringLiteral("r%1").arg(i);
    if (started[i] > 0) {
      makeRun(root.path(), name, started[i]);
    } else {
      // Undated: a status.json and nothing else, with its mtime pushed to the epoch.
      const QString dir = QDir(root.path()).filePath(name);
      QVERIFY(QDir().mkpath(dir));
      appendRaw(dir, studio::kStatusFileName, "not json");
      QFile f(dir + QStringLiteral("/status.json"));
      QVERIFY(f.open(QIODevice::ReadWrite));
      QVERIFY(f.setFileTime(QDateTime::fromSecsSinceEpoch(0), QFileDevice::FileModificationTime));
    }
  }
  RunStore store;
  RunsModel model(&store);
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  store.setRoot(root.path());
  QTRY_COMPARE(model.rowCount(), static_cast<int>(started.size()));
  QStringList names;
  for (int row = 0; row < model.rowCount(); ++row)
    names << model.index(row, RunsModel::NameColumn).data().toString();
  QCOMPARE(names, order);
}

// Rows appear, move and disappear as runs do, with the model tester watching every change.
void TestRunStore::modelFollowsStore() {
  QTemporaryDir root;
  const QString a = makeRun(root.path(), QStringLiteral("a"), 1000);
  const QString b = makeRun(root.path(), QStringLiteral("b"), 2000);
  RunStore store;
  RunsModel model(&store);
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  store.setRoot(root.path());
  QTRY_COMPARE(model.rowCount(), 2);
  QCOMPARE(modelDirs(model), (QStringList{b, a}));

  // A selection (persistent index) on "a" must follow it through moves.
  QPersistentModelIndex selected(model.index(1, RunsModel::NameColumn));
  const QString c = makeRun(root.path(), QStringLiteral("c"), 1500);
  store.refresh();
  QTRY_COMPARE(model.rowCount(), 3);
  QCOMPARE(modelDirs(model), (QStringList{b, c, a}));
  QCOMPARE(selected.data(RunsModel::DirRole).toString(), a);

  // "a" restarts later than everything: it moves to the top.
  QVERIFY(QFile::remove(a + QStringLiteral("/events.jsonl")));
  appendEvents(a, startEvent(9000), stepEvent(1, 3.0, 9001));
  store.refresh();
  QTRY_COMPARE(modelDirs(model), (QStringList{a, b, c}));
  QCOMPARE(selected.row(), 0);
  QCOMPARE(selected.data(RunsModel::DirRole).toString(), a);

  QVERIFY(QDir(b).removeRecursively());
  store.refresh();
  QTRY_COMPARE(modelDirs(model), (QStringList{a, c}));
  QCOMPARE(model.rowOf(c), 1);
  QCOMPARE(model.rowOf(b), -1);
}

void TestRunStore::modelColumns() {
  QTemporaryDir root;
  const QString dir = makeRun(root.path(), QStringLiteral("sp4"), 1717171717, 4, "ulysses", 500);
  RunStore store;
  RunsModel model(&store);
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  store.setRoot(root.path());
  QTRY_COMPARE(model.rowCount(), 1);
  auto cell = [&](int column, int role = Qt::DisplayRole) {
    return model.index(0, column).data(role);
  };
  QCOMPARE(cell(RunsModel::NameColumn).toString(), QStringLiteral("sp4"));
  QCOMPARE(cell(RunsModel::StateColumn).toString(), QStringLiteral("Finished"));
  QCOMPARE(cell(RunsModel::StageColumn).toString(), QStringLiteral("sft"));
  QCOMPARE(cell(RunsModel::SpColumn).toString(), QStringLiteral("4 (ulysses)"));
  QCOMPARE(cell(RunsModel::StepColumn).toString(), QStringLiteral("120/500"));
  QCOMPARE(cell(RunsModel::LossColumn).toString(), QStringLiteral("1.8125"));
  QVERIFY(!cell(RunsModel::StartedColumn).toString().isEmpty());
  QCOMPARE(cell(RunsModel::HostColumn).toString(), QStringLiteral("gpu-node-7"));
  QCOMPARE(cell(RunsModel::LossColumn, Qt::UserRole).toString(), dir);
  QCOMPARE(cell(RunsModel::NameColumn, RunsModel::StateRole).toInt(),
           static_cast<int>(RunState::Finished));
  QVERIFY(!cell(RunsModel::StateColumn, Qt::DecorationRole).value<QIcon>().isNull());
  QVERIFY(
      cell(RunsModel::StateColumn, Qt::ToolTipRole).toString().contains(QStringLiteral("done")));
  QCOMPARE(model.headerData(RunsModel::SpColumn, Qt::Horizontal).toString(), QStringLiteral("SP"));
}

QTEST_MAIN(TestRunStore)
#include "tst_run_store.moc"
