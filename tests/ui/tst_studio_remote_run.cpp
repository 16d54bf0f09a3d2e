// The studio with a run on an SSH host, end to end: a real OpenSSH server on 127.0.0.1
// (tests/remote/sshd_server.h) and the real CPU engine. The "host" is this machine, so the
// remote run folder (under the test's temporary folder) is also read directly to check the
// mirror against it byte for byte.
//
// (a) the demo from the wizard's Launch on a saved host: the mirror folder appears under the runs
//     root, loss points arrive live, the run finishes with all of them, and the mirrored
//     events.jsonl is the remote one;
// (b) sshd stopped mid-run: the runs list shows the reconnect reason and the status bar says so;
//     sshd back on the same port: the follower reattaches and the run ends with every step;
// (c) the window closed while a run trains and a new one opened (a studio restart): the new
//     window reattaches the run and keeps receiving steps;
// (d) Stop on the remote run cancels it on the host: state Stopped;
// (e) a run submitted outside the studio (as `studio submit` does) is listed on its host by the
//     Attach Remote Run dialog, attached, mirrored from its first event and followed to the end;
//     a LLaMA-Factory output folder the studio did not start, typed as a path, is followed too.
#include <QAbstractItemModelTester>
#include <QCheckBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QPushButton>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QtTest>

#include <memory>

#include <nlohmann/json.hpp>

#include "sshd_server.h"
#include "studio/config/run_config.h"
#include "studio/ui/dashboard/run_dashboard.h"
#include "studio/ui/dashboard/run_series.h"
#include "studio/ui/remote/host_profile.h"
#include "studio/ui/main_window.h"
#include "studio/ui/runs/log_console.h"
#include "studio/ui/remote/remote_follower.h"
#include "studio/ui/runs/remote_mirror.h"
#include "studio/ui/remote/remote_prompts.h"
#include "studio/ui/remote/remote_submitter.h"
#include "studio/ui/runs/run_store.h"
#include "studio/ui/runs/runs_model.h"
#include "studio/config/config_io.h"
#include "studio/remote/run_submit.h"
#include "studio/ui/shell/attach_remote_dialog.h"
#include "studio/ui/shell/demo_project.h"
#include "studio/ui/shell/runs_panel.h"
#include "studio/ui/wizard/run_wizard.h"
#include "studio/ui/wizard/target_page.h"

using studio::ui::MainWindow;
using studio::ui::RunState;
using studio::ui::StudioPaths;

namespace {

constexpr int kRunTimeoutMs = 240000;  // a loaded 2-core CI machine
const QString kHostName = QStringLiteral("test-sshd");

QByteArray readAll(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

std::size_t lossPoints(const MainWindow& w, const QString& dir) {
  const studio::ui::RunSeries* s = w.dashboard()->series(dir);
  return s ? s->values(studio::ui::Metric::Loss).size() : 0;
}

std::optional<RunState> stateOf(const MainWindow& w, const QString& dir) {
  const auto info = w.runStore()->run(dir);
  return info ? std::optional<RunState>(info->state) : std::nullopt;
}

QString reasonOf(const MainWindow& w, const QString& dir) {
  const auto info = w.runStore()->run(dir);
  return info ? info->reason : QString();
}

// The steps of the "step" events, in order.
QList<qint64> steps(const QByteArray& events) {
  QList<qint64> out;
  for (const QByteArray& line : events.split('\n')) {
    if (line.isEmpty()) continue;
    const auto j = nlohmann::json::parse(line.toStdString());
    if (j.value("event", "") == "step") out.append(j.at("step").get<qint64>());
  }
  return out;
}

bool contiguousFrom1(const QList<qint64>& s) {
  for (int i = 0; i < s.size(); ++i)
    if (s[i] != i + 1) return false;
  return !s.isEmpty();
}

bool followEnded(const QString& dir) {
  try {
    const auto state = studio::ui::RemoteMirror(dir).readFollowState();
    return state && state->connection == studio::ui::RemoteFollowState::Connection::Ended;
  } catch (const std::exception&) {
    return false;
  }
}

// The remote run folder's events.jsonl, read directly (the host is this machine).
QByteArray remoteEvents(const QString& dir) {
  const auto record = studio::ui::RemoteMirror(dir).readRecord();
  return readAll(QString::fromStdString(record.events_path()));
}

// Cancels a mirrored run on its host when a test ends early (a failed check returns at once):
// an endless test run must never outlive the test.
class RemoteRunGuard {
 public:
  explicit RemoteRunGuard(QString dir) : dir_(std::move(dir)) {}
  ~RemoteRunGuard() {
    try {
      const auto record = studio::ui::RemoteMirror(dir_).readRecord();
      studio::remote::cancel_run(studio::ui::connectRemote(record.host, {}), record, 5);
    } catch (const std::exception& e) {
      qWarning("could not cancel %s: %s", qPrintable(dir_), e.what());
    }
  }

 private:
  QString dir_;
};

}  // namespace

class TestStudioRemoteRun : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void demoFromWizardOnASavedHost();
  void connectionLostAndRegained();
  void restartReattachesAndStopCancels();
  void attachRunSubmittedElsewhere();
  void cleanupTestCase() { server_.stop(); }

