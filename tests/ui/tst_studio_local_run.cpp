// The studio end to end with the real engine: the demo project from the wizard's Launch button
// to a finished run on the dashboard; closing and reopening the window finds the run again; a
// run still training when the window closes is found running by the next window, its dashboard
// keeps receiving steps, and Stop ends it (every rank at the same step, state "stopped").
#include <QDirIterator>
#include <QPushButton>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <memory>

#include "studio/runs/events.h"
#include "studio/config/run_config.h"
#include "studio/ui/dashboard/run_dashboard.h"
#include "studio/ui/dashboard/run_series.h"
#include "studio/ui/main_window.h"
#include "studio/config/sweep.h"
#include "studio/ui/runs/local_launcher.h"
#include "studio/ui/runs/process_probe.h"
#include "studio/ui/runs/run_folder.h"
#include "studio/ui/runs/run_store.h"
#include "studio/ui/shell/demo_project.h"
#include "studio/ui/shell/runs_panel.h"
#include "studio/ui/wizard/review_page.h"
#include "studio/ui/wizard/run_wizard.h"
#include "studio/ui/wizard/sweep_dialog.h"
#include <QLineEdit>
#include <QSpinBox>
#include <algorithm>

using studio::ui::MainWindow;
using studio::ui::RunState;
using studio::ui::StudioPaths;
using studio::ui::runFile;

namespace {

constexpr int kRunTimeoutMs = 240000;  // a loaded 2-core CI machine

std::size_t lossPoints(const MainWindow& w, const QString& dir) {
  const studio::ui::RunSeries* s = w.dashboard()->series(dir);
  return s ? s->values(studio::ui::Metric::Loss).size() : 0;
}

std::optional<RunState> stateOf(const MainWindow& w, const QString& dir) {
  const auto info = w.runStore()->run(dir);
  return info ? std::optional<RunState>(info->state) : std::nullopt;
}

// The last `lines` lines of a file, indented, or a line saying it is not there.
QString tail(const QString& path, int lines) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return QStringLiteral("    (no %1)\n").arg(path);
  // Lines, and the progress bar's updates (\r) as lines of their own.
  QStringList all = QString::fromUtf8(f.readAll())
                        .split(QRegularExpression(QStringLiteral("[\r\n]")), Qt::SkipEmptyParts);
  QString out = QStringLiteral("    %1, last %2 of %3 lines:\n").arg(path).arg(std::min<qsizetype>(lines, all.size())).arg(all.size());
  for (qsizetype i = std::max<qsizetype>(0, all.size() - lines); i < all.size(); ++i)
    out += QStringLiteral("      ") + all[i].left(300) + QLatin1Char('\n');
  return out;
}

// What the studio and the folder say of `dir`, for a failed wait: the listed state and its
// reason, status.json, and the ends of train.log and (for a sweep's point) the sweep's log.
QString describe(const MainWindow& w, const QString& dir) {
  const auto info = w.runStore()->run(dir);
  QString out = QStringLiteral("\n  %1: ").arg(dir);
  out += info ? QStringLiteral("listed as %1 (%2)\n").arg(info->stateText, info->reason)
              : QStringLiteral("not listed by the studio\n");
  out += tail(runFile(dir, studio::kStatusFileName), 20);
  out += tail(runFile(dir, studio::kTrainLogFileName), 15);
  if (info && !info->sweepDir.isEmpty()) {
    out += tail(runFile(info->sweepDir, studio::ui::kSweepLogFileName), 15);
    out += tail(runFile(info->sweepDir, studio::kSweepStatusFileName), 20);
  }
  return out;
}

// Waits up to `ms` for `condition`. A failure prints what the studio and the folders `dirs`
// said (as a warning: QTest cuts a failure's own message at 1 KiB), then fails with `what`.
#define WAIT_OR_DESCRIBE(condition, ms, window, dirs, what)                                    \
  do {                                                                                         \
    if (!QTest::qWaitFor([&] { return bool(condition); }, ms)) {                               \
      QString described;                                                                       \
      for (const QString& d : QStringList(dirs)) described += describe(window, d);             \
      qWarning().noquote() << described;                                                       \
      QFAIL(qPrintable(QStringLiteral("%1 within %2 s (see the warning above)")                \
                           .arg(what)                                                          \
                           .arg((ms) / 1000)));                                                \
    }                                                                                          \
  } while (false)

