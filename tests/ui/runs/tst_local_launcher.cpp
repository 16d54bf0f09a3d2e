// LocalLauncher with a real stand-in engine (runs_test_engine): the run folder it creates, the
// detached process and its log, and stop() by SIGTERM, by SIGKILL, and never of a foreign pid.
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>

#include <QElapsedTimer>
#include <QProcess>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>

#include "runs_test_support.h"
#include "studio/config/config_io.h"
#include "studio/ui/runs/launch_record.h"
#include "studio/ui/runs/local_launcher.h"
#include "studio/ui/runs/process_probe.h"
#include "studio/ui/runs/run_folder.h"
#include "studio/ui/runs/run_info.h"
#include "studio/ui/runs/run_store.h"

using studio::ui::LaunchRecord;
using studio::ui::LaunchRequest;
using studio::ui::LocalLauncher;
using studio::ui::RunState;
using namespace runs_test;

namespace {

const QString kEngine = QStringLiteral(RUNS_TEST_ENGINE);

studio::RunConfig trainConfig(std::vector<std::pair<std::string, std::string>> extra = {}) {
  studio::RunConfig cfg;
  cfg.model_name_or_path = "models/tiny-llama";
  cfg.ref_model = "../shared/ref-model";
  cfg.deepspeed = "ds/z3.json";
  cfg.resume_from_checkpoint = "/abs/ckpt/checkpoint-10";
  cfg.dataset = {"alpaca_en_demo"};
  cfg.template_name = "llama3";
  cfg.output_dir = "saves/ignored";
  extra.emplace_back("test_step_ms", "20");
  for (auto& [key, value] : extra) cfg.extra_keys.push_back({key, {value}, 0});
  return cfg;
}

QString readLog(const QString& dir) {
  QFile f(studio::ui::runFile(dir, studio::kTrainLogFileName));
  return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
}

studio::RunStatus readStatus(const QString& dir) {
  studio::RunStatus st;
  std::string error;
  if (!studio::RunStatus::read(path(dir, studio::kStatusFileName), st, error)) st.pid = -1;
  return st;
}

bool isRunning(const QString& dir) {
  const studio::RunStatus st = readStatus(dir);
  return st.pid > 0 && st.state == studio::RunState::Running;
}

}  // namespace

class TestLocalLauncher : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void init();
  void cleanup();
  void launchLayout();
  void uniqueFolders();
  void survivesTheLauncher();
  void stopGraceful();
  void stopKillsTheGroup();
  void foreignPidNeverSignalled_data();
  void foreignPidNeverSignalled();
  void stopWhatIsNotRunning();
  void launchErrors_data();
  void launchErrors();
  void engineExitsBeforeStarting();

 private:
  // Launches and waits until the engine reports running; false (with a warning) when it did not.
  bool launchRunning(LocalLauncher& launcher, const LaunchRequest& request, QString& dir);
  // Points the launcher at the test engine and this test's runs root.
  void setUp(LocalLauncher& launcher) const;

  std::unique_ptr<QTemporaryDir> tmp_;
  QString root_;
  QString base_;
  QStringList launched_;
};

void TestLocalLauncher::initTestCase() {
  QVERIFY2(QFileInfo(kEngine).isExecutable(), qPrintable(kEngine));
}

void TestLocalLauncher::init() {
  tmp_ = std::make_unique<QTemporaryDir>();
  root_ = tmp_->filePath(QStringLiteral("runs root"));
  base_ = tmp_->filePath(QStringLiteral("project"));
  QVERIFY(QDir().mkpath(base_));
  launched_.clear();
}

void TestLocalLauncher::cleanup() {
  // Whatever a failed test left running goes, worker ranks included: every process still naming
  // one of this test's run folders.
  const QStringList pids = QDir(QStringLiteral("/proc")).entryList(QDir::Dirs);
  for (const QString& dir : launched_)
    for (const QString& p : pids)
      if (const qint64 pid = p.toLongLong(); pid > 0 && studio::ui::isRunProcess(pid, dir, kEngine))
        ::kill(static_cast<pid_t>(pid), SIGKILL);
  tmp_.reset();
}

void TestLocalLauncher::setUp(LocalLauncher& launcher) const {
  launcher.setEngineProgram(kEngine);
  launcher.setRunsRoot(root_);
}