 private:
  std::unique_ptr<MainWindow> window();
  // Submits the wizard's demo config, changed by `edit`, to the saved host; the mirror folder.
  QString launch(MainWindow& w, const std::function<void(studio::RunConfig&)>& edit);

  SshdFixture server_;
  QTemporaryDir tmp_;
  StudioPaths paths_;
  studio::ui::HostProfile host_;
};

void TestStudioRemoteRun::initTestCase() {
  QVERIFY(tmp_.isValid());
  const QString error = server_.set_up(tmp_.path());
  QVERIFY2(error.isEmpty(), qPrintable(error));

  paths_.engine = QStringLiteral(STUDIO_TRAIN_EXE);
  paths_.resources = QStringLiteral(STUDIO_SOURCE_DIR "/resources");
  paths_.runsRoot = tmp_.filePath(QStringLiteral("runs"));
  paths_.dataDir = tmp_.filePath(QStringLiteral("data"));

  const studio::remote::RemoteHostRef sshd = server_.host_ref();
  host_.name = kHostName;
  host_.target = QString::fromStdString(sshd.target);
  host_.identityFile = QString::fromStdString(sshd.identity_file);
  host_.knownHostsFile = QString::fromStdString(sshd.known_hosts_file);
  host_.sshConfigFile = QString::fromStdString(sshd.ssh_config_file);
  host_.engine = QStringLiteral(STUDIO_TRAIN_EXE);
  host_.remoteRoot = tmp_.filePath(QStringLiteral("remote runs"));
  auto w = window();
  QCOMPARE(w->hosts()->save(host_), QString());
}

std::unique_ptr<MainWindow> TestStudioRemoteRun::window() {
  auto w = std::make_unique<MainWindow>(paths_);
  w->runStore()->setPollInterval(300);
  // Before the event loop runs, so the reattach at start-up uses them too.
  studio::remote::FollowOptions options;
  options.poll_interval = std::chrono::milliseconds(250);
  options.backoff_initial = std::chrono::milliseconds(300);
  options.backoff_max = std::chrono::milliseconds(1000);
  w->remoteRuns()->setFollowOptions(options);
  w->show();
  return w;
}

QString TestStudioRemoteRun::launch(MainWindow& w,
                                    const std::function<void(studio::RunConfig&)>& edit) {
  QSignalSpy opened(&w, &MainWindow::demoWizardOpened);
  w.openDemoWizard();
  if (!QTest::qWaitFor([&] { return opened.count() == 1; }, 60000)) return {};
  studio::ui::RunWizard* wizard = w.wizard();
  wizard->targetPage()->setSshTarget(kHostName);
  studio::RunConfig cfg = wizard->config();
  edit(cfg);
  QSignalSpy launched(&w, &MainWindow::remoteLaunched);
  if (!w.launchRemote(cfg, wizard->baseDir(), wizard->target())) return {};
  if (!QTest::qWaitFor([&] { return launched.count() == 1; }, 120000)) return {};
  return launched.at(0).at(0).toString();
}