// Waits up to `ms` for the studio to list `dir` as `expected`.
#define WAIT_FOR_STATE(window, dir, expected, ms)                                              \
  WAIT_OR_DESCRIBE(stateOf(window, dir) == std::optional<RunState>(expected), ms, window, dir, \
                   QStringLiteral("%1 was not listed as %2")                                   \
                       .arg(dir, studio::ui::runStateText(expected)))

// Opens `path` in the wizard (which must size the world to `world` ranks), walks every page
// once it is complete, launches and waits for the run to finish; its folder, or "" on failure.
QString launchFromWizard(MainWindow& w, const QString& path, int world) {
  if (!w.openConfigInWizard(path)) return {};
  studio::ui::RunWizard* wizard = w.wizard();
  if (wizard->target().nproc * wizard->target().nnodes != world) {
    qWarning("the wizard sized the world to %d ranks, not %d",
             wizard->target().nproc * wizard->target().nnodes, world);
    return {};
  }
  while (wizard->nextId() != -1) {
    if (!QTest::qWaitFor([&] { return wizard->currentPage()->isComplete(); }, 20000)) {
      qWarning("the wizard page %s never completed", qPrintable(wizard->currentPage()->title()));
      return {};
    }
    wizard->next();
  }
  auto* launch = wizard->findChild<QPushButton*>(QStringLiteral("launch"));
  if (!QTest::qWaitFor([&] { return launch && launch->isEnabled(); }, 20000)) return {};
  launch->click();
  const QString runDir = w.currentRun();
  if (runDir.isEmpty()) return {};
  if (!QTest::qWaitFor([&] { return stateOf(w, runDir) == std::optional<RunState>(RunState::Finished); },
                       kRunTimeoutMs)) {
    qWarning("the run did not finish in %d s:%s", kRunTimeoutMs / 1000, qPrintable(describe(w, runDir)));
    return {};
  }
  return runDir;
}

// The demo config `name` (resources/demo) with the window's demo model, the demo data by its
// absolute path and each (from, to) of `changes` made, then `extra` appended, written to `path`.
bool writeDemoConfig(const MainWindow& w, const char* name, const QString& path,
                     const QList<QPair<QByteArray, QByteArray>>& changes, const QByteArray& extra = {}) {
  QFile source(QStringLiteral(STUDIO_SOURCE_DIR "/resources/demo/") + QString::fromLatin1(name));
  if (!source.open(QIODevice::ReadOnly)) return false;
  QByteArray yaml = source.readAll();
  yaml.replace(QRegularExpression(QStringLiteral("(?m)^model_name_or_path: .*$")).match(QString::fromUtf8(yaml)).captured(0).toUtf8(),
               "model_name_or_path: " + w.demo()->modelDir().toUtf8());
  yaml.replace("dataset_dir: resources/demo/data", "dataset_dir: " STUDIO_SOURCE_DIR "/resources/demo/data");
  for (const auto& [from, to] : changes) {
    if (!yaml.contains(from)) return false;
    yaml.replace(from, to);
  }
  QFile out(path);
  return out.open(QIODevice::WriteOnly) && out.write(yaml + extra) == yaml.size() + extra.size();
}