bool TestLocalLauncher::launchRunning(LocalLauncher& launcher, const LaunchRequest& request,
                                      QString& dir) {
  QString error;
  dir = launcher.launch(request, &error);
  if (dir.isEmpty()) {
    qWarning("launch failed: %s", qPrintable(error));
    return false;
  }
  launched_ << dir;
  if (QTest::qWaitFor([&] { return isRunning(dir); }, 10000)) return true;
  qWarning("%s: the engine did not report running; its log:\n%s", qPrintable(dir),
           qPrintable(readLog(dir)));
  return false;
}

void TestLocalLauncher::launchLayout() {
  LocalLauncher launcher;
  QCOMPARE(launcher.runsRoot(), studio::ui::defaultRunsRoot());
  setUp(launcher);
  QSignalSpy launched(&launcher, &LocalLauncher::launched);
  const QDateTime before = QDateTime::currentDateTime().addSecs(-1);
  QString dir;
  QVERIFY(launchRunning(launcher, {trainConfig({{"custom_key", "kept"}}), base_, "my sft/run", 1},
                        dir));

  // <root>/<name>-<yyyyMMdd-HHmmss>
  QCOMPARE(QFileInfo(dir).absolutePath(), QDir::cleanPath(root_));
  QVERIFY2(QRegularExpression(QStringLiteral("^my-sft-run-\\d{8}-\\d{6}$"))
               .match(QFileInfo(dir).fileName())
               .hasMatch(),
           qPrintable(dir));
  QCOMPARE(launched.size(), 1);
  QCOMPARE(launched.front().front().toString(), dir);

  // config.yaml: output_dir is the run folder, relative paths resolved against the base.
  const studio::LoadResult cfg = studio::load_config_file(path(dir, "config.yaml"));
  QVERIFY(cfg.ok());
  const QDir base(base_);
  auto str = [](const std::string& s) { return QString::fromStdString(s); };
  QCOMPARE(str(cfg.config.output_dir), dir);
  QCOMPARE(str(cfg.config.model_name_or_path), base.filePath(QStringLiteral("models/tiny-llama")));
  QCOMPARE(str(*cfg.config.ref_model), tmp_->filePath(QStringLiteral("shared/ref-model")));
  QCOMPARE(str(*cfg.config.deepspeed), base.filePath(QStringLiteral("ds/z3.json")));
  QCOMPARE(str(cfg.config.dataset_dir), base.filePath(QStringLiteral("data")));
  QCOMPARE(str(*cfg.config.resume_from_checkpoint), QStringLiteral("/abs/ckpt/checkpoint-10"));
  QVERIFY(cfg.config.overwrite_output_dir);
  QCOMPARE(cfg.config.extra_keys.front().key, std::string("custom_key"));

  // studio-launch.json
  LaunchRecord record;
  QString error;
  QVERIFY2(LaunchRecord::read(dir, record, &error), qPrintable(error));
  QCOMPARE(record.engine, QFileInfo(kEngine).absoluteFilePath());
  QCOMPARE(record.config, dir + QStringLiteral("/config.yaml"));
  QCOMPARE(record.cwd, dir);
  QCOMPARE(record.nproc, 1);
  QCOMPARE(record.host, studio::ui::localHostName());
  QCOMPARE(QFileInfo(record.command.front()).fileName(), QStringLiteral("setsid"));
  QCOMPARE(record.command.mid(1),
           (QStringList{record.engine, QStringLiteral("train"), record.config}));
  QVERIFY(record.started >= before && record.started <= QDateTime::currentDateTime());

  // The recorded pid is the engine itself (it wrote the same pid into status.json), and it
  // leads its own session.
  QCOMPARE(readStatus(dir).pid, record.pid);
  QCOMPARE(::getsid(static_cast<pid_t>(record.pid)), static_cast<pid_t>(record.pid));
  QVERIFY(::getsid(static_cast<pid_t>(record.pid)) != ::getsid(0));

  // train.log: stdout and stderr, written in the run folder.
  QTRY_VERIFY(readLog(dir).contains(QStringLiteral("step 2 loss")));
  const QString log = readLog(dir);
  QVERIFY(log.contains(
      QStringLiteral("runs_test_engine: pid %1 nproc 1 cwd %2\n").arg(record.pid).arg(dir)));
  QVERIFY(log.contains(QStringLiteral("runs_test_engine: this line went to stderr\n")));

  const studio::ui::RunInfo info = studio::ui::readRunInfo(dir);
  QCOMPARE(info.state, RunState::Running);
  QVERIFY(info.local);
  QCOMPARE(info.configPath, record.config);

  QSignalSpy finished(&launcher, &LocalLauncher::stopFinished);
  launcher.stop(dir);
  QTRY_COMPARE(finished.size(), 1);
}