void TestStudioRemoteRun::demoFromWizardOnASavedHost() {
  auto w = window();
  QSignalSpy opened(w.get(), &MainWindow::demoWizardOpened);
  w->openDemoWizard();
  QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 1, 60000);  // once the demo model is created
  studio::ui::RunWizard* wizard = w->wizard();
  // As a user: the saved host on the Target page, Next through every page, Launch.
  QTRY_VERIFY_WITH_TIMEOUT(wizard->currentPage() && wizard->currentPage()->isComplete(), 20000);
  while (wizard->nextId() != -1) {
    if (wizard->currentId() == studio::ui::RunWizard::TargetPageId) {
      wizard->targetPage()->setSshTarget(kHostName);
      wizard->targetPage()->uploadModelBox()->setChecked(true);
    }
    QTRY_VERIFY2_WITH_TIMEOUT(wizard->currentPage()->isComplete(),
                              qPrintable(wizard->currentPage()->title()), 20000);
    wizard->next();
  }
  QCOMPARE(wizard->target().hostName, kHostName);
  auto* launchButton = wizard->findChild<QPushButton*>(QStringLiteral("launch"));
  QTRY_VERIFY_WITH_TIMEOUT(launchButton->isEnabled(), 20000);
  QCOMPARE(launchButton->text(), QStringLiteral("&Launch on %1").arg(kHostName));
  QSignalSpy launched(w.get(), &MainWindow::remoteLaunched);
  QSignalSpy progress(w->remoteSubmitter(), &studio::ui::RemoteSubmitter::progress);
  launchButton->click();
  QTRY_COMPARE_WITH_TIMEOUT(launched.count(), 1, 120000);
  const QString dir = launched.at(0).at(0).toString();
  // The submit said what it was doing: the model and data files went up one by one.
  bool uploads = false;
  for (const QList<QVariant>& p : std::as_const(progress))
    uploads = uploads || (p.at(2).toInt() > 0 && p.at(1).toInt() >= 1);
  QVERIFY2(uploads, "no upload progress");
  QCOMPARE(w->logConsole()->logFile(), dir + QStringLiteral("/train.log"));  // the mirrored log
  QVERIFY2(dir.startsWith(paths_.runsRoot), qPrintable(dir));
  QCOMPARE(w->currentRun(), dir);
  QVERIFY(QFile::exists(dir + QStringLiteral("/studio-remote.json")));
  QVERIFY(w->remoteRuns()->isFollowing(dir));
  QTRY_VERIFY(!w->wizard());  // closed once the run started

  // Live: points arrive while the run goes on, then it finishes with all of them.
  QTRY_VERIFY_WITH_TIMEOUT(lossPoints(*w, dir) > 0, kRunTimeoutMs);
  QTRY_COMPARE_WITH_TIMEOUT(stateOf(*w, dir), std::optional<RunState>(RunState::Finished),
                            kRunTimeoutMs);
  QTRY_VERIFY_WITH_TIMEOUT(followEnded(dir), 30000);
  QTRY_COMPARE_WITH_TIMEOUT(lossPoints(*w, dir), std::size_t(12), 10000);  // 60 steps, every 5
  const auto info = w->runStore()->run(dir);
  QVERIFY(info->remote);
  QVERIFY(!info->local);
  QCOMPARE(info->host, host_.target);
  studio::ui::RunsModel* model = w->runsPanel()->model();
  QAbstractItemModelTester tester(model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  const int row = model->rowOf(dir);
  QVERIFY(row >= 0);
  QCOMPARE(model->index(row, studio::ui::RunsModel::HostColumn).data().toString(), host_.target);
  QCOMPARE(model->index(row, studio::ui::RunsModel::StateColumn).data().toString(),
           QStringLiteral("Finished"));
  const QByteArray mirrored = readAll(dir + QStringLiteral("/events.jsonl"));
  QVERIFY(!mirrored.isEmpty());
  QCOMPARE(mirrored, remoteEvents(dir));
  QVERIFY(readAll(dir + QStringLiteral("/train.log")).size() > 0);
  QTRY_VERIFY(!w->remoteRuns()->isFollowing(dir));
  w->close();
}