// The demo's sft config with `max_steps` steps (a loss each, no checkpoint or evaluation on the
// way) written to `path`, opened in the wizard and started from the Review page's Sweep... as
// `name`, one point at a time over `axes`: the sweep's folder, or "" on failure.
QString startDemoSweep(MainWindow& w, const QString& path, const QByteArray& maxSteps,
                       const QStringList& axes, const QString& name) {
  w.demo()->ensureModel();
  if (!QTest::qWaitFor([&] { return w.demo()->isModelReady(); }, 60000)) return {};
  const QByteArray never = maxSteps.toInt() < 1000 ? QByteArray("1000") : maxSteps;
  if (!writeDemoConfig(w, "sft_demo.yaml", path,
                       {{"max_steps: 60", "max_steps: " + maxSteps},
                        {"logging_steps: 5", "logging_steps: 1"},
                        {"save_steps: 30", "save_steps: " + never},
                        {"eval_steps: 30", "eval_steps: " + never}}) ||
      !w.openConfigInWizard(path))
    return {};
  studio::ui::RunWizard* wizard = w.wizard();
  auto* sweep = wizard->reviewPage()->sweepButton();
  if (!QTest::qWaitFor([&] { return sweep->isEnabled(); }, 20000)) return {};
  sweep->click();
  studio::ui::SweepDialog* dialog = wizard->sweepDialog();
  if (!dialog) return {};
  dialog->setAxes(axes);
  dialog->nameEdit()->setText(name);
  dialog->parallelBox()->setValue(1);
  if (!QTest::qWaitFor([&] { return !dialog->isChecking() && dialog->startButton()->isEnabled(); },
                       20000))
    return {};
  dialog->startButton()->click();
  return w.lastSweepDir();
}

}  // namespace

class TestStudioLocalRun : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase();
  void demoFromWizardToFinishedRun();
  void dpoWithSequenceParallelFromAYaml();
  void llamaFactoryV1FileWithRelativeDataPaths();
  void runningRunSurvivesTheWindowAndStops();
  void sweepFromTheReviewPage();
  void sweepStoppedFromTheRunsList();
  void cleanup();

 private:
  std::unique_ptr<MainWindow> window();
  QTemporaryDir tmp_;
  StudioPaths paths_;
};

void TestStudioLocalRun::initTestCase() {
  QVERIFY(tmp_.isValid());
  paths_.engine = QStringLiteral(STUDIO_TRAIN_EXE);
  paths_.resources = QStringLiteral(STUDIO_SOURCE_DIR "/resources");
  paths_.runsRoot = tmp_.filePath(QStringLiteral("runs"));
  paths_.dataDir = tmp_.filePath(QStringLiteral("data"));
}

// A test that fails half way must not leave a run training for its 100000 steps (and loading
// the machine for every test after it): each process a status file under the runs folder still
// names as running, if it is still that run's engine or sweep, gets SIGKILL with its group
// (nothing is found after a test that passed: its runs ended).
void TestStudioLocalRun::cleanup() {
  // Sweeps first: a queue still running would start its next point once the last one is gone.
  QStringList found;
  for (const char* name : {studio::kSweepStatusFileName, studio::kStatusFileName}) {
    QDirIterator files(paths_.runsRoot, {QString::fromLatin1(name)}, QDir::Files,
                       QDirIterator::Subdirectories);
    while (files.hasNext()) found << files.next();
  }
  for (const QString& file : found) {
    studio::RunStatus status;
    std::string error;
    if (!studio::RunStatus::read(file.toStdString(), status, error) ||
        status.state != studio::RunState::Running || status.pid <= 0)
      continue;
    const QString dir = QFileInfo(file).path();
    const bool sweep = file.endsWith(QString::fromLatin1(studio::kSweepStatusFileName));
    if (sweep ? !studio::ui::isSweepProcess(status.pid, dir, paths_.engine)
              : !studio::ui::isRunProcess(status.pid, dir, paths_.engine))
      continue;
    qWarning("cleanup: %s %lld (%s) was still running: killed", sweep ? "sweep" : "run",
             static_cast<long long>(status.pid), qPrintable(dir));
    if (sweep) {
      // SIGTERM, which it relays to the points it started (even one still loading, which has no
      // status.json yet); what is left after 15 s is killed below.
      ::kill(static_cast<pid_t>(status.pid), SIGTERM);
      (void)QTest::qWaitFor([&] { return !studio::ui::processAlive(status.pid); }, 15000);
    }
    const pid_t group = ::getpgid(static_cast<pid_t>(status.pid));
    if (group > 1 && group != ::getpgrp()) ::kill(-group, SIGKILL);
    ::kill(static_cast<pid_t>(status.pid), SIGKILL);
  }
}

