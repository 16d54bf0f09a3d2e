// The runs list as it scales: filtered by name, state, host and stage; sorted by any column
// (numbers as numbers, back to newest first); a run's folder, log and config one action away; and
// a notification when a run ends while the window is in the background. Real run folders (status
// and events as the engine writes them) read by a real RunStore.
#include <QAction>
#include <QComboBox>
#include <QDesktopServices>
#include <QHeaderView>
#include <QLineEdit>
#include <QSignalSpy>
#include <QTableView>
#include <QTemporaryDir>
#include <QtTest>

#include "runs_test_support.h"
#include "studio/ui/main_window.h"
#include "studio/ui/runs/run_folder.h"
#include "studio/ui/runs/run_store.h"
#include "studio/ui/runs/runs_filter.h"
#include "studio/ui/runs/runs_model.h"
#include "studio/ui/shell/runs_panel.h"

using studio::ui::RunsModel;
using studio::ui::RunsPanel;
using studio::ui::RunStore;

namespace {

struct Run {
  const char* name;
  studio::RunState state;
  const char* host;  // "" = this machine
  const char* stage;
  double loss;
  long long step;
};

// Four runs; their losses and steps sort differently as numbers than as text.
const Run kRuns[] = {
    {"alpha-sft-sp4", studio::RunState::Finished, "", "sft", 10.5, 200},
    {"beta-dpo", studio::RunState::Finished, "gpu-node-1", "dpo", 2.25, 30},
    {"gamma-sft", studio::RunState::Failed, "", "sft", 9.0, 1000},
    {"delta-sft", studio::RunState::Stopped, "gpu-node-2", "sft", 0.75, 5},
};

// Opens file:// URLs by recording them instead (QDesktopServices::setUrlHandler).
class UrlRecorder : public QObject {
  Q_OBJECT
 public:
  QList<QUrl> opened;
 public slots:
  void open(const QUrl& url) { opened << url; }
};

}  // namespace