void TestStudioRemoteRun::connectionLostAndRegained() {
  auto w = window();
  const QString dir = launch(*w, [](studio::RunConfig& cfg) {
    cfg.max_steps = 90;
    cfg.logging_steps = 1;
    cfg.eval_strategy = studio::EvalStrategy::No;
    cfg.save_steps = 100000;
  });
  QVERIFY(!dir.isEmpty());
  QTRY_VERIFY_WITH_TIMEOUT(lossPoints(*w, dir) >= 3, kRunTimeoutMs);
  // The runs list knows the run is Running (its status is polled less often than the events are
  // copied: with a fast engine three loss points can arrive first) before the cut.
  QTRY_COMPARE_WITH_TIMEOUT(stateOf(*w, dir), std::optional<RunState>(RunState::Running), 20000);
  server_.stop();  // every session cut; the engine, detached on the host, trains on
  QTRY_VERIFY_WITH_TIMEOUT(reasonOf(*w, dir).startsWith(QStringLiteral("connection lost: ")),
                           20000);
  QVERIFY2(reasonOf(*w, dir).contains(QStringLiteral("(attempt ")), qPrintable(reasonOf(*w, dir)));
  QCOMPARE(stateOf(*w, dir), std::optional<RunState>(RunState::Running));
  QTRY_VERIFY_WITH_TIMEOUT(
      w->statusBar()->currentMessage().contains(QStringLiteral("connection lost")), 10000);
  const QString error = server_.restart();  // the same port
  QVERIFY2(error.isEmpty(), qPrintable(error));
  // 90 steps, most of them after the cut: ~3 min alone, 4 once beside tst_remote_run's trainings.
  QTRY_COMPARE_WITH_TIMEOUT(stateOf(*w, dir), std::optional<RunState>(RunState::Finished),
                            2 * kRunTimeoutMs);
  QTRY_VERIFY_WITH_TIMEOUT(followEnded(dir), 30000);
  const QByteArray mirrored = readAll(dir + QStringLiteral("/events.jsonl"));
  QCOMPARE(mirrored, remoteEvents(dir));
  const QList<qint64> got = steps(mirrored);
  QCOMPARE(got.size(), 90);
  QVERIFY(contiguousFrom1(got));
  QTRY_COMPARE_WITH_TIMEOUT(lossPoints(*w, dir), std::size_t(90), 10000);
  QVERIFY(!reasonOf(*w, dir).startsWith(QStringLiteral("connection lost")));
  w->close();
}