std::unique_ptr<MainWindow> TestStudioLocalRun::window() {
  auto w = std::make_unique<MainWindow>(paths_);
  w->runStore()->setPollInterval(300);
  w->show();
  return w;
}

void TestStudioLocalRun::demoFromWizardToFinishedRun() {
  QString runDir;
  {
    auto w = window();
    QSignalSpy opened(w.get(), &MainWindow::demoWizardOpened);
    w->openDemoWizard();
    QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 1, 60000);  // once the demo model is created
    QVERIFY(w->demo()->isModelReady());
    studio::ui::RunWizard* wizard = w->wizard();
    QVERIFY(wizard);
    // As a user: Next through every page (each must validate), then Launch on the review page.
    QTRY_VERIFY_WITH_TIMEOUT(wizard->currentPage() && wizard->currentPage()->isComplete(), 20000);
    while (wizard->nextId() != -1) {
      const int before = wizard->currentId();
      QTRY_VERIFY2_WITH_TIMEOUT(wizard->currentPage()->isComplete(),
                                qPrintable(wizard->currentPage()->title()), 20000);
      wizard->next();
      QVERIFY2(wizard->currentId() != before, qPrintable(wizard->currentPage()->title()));
    }
    auto* launch = wizard->findChild<QPushButton*>(QStringLiteral("launch"));
    QVERIFY(launch);
    QTRY_VERIFY_WITH_TIMEOUT(launch->isEnabled(), 20000);
    launch->click();
    runDir = w->currentRun();
    QVERIFY2(!runDir.isEmpty(), "Launch did not start a run");
    QVERIFY(runDir.startsWith(paths_.runsRoot));
    QVERIFY(QFile::exists(runDir + QStringLiteral("/config.yaml")));

    // Live: points arrive while the run is still going, then it finishes with all of them.
    QTRY_VERIFY_WITH_TIMEOUT(lossPoints(*w, runDir) > 0, kRunTimeoutMs);
    WAIT_FOR_STATE(*w, runDir, RunState::Finished, kRunTimeoutMs);
    // The demo: 60 steps logged every 5.
    QTRY_COMPARE_WITH_TIMEOUT(lossPoints(*w, runDir), std::size_t(12), 10000);
    const auto& loss = w->dashboard()->series(runDir)->values(studio::ui::Metric::Loss);
    QVERIFY2(loss.back() < loss.front() - 2.0,
             qPrintable(QStringLiteral("loss %1 -> %2").arg(loss.front()).arg(loss.back())));
    QVERIFY(w->dashboard()->series(runDir)->has(studio::ui::Metric::TokensPerSec));
    w->close();
  }
  // A new window (a restarted studio) lists the run as finished and draws all of it.
  auto w = window();
  QTRY_VERIFY_WITH_TIMEOUT(stateOf(*w, runDir).has_value(), 10000);
  QCOMPARE(*stateOf(*w, runDir), RunState::Finished);
  QVERIFY(w->openRun(runDir));
  QTRY_COMPARE_WITH_TIMEOUT(lossPoints(*w, runDir), std::size_t(12), 10000);
  w->close();
}