// Launches in the same second get their own folders.
void TestLocalLauncher::uniqueFolders() {
  LocalLauncher launcher;
  setUp(launcher);
  const QDateTime now = QDateTime::currentDateTime();
  for (int s = 0; s < 3; ++s)
    QVERIFY(QDir().mkpath(QDir(root_).filePath(
        QStringLiteral("dup-") + now.addSecs(s).toString(QStringLiteral("yyyyMMdd-HHmmss")))));
  QString dir;
  QVERIFY(launchRunning(launcher, {trainConfig({{"test_steps", "3"}}), base_, "dup", 1}, dir));
  QVERIFY2(QFileInfo(dir).fileName().endsWith(QStringLiteral("-2")), qPrintable(dir));
  QTRY_COMPARE(readStatus(dir).state, studio::RunState::Finished);
}

// The run outlives the launcher object (the studio quitting), and a later launcher object (a
// later studio session) can still stop it from what the folder records.
void TestLocalLauncher::survivesTheLauncher() {
  QString dir;
  qint64 pid = 0;
  {
    LocalLauncher launcher;
    setUp(launcher);
    QVERIFY(launchRunning(launcher, {trainConfig(), base_, "outlives", 1}, dir));
    pid = readStatus(dir).pid;
  }
  QVERIFY(studio::ui::processAlive(pid));
  const qint64 stepNow = studio::ui::readRunInfo(dir).lastStep;
  QTRY_VERIFY(studio::ui::readRunInfo(dir).lastStep > stepNow + 3);  // still training
  QCOMPARE(::getsid(static_cast<pid_t>(pid)), static_cast<pid_t>(pid));

  LocalLauncher later;
  QSignalSpy finished(&later, &LocalLauncher::stopFinished);
  later.stop(dir, 10);
  QTRY_COMPARE(finished.size(), 1);
  QCOMPARE(finished.front().at(1).toBool(), false);
  QVERIFY(!studio::ui::processAlive(pid));
}

void TestLocalLauncher::stopGraceful() {
  LocalLauncher launcher;
  setUp(launcher);
  QString dir;
  QVERIFY(launchRunning(launcher, {trainConfig(), base_, "graceful", 1}, dir));
  const qint64 pid = readStatus(dir).pid;
  QSignalSpy requested(&launcher, &LocalLauncher::stopRequested);
  QSignalSpy finished(&launcher, &LocalLauncher::stopFinished);
  QSignalSpy failed(&launcher, &LocalLauncher::stopFailed);
  launcher.stop(dir + QStringLiteral("/"), 10);
  QTRY_COMPARE(finished.size(), 1);
  QCOMPARE(requested.size(), 1);
  QCOMPARE(requested.front().front().toString(), dir);
  QCOMPARE(finished.front().front().toString(), dir);
  QCOMPARE(finished.front().at(1).toBool(), false);
  QCOMPARE(failed.size(), 0);

  const studio::RunStatus st = readStatus(dir);
  QCOMPARE(st.state, studio::RunState::Stopped);
  QCOMPARE(st.exit_code, std::optional<int>(130));
  QVERIFY(!studio::ui::processAlive(pid));
  QVERIFY(readLog(dir).contains(QStringLiteral("runs_test_engine: stopping at step")));
  QCOMPARE(studio::ui::readRunInfo(dir).state, RunState::Stopped);
}