class TestRunsPanel : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir root_;
  std::unique_ptr<RunStore> store_;
  std::unique_ptr<RunsPanel> panel_;

  QString dirOf(const char* name) const { return root_.filePath(QString::fromLatin1(name)); }

  void writeRun(const Run& r, double time) {
    const QString dir = dirOf(r.name);
    QVERIFY(QDir().mkpath(dir));
    const QString host = *r.host ? QString::fromLatin1(r.host) : studio::ui::localHostName();
    runs_test::writeStatus(dir, r.state, 4242, host);
    auto start = runs_test::startEvent(time);
    start.stage = r.stage;
    runs_test::appendEvents(dir, start, runs_test::stepEvent(r.step, r.loss, time + 1));
  }

  // The run folder names down the view, top to bottom.
  QStringList shown() const {
    QStringList names;
    QAbstractItemModel* m = panel_->view()->model();
    for (int row = 0; row < m->rowCount(); ++row)
      names << QFileInfo(m->index(row, 0).data(RunsModel::DirRole).toString()).fileName();
    return names;
  }

 private slots:
  void initTestCase() {
    QVERIFY(root_.isValid());
    double t = 1.8e9;
    for (const Run& r : kRuns) writeRun(r, t += 100);
    // A config and a log beside the first run's events.
    QFile config(QDir(dirOf("alpha-sft-sp4")).filePath(QString::fromLatin1(studio::kRunConfigFileName)));
    QVERIFY(config.open(QIODevice::WriteOnly) && config.write("stage: sft\n") > 0);
    config.close();
    QFile log(QDir(dirOf("alpha-sft-sp4")).filePath(QString::fromLatin1(studio::kTrainLogFileName)));
    QVERIFY(log.open(QIODevice::WriteOnly) && log.write("step 1\n") > 0);
    log.close();
    store_ = std::make_unique<RunStore>();
    QSignalSpy changed(store_.get(), &RunStore::runsChanged);
    store_->setRoot(root_.path());
    store_->refresh();
    QTRY_COMPARE_WITH_TIMEOUT(store_->runs().size(), qsizetype(4), 10000);
    panel_ = std::make_unique<RunsPanel>(store_.get());
    QTRY_COMPARE(panel_->view()->model()->rowCount(), 4);
  }

  void filters_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("state");  // the state combo's text; "" any
    QTest::addColumn<QString>("host");
    QTest::addColumn<QString>("stage");
    QTest::addColumn<QStringList>("expected");  // sorted
    QTest::newRow("everything") << "" << "" << "" << "" << QStringList{"alpha-sft-sp4", "beta-dpo", "delta-sft", "gamma-sft"};
    QTest::newRow("name, any case") << "SFT" << "" << "" << "" << QStringList{"alpha-sft-sp4", "delta-sft", "gamma-sft"};
    QTest::newRow("state finished") << "" << "Finished" << "" << "" << QStringList{"alpha-sft-sp4", "beta-dpo"};
    QTest::newRow("state failed") << "" << "Failed" << "" << "" << QStringList{"gamma-sft"};
    QTest::newRow("host") << "" << "" << "gpu-node-2" << "" << QStringList{"delta-sft"};
    QTest::newRow("stage dpo") << "" << "" << "" << "dpo" << QStringList{"beta-dpo"};
    QTest::newRow("name and state") << "sft" << "Finished" << "" << "" << QStringList{"alpha-sft-sp4"};
    QTest::newRow("nothing matches") << "zeta" << "" << "" << "" << QStringList{};
  }
  void filters() {
    QFETCH(QString, name);
    QFETCH(QString, state);
    QFETCH(QString, host);
    QFETCH(QString, stage);
    QFETCH(QStringList, expected);
    auto* nameEdit = panel_->findChild<QLineEdit*>(QStringLiteral("filterName"));
    auto* stateBox = panel_->findChild<QComboBox*>(QStringLiteral("filterState"));
    auto* hostBox = panel_->findChild<QComboBox*>(QStringLiteral("filterHost"));
    auto* stageBox = panel_->findChild<QComboBox*>(QStringLiteral("filterStage"));
    QVERIFY(nameEdit && stateBox && hostBox && stageBox);
    // Every control says what it filters to assistive technology.
    for (QWidget* w : QList<QWidget*>{nameEdit, stateBox, hostBox, stageBox})
      QVERIFY(!w->accessibleName().isEmpty());
    // The host combo lists the hosts of the runs.
    QVERIFY(hostBox->findData(QStringLiteral("gpu-node-1")) > 0);
    QVERIFY(hostBox->findData(studio::ui::localHostName()) > 0);
    nameEdit->clear();
    QTest::keyClicks(nameEdit, name);  // typed, as a user does
    stateBox->setCurrentIndex(state.isEmpty() ? 0 : stateBox->findText(state));
    hostBox->setCurrentIndex(host.isEmpty() ? 0 : hostBox->findData(host));
    stageBox->setCurrentIndex(stage.isEmpty() ? 0 : stageBox->findData(stage));
    QStringList got = shown();
    got.sort();
    QCOMPARE(got, expected);
    nameEdit->clear();
    for (QComboBox* box : {stateBox, hostBox, stageBox}) box->setCurrentIndex(0);
    QCOMPARE(shown().size(), 4);
  }

  // Header clicks: ascending, descending, then back to the model's order (newest first).
  void sortsByAnyColumn_data() {
    QTest::addColumn<int>("column");
    QTest::addColumn<QStringList>("ascending");
    QTest::newRow("loss (as numbers: 0.75 < 2.25 < 9 < 10.5)")
        << int(RunsModel::LossColumn) << QStringList{"delta-sft", "beta-dpo", "gamma-sft", "alpha-sft-sp4"};
    QTest::newRow("step (5 < 30 < 200 < 1000)")
        << int(RunsModel::StepColumn) << QStringList{"delta-sft", "beta-dpo", "alpha-sft-sp4", "gamma-sft"};
    QTest::newRow("name") << int(RunsModel::NameColumn)
                          << QStringList{"alpha-sft-sp4", "beta-dpo", "delta-sft", "gamma-sft"};
    QTest::newRow("started") << int(RunsModel::StartedColumn)
                             << QStringList{"alpha-sft-sp4", "beta-dpo", "gamma-sft", "delta-sft"};
  }
  void sortsByAnyColumn() {
    QFETCH(int, column);
    QFETCH(QStringList, ascending);
    const QStringList newestFirst = shown();
    QCOMPARE(newestFirst, (QStringList{"delta-sft", "gamma-sft", "beta-dpo", "alpha-sft-sp4"}));
    QHeaderView* header = panel_->view()->horizontalHeader();
    const int x = header->sectionViewportPosition(column) + header->sectionSize(column) / 2;
    QTest::mouseClick(header->viewport(), Qt::LeftButton, {}, QPoint(x, header->height() / 2));
    QCOMPARE(shown(), ascending);
    QTest::mouseClick(header->viewport(), Qt::LeftButton, {}, QPoint(x, header->height() / 2));
    QStringList descending = ascending;
    std::reverse(descending.begin(), descending.end());
    QCOMPARE(shown(), descending);
    QTest::mouseClick(header->viewport(), Qt::LeftButton, {}, QPoint(x, header->height() / 2));
    QCOMPARE(shown(), newestFirst);
  }

  // The selected run's folder and log open in the desktop's applications; its config in the
  // Config tab (configRequested).
  void filesOneActionAway() {
    UrlRecorder recorder;
    QDesktopServices::setUrlHandler(QStringLiteral("file"), &recorder, "open");
    QSignalSpy config(panel_.get(), &RunsPanel::configRequested);
    QVERIFY(panel_->selectRun(dirOf("alpha-sft-sp4")));
    QVERIFY(panel_->openConfigAction()->isEnabled());
    panel_->openFolderAction()->trigger();
    panel_->openLogAction()->trigger();
    panel_->openConfigAction()->trigger();
    QCOMPARE(recorder.opened.size(), 2);
    QCOMPARE(recorder.opened[0], QUrl::fromLocalFile(dirOf("alpha-sft-sp4")));
    QCOMPARE(recorder.opened[1].toLocalFile(),
             QDir(dirOf("alpha-sft-sp4")).filePath(QString::fromLatin1(studio::kTrainLogFileName)));
    QCOMPARE(config.size(), 1);
    QCOMPARE(config[0][0].toString(),
             QDir(dirOf("alpha-sft-sp4")).filePath(QString::fromLatin1(studio::kRunConfigFileName)));
    // A run without train.log opens its events; one without a config has nothing to open.
    QVERIFY(panel_->selectRun(dirOf("beta-dpo")));
    QVERIFY(!panel_->openConfigAction()->isEnabled());
    panel_->openLogAction()->trigger();
    QCOMPARE(recorder.opened.last().toLocalFile(), QDir(dirOf("beta-dpo")).filePath(QStringLiteral("events.jsonl")));
    QDesktopServices::unsetUrlHandler(QStringLiteral("file"));
  }

  // A run of this machine that finishes while the window is not the active one: the window says
  // so (runEndedInBackground, the status bar, the log).
  void notifiesWhenARunEndsInTheBackground() {
    QTemporaryDir runs;
    QVERIFY(runs.isValid());
    runs_test::Sleeper engine;  // a live pid for the running state
    const QString dir = runs.filePath(QStringLiteral("epsilon"));
    QVERIFY(QDir().mkpath(dir));
    runs_test::writeStatus(dir, studio::RunState::Running, engine.pid());
    runs_test::appendEvents(dir, runs_test::startEvent(1.9e9), runs_test::stepEvent(1, 3.0, 1.9e9 + 1));
    studio::ui::StudioPaths paths;
    paths.runsRoot = runs.path();
    studio::ui::MainWindow window(paths);  // never shown: in the background
    window.runStore()->setPollInterval(200);
    QSignalSpy ended(&window, &studio::ui::MainWindow::runEndedInBackground);
    window.runStore()->refresh();
    QTRY_VERIFY_WITH_TIMEOUT(window.runStore()->run(dir) &&
                                 window.runStore()->run(dir)->state == studio::ui::RunState::Running,
                             10000);
    QTest::qWait(500);  // a scan or two with the run alive: nothing to tell
    QCOMPARE(ended.size(), 0);
    runs_test::writeStatus(dir, studio::RunState::Failed, engine.pid(), studio::ui::localHostName(),
                           "CUDA out of memory on rank 3");
    QTRY_COMPARE_WITH_TIMEOUT(ended.size(), 1, 10000);
    QCOMPARE(ended[0][0].toString(), dir);
    const QString message = ended[0][1].toString();
    QVERIFY2(message.contains(QStringLiteral("epsilon")) && message.contains(QStringLiteral("failed")) &&
                 message.contains(QStringLiteral("CUDA out of memory on rank 3")),
             qPrintable(message));
    QTest::qWait(500);  // told once
    QCOMPARE(ended.size(), 1);
  }
};

QTEST_MAIN(TestRunsPanel)
#include "tst_runs_panel.moc"