// A LLaMA-Factory DPO YAML with sequence_parallel_size 2 opened into the wizard: the wizard sizes
// the world for SP 2, Launch starts `studio-train train --nproc 2`, and the dashboard shows the
// DPO metrics of the two-rank run.
void TestStudioLocalRun::dpoWithSequenceParallelFromAYaml() {
  auto w = window();
  w->demo()->ensureModel();
  QTRY_VERIFY_WITH_TIMEOUT(w->demo()->isModelReady(), 60000);
  const QString path = tmp_.filePath(QStringLiteral("dpo-sp2.yaml"));
  QVERIFY(writeDemoConfig(*w, "dpo_demo.yaml", path,
                          {{"max_steps: 30", "max_steps: 6"}, {"logging_steps: 5", "logging_steps: 1"}},
                          "sequence_parallel_size: 2\nsequence_parallel_mode: zigzag-ring\n"));

  const QString runDir = launchFromWizard(*w, path, 2);
  QVERIFY(!runDir.isEmpty());
  const auto info = w->runStore()->run(runDir);
  QCOMPARE(info->stage, QStringLiteral("dpo"));
  QCOMPARE(info->spSize, 2);
  QCOMPARE(info->worldSize, 2);
  QTRY_COMPARE_WITH_TIMEOUT(lossPoints(*w, runDir), std::size_t(6), 10000);
  const studio::ui::RunSeries* series = w->dashboard()->series(runDir);
  QVERIFY(series->isDpo());
  QCOMPARE(series->values(studio::ui::Metric::RewardsAccuracies).size(), std::size_t(6));
  QVERIFY(std::abs(series->values(studio::ui::Metric::Loss).front() - std::log(2.0)) < 0.01);
  w->close();
}

// A LLaMA-Factory v1 file whose train_dataset and dataset YAML use paths relative to the
// config's folder (as v1's examples, run from their repository root): opened in the wizard and
// launched, the run (in its own folder, Ulysses cp_size 2 over 2 ranks) reads them and finishes.
void TestStudioLocalRun::llamaFactoryV1FileWithRelativeDataPaths() {
  auto w = window();
  w->demo()->ensureModel();
  QTRY_VERIFY_WITH_TIMEOUT(w->demo()->isModelReady(), 60000);
  const QDir project(tmp_.filePath(QStringLiteral("v1-project")));
  QVERIFY(project.mkpath(QStringLiteral("data")));
  const QString fixtures = QStringLiteral(STUDIO_SOURCE_DIR "/tests/fixtures/configs/v1/data/");
  for (const char* f : {"sft.yaml", "identity.json", "chat.jsonl", "messages.jsonl"})
    QVERIFY(QFile::copy(fixtures + f, project.filePath(QStringLiteral("data/")) + f));
  const QString path = project.filePath(QStringLiteral("train_v1.yaml"));
  QFile out(path);
  QVERIFY(out.open(QIODevice::WriteOnly));
  out.write("model: " + w->demo()->modelDir().toUtf8() +
            "\ntemplate: qwen\ncp_mode: ulysses\ncp_size: 2\ntrain_dataset: data/sft.yaml\n"
            "output_dir: outputs/v1\nmicro_batch_size: 2\ncutoff_len: 128\n"
            "learning_rate: 1.0e-3\nmax_steps: 4\nlogging_steps: 1\n");
  out.close();

  const QString runDir = launchFromWizard(*w, path, 2);
  QVERIFY(!runDir.isEmpty());
  const auto info = w->runStore()->run(runDir);
  QCOMPARE(info->spSize, 2);
  QTRY_COMPARE_WITH_TIMEOUT(lossPoints(*w, runDir), std::size_t(4), 10000);
  // The run folder holds the dataset YAML it read, its paths absolute.
  QFile yaml(QDir(runDir).filePath(QStringLiteral("train_dataset.yaml")));
  QVERIFY(yaml.open(QIODevice::ReadOnly));
  QVERIFY(yaml.readAll().contains(project.filePath(QStringLiteral("data/chat.jsonl")).toUtf8()));
  w->close();
}