// An engine that ignores SIGTERM is killed after the grace time, worker ranks included, and the
// studio records the stop the engine could not.
void TestLocalLauncher::stopKillsTheGroup() {
  LocalLauncher launcher;
  setUp(launcher);
  QString dir;
  QVERIFY(launchRunning(
      launcher, {trainConfig({{"test_ignore_sigterm", "true"}}), base_, "stubborn", 2}, dir));
  LaunchRecord record;
  QVERIFY(LaunchRecord::read(dir, record));
  QCOMPARE(record.nproc, 2);
  QCOMPARE(record.command.mid(record.command.size() - 2),
           (QStringList{QStringLiteral("--nproc"), QStringLiteral("2")}));
  static const QRegularExpression workerLine(QStringLiteral("\\[rank 1\\] worker pid (\\d+)"));
  QTRY_VERIFY(workerLine.match(readLog(dir)).hasMatch());
  const qint64 worker = workerLine.match(readLog(dir)).captured(1).toLongLong();
  QVERIFY(studio::ui::processAlive(worker));
  QCOMPARE(studio::ui::readRunInfo(dir).worldSize, 2);

  QSignalSpy requested(&launcher, &LocalLauncher::stopRequested);
  QSignalSpy finished(&launcher, &LocalLauncher::stopFinished);
  QElapsedTimer clock;
  clock.start();
  launcher.stop(dir, 1);
  QTRY_COMPARE(requested.size(), 1);
  QTest::qWait(500);
  QVERIFY(studio::ui::processAlive(record.pid));  // SIGTERM was ignored; the grace time runs
  launcher.stop(dir, 60);                         // asking again does not put the SIGKILL off
  QTRY_COMPARE(requested.size(), 2);
  QTRY_COMPARE_WITH_TIMEOUT(finished.size(), 1, 6000);
  QVERIFY(clock.elapsed() >= 1000);
  QCOMPARE(finished.front().at(1).toBool(), true);
  QVERIFY(!studio::ui::processAlive(record.pid));
  QTRY_VERIFY(!studio::ui::processAlive(worker));  // the whole process group went

  const studio::RunStatus st = readStatus(dir);
  QCOMPARE(st.state, studio::RunState::Stopped);
  QCOMPARE(st.exit_code, std::optional<int>(128 + SIGKILL));
  QVERIFY2(QString::fromStdString(st.reason).contains(QStringLiteral("killed by the studio")),
           st.reason.c_str());
  studio::EventFileReader reader(path(dir, studio::kEventsFileName));
  const studio::EventPollResult events = reader.poll();
  QCOMPARE(reader.parser().bad_lines(), std::uint64_t{0});
  QVERIFY(!events.events.empty());
  const auto* end = events.events.back().get<studio::EndEvent>();
  QVERIFY(end);
  QCOMPARE(end->state, std::string("stopped"));
  QCOMPARE(studio::ui::readRunInfo(dir).state, RunState::Stopped);
}

void TestLocalLauncher::foreignPidNeverSignalled_data() {
  QTest::addColumn<QString>("record");
  QTest::addColumn<QString>("message");
  QTest::newRow("launch record names an unrelated process") << "launch record"
                                                            << "was not signalled";
  QTest::newRow("status.json names an unrelated process") << "status"
                                                          << "was not signalled";
  QTest::newRow("pid of another run's engine") << "other run"
                                               << "was not signalled";
  QTest::newRow("run on another host") << "remote"
                                       << "not on this machine";
}

void TestLocalLauncher::foreignPidNeverSignalled() {
  QFETCH(QString, record);
  QFETCH(QString, message);
  LocalLauncher launcher;
  setUp(launcher);
  const QString dir = tmp_->filePath(QStringLiteral("old run"));
  QVERIFY(QDir().mkpath(dir));
  qint64 pid = 0;
  QString otherRun;
  std::unique_ptr<Sleeper> sleeper;
  if (record == QLatin1String("other run")) {
    QVERIFY(launchRunning(launcher, {trainConfig(), base_, "other", 1}, otherRun));
    pid = readStatus(otherRun).pid;
  } else {
    sleeper = std::make_unique<Sleeper>();
    pid = sleeper->pid();
  }
  if (record == QLatin1String("status")) {
    writeStatus(dir, studio::RunState::Running, pid);
  } else if (record == QLatin1String("remote")) {
    writeStatus(dir, studio::RunState::Running, pid, QStringLiteral("gpu-node-7"));
  } else {
    LaunchRecord r;
    r.pid = pid;
    r.engine = kEngine;
    r.host = studio::ui::localHostName();
    QCOMPARE(r.write(dir), QString());
  }

  QSignalSpy requested(&launcher, &LocalLauncher::stopRequested);
  QSignalSpy failed(&launcher, &LocalLauncher::stopFailed);
  launcher.stop(dir, 0);
  QTRY_COMPARE(failed.size(), 1);
  const QString text = failed.front().at(1).toString();
  QVERIFY2(text.contains(message), qPrintable(text));
  QCOMPARE(requested.size(), 0);
  QTest::qWait(300);
  QVERIFY(studio::ui::processAlive(pid));
  if (!otherRun.isEmpty())
    QVERIFY(isRunning(otherRun));
  else
    QVERIFY(sleeper->running());
}