void TestStudioRemoteRun::restartReattachesAndStopCancels() {
  std::unique_ptr<RemoteRunGuard> guard;  // a failed check must not leave the run training
  QString dir;
  std::size_t pointsBefore = 0;
  {
    auto w = window();
    dir = launch(*w, [](studio::RunConfig& cfg) {
      cfg.max_steps = 100000;  // trains until stopped
      cfg.logging_steps = 1;
      cfg.eval_strategy = studio::EvalStrategy::No;
      cfg.save_steps = 100000;
    });
    QVERIFY(!dir.isEmpty());
    guard = std::make_unique<RemoteRunGuard>(dir);
    QTRY_VERIFY_WITH_TIMEOUT(lossPoints(*w, dir) >= 2, kRunTimeoutMs);
    // The dashboard tails the mirror on its own; the runs list catches up at its next scan.
    QTRY_COMPARE_WITH_TIMEOUT(stateOf(*w, dir), std::optional<RunState>(RunState::Running),
                              10000);
    pointsBefore = lossPoints(*w, dir);
    w->close();
  }  // the window and its follower are gone; the run is not

  auto w = window();
  QTRY_VERIFY_WITH_TIMEOUT(w->remoteRuns()->isFollowing(dir), 10000);  // reattached at start-up
  QTRY_COMPARE_WITH_TIMEOUT(stateOf(*w, dir), std::optional<RunState>(RunState::Running), 10000);
  QVERIFY(w->openRun(dir));
  QTRY_VERIFY_WITH_TIMEOUT(lossPoints(*w, dir) > pointsBefore + 2, 60000);

  QSignalSpy cancelled(w->remoteRuns(), &studio::ui::RemoteRuns::cancelFinished);
  QVERIFY(w->runsPanel()->selectRun(dir));
  QTRY_VERIFY(w->runsPanel()->stopAction()->isEnabled());
  w->runsPanel()->stopAction()->trigger();
  QTRY_COMPARE_WITH_TIMEOUT(cancelled.count(), 1, 60000);
  const QStringList lines = cancelled.at(0).at(1).toStringList();
  QVERIFY2(lines.size() == 1 && lines[0].contains(QStringLiteral("stopped ")),
           qPrintable(lines.join(QLatin1Char('|'))));
  QTRY_COMPARE_WITH_TIMEOUT(stateOf(*w, dir), std::optional<RunState>(RunState::Stopped), 30000);
  QTRY_VERIFY_WITH_TIMEOUT(followEnded(dir), 30000);
  const QByteArray mirrored = readAll(dir + QStringLiteral("/events.jsonl"));
  QCOMPARE(mirrored, remoteEvents(dir));
  QVERIFY(contiguousFrom1(steps(mirrored)));
  w->close();
}