void TestStudioLocalRun::runningRunSurvivesTheWindowAndStops() {
  QString runDir;
  std::size_t pointsBefore = 0;
  {
    auto w = window();
    QSignalSpy opened(w.get(), &MainWindow::demoWizardOpened);
    w->openDemoWizard();
    QTRY_COMPARE_WITH_TIMEOUT(opened.count(), 1, 60000);
    studio::ui::RunWizard* wizard = w->wizard();
    QVERIFY(wizard);
    studio::RunConfig cfg = wizard->config();
    cfg.max_steps = 100000;  // trains until stopped
    cfg.logging_steps = 1;
    cfg.eval_strategy = studio::EvalStrategy::No;
    cfg.save_steps = 100000;
    runDir = w->launchLocal(cfg, wizard->baseDir(), studio::ui::LaunchTarget{});
    QVERIFY(!runDir.isEmpty());
    QTRY_VERIFY_WITH_TIMEOUT(lossPoints(*w, runDir) >= 2, kRunTimeoutMs);
    QCOMPARE(stateOf(*w, runDir), std::optional<RunState>(RunState::Running));
    pointsBefore = lossPoints(*w, runDir);
    w->close();
  }  // the window is gone; the run is not

  auto w = window();
  WAIT_FOR_STATE(*w, runDir, RunState::Running, 10000);
  QVERIFY(w->openRun(runDir));
  // Reattached: everything so far, then new steps.
  QTRY_VERIFY_WITH_TIMEOUT(lossPoints(*w, runDir) > pointsBefore + 2, 60000);

  QSignalSpy stopped(w->launcher(), &studio::ui::LocalLauncher::stopFinished);
  QVERIFY(w->runsPanel()->selectRun(runDir));
  QTRY_VERIFY(w->runsPanel()->stopAction()->isEnabled());
  w->runsPanel()->stopAction()->trigger();
  QTRY_COMPARE_WITH_TIMEOUT(stopped.count(), 1, 30000);
  QCOMPARE(stopped.at(0).at(1).toBool(), false);  // stopped by SIGTERM, not killed
  WAIT_FOR_STATE(*w, runDir, RunState::Stopped, 10000);
  w->close();
}

// The Review page's Sweep...: two learning rates of a short demo, one at a time. The studio
// starts `studio-train sweep` detached; the runs list shows both points at once, the second
// Queued while the first trains, each then finished with its own learning rate.
void TestStudioLocalRun::sweepFromTheReviewPage() {
  auto w = window();
  // Each point's folder written 1 s later, as on a busy file system: the studio starts following
  // the sweep when sweep.json appears, and must list its points and go on looking from then on
  // (with sweep.json written first, it found no point, stopped polling and never saw them train).
  const QString sweepDir = [&] {
    qputenv("STUDIO_INJECT_FAULT", "sweep.write.slow");  // the sweep's process inherits it
    const auto unset = qScopeGuard([] { qunsetenv("STUDIO_INJECT_FAULT"); });
    return startDemoSweep(*w, tmp_.filePath(QStringLiteral("sweep-base.yaml")), "6",
                          {QStringLiteral("learning_rate=1e-3,3e-3")}, QStringLiteral("lr-pair"));
  }();
  QVERIFY2(sweepDir.startsWith(paths_.runsRoot + QStringLiteral("/lr-pair-")), qPrintable(sweepDir));
  QTRY_VERIFY(!w->wizard() || !w->wizard()->isVisible());

  const QString first = sweepDir + QStringLiteral("/00-learning_rate=1e-3");
  const QString second = sweepDir + QStringLiteral("/01-learning_rate=3e-3");
  // Both listed while the first trains: the second is Queued.
  WAIT_OR_DESCRIBE(stateOf(*w, second) == std::optional<RunState>(RunState::Queued) &&
                       stateOf(*w, first).has_value() &&
                       stateOf(*w, first) != std::optional<RunState>(RunState::Queued),
                   kRunTimeoutMs, *w, (QStringList{first, second}),
                   QStringLiteral("the first point did not start while the second was Queued"));
  QCOMPARE(w->runStore()->run(second)->sweep, QStringLiteral("lr-pair"));
  for (const QString& dir : {first, second})
    WAIT_FOR_STATE(*w, dir, RunState::Finished, kRunTimeoutMs);
  QVERIFY(w->openRun(second));
  QTRY_COMPARE_WITH_TIMEOUT(lossPoints(*w, second), std::size_t(6), 10000);
  const auto& lr = w->dashboard()->series(second)->values(studio::ui::Metric::LearningRate);
  QVERIFY(!lr.empty());
  QVERIFY2(*std::max_element(lr.begin(), lr.end()) > 2e-3 &&
               *std::max_element(lr.begin(), lr.end()) <= 3e-3 * (1 + 1e-6),
           qPrintable(QString::number(*std::max_element(lr.begin(), lr.end()))));
  QVERIFY(QFile(sweepDir + QStringLiteral("/sweep.log")).size() > 0);
  // The queue ends on its own once both points have (it looks every 100 ms), as finished.
  studio::RunStatus queue;
  WAIT_OR_DESCRIBE([&] {
    std::string error;
    return studio::RunStatus::read((sweepDir + QStringLiteral("/sweep-status.json")).toStdString(),
                                   queue, error) &&
           queue.state == studio::RunState::Finished;
  }(), 30000, *w, (QStringList{first, second}), QStringLiteral("the sweep's queue did not end as finished"));
  QCOMPARE(queue.exit_code, std::optional<int>(0));
  QTRY_VERIFY(!studio::ui::processAlive(queue.pid));
  w->close();
}