void TestLocalLauncher::stopWhatIsNotRunning() {
  LocalLauncher launcher;
  setUp(launcher);
  QString dir;
  QVERIFY(launchRunning(launcher, {trainConfig({{"test_steps", "2"}}), base_, "short", 1}, dir));
  QTRY_COMPARE(readStatus(dir).state, studio::RunState::Finished);
  QTRY_VERIFY(!studio::ui::processAlive(readStatus(dir).pid));
  QSignalSpy failed(&launcher, &LocalLauncher::stopFailed);
  launcher.stop(dir);
  QTRY_COMPARE(failed.size(), 1);
  QVERIFY(failed.front().at(1).toString().contains(QStringLiteral("is not running")));

  const QString empty = tmp_->filePath(QStringLiteral("nothing here"));
  QVERIFY(QDir().mkpath(empty));
  launcher.stop(empty);
  QTRY_COMPARE(failed.size(), 2);
  QVERIFY(failed.back().at(1).toString().contains(QStringLiteral("cannot tell which process")));
}

void TestLocalLauncher::launchErrors_data() {
  QTest::addColumn<QString>("engine");  // "@exe": the test engine
  QTest::addColumn<QString>("root");    // relative to the temporary folder
  QTest::addColumn<int>("nproc");
  QTest::addColumn<QString>("message");
  QTest::newRow("no engine set") << ""
                                 << "runs" << 1 << "no training engine is set";
  QTest::newRow("engine missing") << "/nonexistent/bin/studio-train"
                                  << "runs" << 1 << "/nonexistent/bin/studio-train does not exist";
  QTest::newRow("engine is a folder") << "project"
                                      << "runs" << 1 << "is not a program file";
  QTest::newRow("engine not executable") << "plain-file"
                                         << "runs" << 1 << "is not executable";
  QTest::newRow("runs folder not creatable")
      << "@exe"
      << "plain-file/runs" << 1 << "cannot create the runs folder";
  QTest::newRow("nproc 0") << "@exe"
                           << "runs" << 0 << "nproc must be at least 1";
}

void TestLocalLauncher::launchErrors() {
  QFETCH(QString, engine);
  QFETCH(QString, root);
  QFETCH(int, nproc);
  QFETCH(QString, message);
  appendRaw(tmp_->path(), "plain-file", "not a program");
  LocalLauncher launcher;
  launcher.setEngineProgram(engine == QLatin1String("@exe") ? kEngine
                            : engine.isEmpty() || engine.startsWith(QLatin1Char('/'))
                                ? engine
                                : tmp_->filePath(engine));
  launcher.setRunsRoot(tmp_->filePath(root));
  QSignalSpy launched(&launcher, &LocalLauncher::launched);
  QString error;
  QCOMPARE(launcher.launch({trainConfig(), base_, "x", nproc}, &error), QString());
  QVERIFY2(error.contains(message), qPrintable(error));
  QCOMPARE(launched.size(), 0);
  QVERIFY(QDir(tmp_->filePath(QStringLiteral("runs")))
              .entryList(QDir::Dirs | QDir::NoDotAndDotDot)
              .isEmpty());
}

// The engine refuses the run before it records anything: launchFailed says why, from its log.
void TestLocalLauncher::engineExitsBeforeStarting() {
  LocalLauncher launcher;
  setUp(launcher);
  QSignalSpy failed(&launcher, &LocalLauncher::launchFailed);
  QString error;
  const QString dir = launcher.launch(
      {trainConfig({{"test_fail_before_start", "3"}}), base_, "refused", 1}, &error);
  QVERIFY2(!dir.isEmpty(), qPrintable(error));
  launched_ << dir;
  QTRY_COMPARE(failed.size(), 1);
  QCOMPARE(failed.front().front().toString(), dir);
  const QString expected = QStringLiteral("error: model folder %1 not found")
                               .arg(QDir(base_).filePath(QStringLiteral("models/tiny-llama")));
  QVERIFY2(failed.front().at(1).toString().contains(expected),
           qPrintable(failed.front().at(1).toString()));
  const studio::ui::RunInfo info = studio::ui::readRunInfo(dir);
  QCOMPARE(info.state, RunState::Failed);
  QVERIFY2(info.reason.contains(expected), qPrintable(info.reason));
}

QTEST_MAIN(TestLocalLauncher)
#include "tst_local_launcher.moc"