void TestStudioRemoteRun::attachRunSubmittedElsewhere() {
  auto w = window();
  QSignalSpy opened(w.get(), &MainWindow::demoWizardOpened);
  w->openDemoWizard();
  QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 1, 60000);
  studio::RunConfig cfg = w->wizard()->config();
  cfg.max_steps = 20;
  const QString yaml = tmp_.filePath(QStringLiteral("elsewhere.yaml"));
  QCOMPARE(studio::save_config_file(cfg, yaml.toStdString()), std::string());
  studio::remote::SubmitRequest request;
  request.config_file = yaml.toStdString();
  request.base_dir = w->wizard()->baseDir().toStdString();
  request.host = host_.hostRef();
  request.remote_root = host_.remoteRoot.toStdString();
  request.engine = host_.engine.toStdString();
  request.upload_model = true;
  const auto submitted = studio::remote::submit_run(
      studio::ui::connectRemote(host_.hostRef(), {}), request);
  const QString runId = QString::fromStdString(submitted.record.run_id);
  w->wizard()->close();

  studio::ui::AttachRemoteDialog dialog(w->hosts(), w->remoteRuns());
  QCOMPARE(dialog.hostName(), kHostName);
  dialog.listRuns();
  auto* runs = dialog.findChild<QComboBox*>(QStringLiteral("runId"));
  QTRY_VERIFY_WITH_TIMEOUT(runs->count() > 0, 30000);
  QCOMPARE(dialog.runId(), runId);  // the newest run comes first
  QVERIFY(runs->currentText().contains(QStringLiteral("elsewhere.yaml")));
  QSignalSpy attached(w.get(), &MainWindow::remoteAttached);
  QVERIFY(w->attachRemoteRun(dialog.hostName(), dialog.runId()));
  QTRY_COMPARE_WITH_TIMEOUT(attached.count(), 1, 30000);
  const QString dir = attached.at(0).at(0).toString();
  QCOMPARE(QFileInfo(dir).fileName(), runId);
  QCOMPARE(w->currentRun(), dir);
  QTRY_COMPARE_WITH_TIMEOUT(stateOf(*w, dir), std::optional<RunState>(RunState::Finished),
                            kRunTimeoutMs);
  QTRY_VERIFY_WITH_TIMEOUT(followEnded(dir), 30000);
  QCOMPARE(readAll(dir + QStringLiteral("/events.jsonl")), remoteEvents(dir));
  QTRY_COMPARE_WITH_TIMEOUT(lossPoints(*w, dir), std::size_t(4), 10000);  // 20 steps, every 5
  QVERIFY(!w->attachRemoteRun(QStringLiteral("no-such-host"), runId));

  // A run folder on the host the studio did not start (a LLaMA-Factory output_dir), typed as
  // its path: mirrored as the runs list's own, its trainer_log.jsonl plotted, finished by the
  // train_results.json the Trainer wrote; Stop is refused (the studio cannot know its processes).
  const QString lf = tmp_.filePath(QStringLiteral("users own/lf output"));
  QVERIFY(QDir().mkpath(lf));
  QByteArray log;
  for (int step = 1; step <= 5; ++step)
    log += QStringLiteral(R"({"current_steps": %1, "total_steps": 5, "loss": %2, "lr": 0.001, )"
                          R"("epoch": 0.5, "percentage": %3, "elapsed_time": "0:00:0%1", )"
                          R"("remaining_time": "0:00:01"})"
                          "\n")
               .arg(step)
               .arg(3.0 - 0.25 * step)
               .arg(step * 20)
               .toUtf8();
  QFile lfLog(lf + QStringLiteral("/trainer_log.jsonl"));
  QVERIFY(lfLog.open(QIODevice::WriteOnly) && lfLog.write(log) == log.size());
  lfLog.close();
  QFile results(lf + QStringLiteral("/train_results.json"));
  QVERIFY(results.open(QIODevice::WriteOnly));
  results.write(R"({"epoch": 0.5, "train_loss": 2.25})");
  results.close();
  runs->setEditText(lf);
  QCOMPARE(dialog.runId(), lf);
  auto* buttons = dialog.findChild<QDialogButtonBox*>();
  QVERIFY(buttons && buttons->button(QDialogButtonBox::Ok)->isEnabled());
  QVERIFY(w->attachRemoteRun(dialog.hostName(), dialog.runId()));
  QTRY_COMPARE_WITH_TIMEOUT(attached.count(), 2, 30000);
  const QString folderDir = attached.at(1).at(0).toString();
  QCOMPARE(QFileInfo(folderDir).fileName(),
           QString::fromStdString(studio::remote::folder_run_id(host_.hostRef(), lf.toStdString())));
  QTRY_COMPARE_WITH_TIMEOUT(stateOf(*w, folderDir), std::optional<RunState>(RunState::Finished),
                            30000);
  QVERIFY2(reasonOf(*w, folderDir).contains(QStringLiteral("train_results.json")),
           qPrintable(reasonOf(*w, folderDir)));
  QTRY_VERIFY_WITH_TIMEOUT(followEnded(folderDir), 30000);
  QCOMPARE(readAll(folderDir + QStringLiteral("/trainer_log.jsonl")), log);
  QTRY_COMPARE_WITH_TIMEOUT(lossPoints(*w, folderDir), std::size_t(5), 10000);
  QSignalSpy refused(w->remoteRuns(), &studio::ui::RemoteRuns::cancelFailed);
  w->remoteRuns()->cancel(folderDir);
  QTRY_COMPARE_WITH_TIMEOUT(refused.count(), 1, 30000);
  QVERIFY2(refused.at(0).at(1).toString().contains(QStringLiteral("not a run it started")),
           qPrintable(refused.at(0).at(1).toString()));
  // Attached again: the same mirror, followed on.
  QVERIFY(w->attachRemoteRun(dialog.hostName(), lf));
  QTRY_COMPARE_WITH_TIMEOUT(attached.count(), 3, 30000);
  QCOMPARE(attached.at(2).at(0).toString(), folderDir);
  w->close();
}

QTEST_MAIN(TestStudioRemoteRun)
#include "tst_studio_remote_run.moc"