// Stop Sweep in the runs list: while the first of three points trains, the studio stops its
// queue and that point; the two others never start (Queued, saying how to continue), and the
// action is off once nothing of the sweep runs.
void TestStudioLocalRun::sweepStoppedFromTheRunsList() {
  auto w = window();
  const QString sweepDir =
      startDemoSweep(*w, tmp_.filePath(QStringLiteral("long-sweep-base.yaml")), "100000",
                     {QStringLiteral("learning_rate=1e-3,3e-3,1e-2")}, QStringLiteral("lr-long"));
  QVERIFY(!sweepDir.isEmpty());
  const QStringList points{sweepDir + QStringLiteral("/00-learning_rate=1e-3"),
                           sweepDir + QStringLiteral("/01-learning_rate=3e-3"),
                           sweepDir + QStringLiteral("/02-learning_rate=1e-2")};
  WAIT_FOR_STATE(*w, points[0], RunState::Running, kRunTimeoutMs);
  WAIT_FOR_STATE(*w, points[2], RunState::Queued, 10000);
  // Selecting a point that has not started offers the whole sweep's stop, not its own.
  QVERIFY(w->runsPanel()->selectRun(points[2]));
  QTRY_VERIFY(w->runsPanel()->stopSweepAction()->isEnabled());
  QVERIFY(!w->runsPanel()->stopAction()->isEnabled());

  QSignalSpy stopped(w->launcher(), &studio::ui::LocalLauncher::stopFinished);
  w->runsPanel()->stopSweepAction()->trigger();
  QTRY_VERIFY_WITH_TIMEOUT(std::any_of(stopped.begin(), stopped.end(),
                                       [&](const QList<QVariant>& s) {
                                         return s.at(0).toString() == sweepDir;
                                       }),
                           60000);
  for (const QList<QVariant>& s : stopped) QCOMPARE(s.at(1).toBool(), false);  // on SIGTERM
  WAIT_FOR_STATE(*w, points[0], RunState::Stopped, 10000);
  for (int i = 1; i < 3; ++i) {
    QCOMPARE(stateOf(*w, points[i]), std::optional<RunState>(RunState::Queued));
    QVERIFY(!QFileInfo::exists(points[i] + QStringLiteral("/status.json")));
  }
  QVERIFY2(w->runStore()->run(points[1])->reason.contains(QStringLiteral("--resume")),
           qPrintable(w->runStore()->run(points[1])->reason));
  QTRY_VERIFY(!w->runsPanel()->stopSweepAction()->isEnabled());
  studio::RunStatus queue;
  std::string error;
  QVERIFY2(studio::RunStatus::read((sweepDir + QStringLiteral("/sweep-status.json")).toStdString(),
                                   queue, error),
           error.c_str());
  QCOMPARE(queue.state, studio::RunState::Stopped);
  QCOMPARE(queue.exit_code, std::optional<int>(130));
  w->close();
}

QTEST_MAIN(TestStudioLocalRun)
#include "tst_studio_local_run.moc"
