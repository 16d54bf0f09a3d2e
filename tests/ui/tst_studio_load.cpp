// The studio under load, as a shown window on the offscreen platform: 200 runs in the runs list
// (some with 2 GB events files), a 2 GB events file of 16 ranks on the dashboard, the shown run's
// folder deleted, and a run on a read-only file system. Throughout, a probe on the GUI thread
// measures the longest time the event loop did not turn (a stall), which must stay under 100 ms;
// memory must stay bounded; nothing may crash or switch runs unasked.
//
// STUDIO_LOAD_EVENTS_MB sets the size of the big events file (default 2048); STUDIO_STALL_LIMIT_MS
// the stall limit (default 100).
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QTimer>
#include <QRegularExpression>
#include <QtTest>

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <qcustomplot.h>

#include <algorithm>
#include <set>
#include <string>

#include "stall_probe.h"
#include "step_lines.h"
#include "studio/runs/events.h"
#include "studio/ui/dashboard/event_tailer.h"
#include "studio/ui/dashboard/run_dashboard.h"
#include "studio/ui/dashboard/run_series.h"
#include "studio/ui/main_window.h"
#include "studio/ui/runs/run_store.h"
#include "studio/ui/shell/runs_panel.h"

using studio::ui::ChartKind;
using studio::ui::MainWindow;
using studio::ui::StudioPaths;

namespace {

int envInt(const char* name, int fallback) {
  const QByteArray v = qgetenv(name);
  bool ok = false;
  const int n = v.toInt(&ok);
  return ok && n > 0 ? n : fallback;
}

// Resident memory of this process in MiB (/proc/self/status VmRSS).
double rssMib() {
  QFile f(QStringLiteral("/proc/self/status"));
  if (!f.open(QIODevice::ReadOnly)) return 0;
  for (const QByteArray& line : f.readAll().split('\n'))
    if (line.startsWith("VmRSS:")) return line.mid(6).trimmed().split(' ').front().toDouble() / 1024;
  return 0;
}

void writeFile(const QString& path, const std::string& bytes) {
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Append) ||
      f.write(bytes.data(), qint64(bytes.size())) != qint64(bytes.size()))
    qFatal("cannot write %s", qPrintable(path));
}

// Appends one event the way the engine does.
template <class E>
void appendEvent(const QString& path, const E& event) {
  studio::EventWriter w;
  std::string error = w.open(QFile::encodeName(path).toStdString());
  if (error.empty()) error = w.write(event);
  if (error.empty()) error = w.close();
  if (!error.empty()) qFatal("%s", error.c_str());
}

studio::StartEvent startEvent(int ranks) {
  studio::StartEvent s;
  s.time = 1717171717.0;
  s.stage = "sft";
  s.world_size = ranks;
  s.sequence_parallel_size = ranks;
  s.sequence_parallel_mode = "ulysses";
  return s;
}

// A run folder with `steps` step lines of `ranks` ranks, ended (status.json and end event).
void writeRun(const QString& dir, long steps, int ranks, bool ended = true) {
  QDir().mkpath(dir);
  const QString events = dir + "/events.jsonl";
  appendEvent(events, startEvent(ranks));
  std::string text;
  for (long s = 1; s <= steps; ++s) step_lines::appendStep(text, s, ranks, steps);
  writeFile(events, text);
  if (!ended) return;
  appendEvent(events, studio::EndEvent{"finished", "trained"});
  studio::RunStatus st;
  st.state = studio::RunState::Finished;
  st.exit_code = 0;
  st.step = steps;
  const std::string error = st.write(QFile::encodeName(dir + "/status.json").toStdString());
  if (!error.empty()) qFatal("%s", error.c_str());
}

}  // namespace

class TestStudioLoad : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir tmp_;
  StudioPaths paths_;
  qint64 stallLimit_ = 100;

  QString root() const { return paths_.runsRoot; }

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    // The studio's settings (runs opened, the last run shown) of this test alone.
    qputenv("XDG_CONFIG_HOME", QFile::encodeName(tmp_.filePath(QStringLiteral("config"))));
    paths_.runsRoot = tmp_.filePath(QStringLiteral("runs"));
    QVERIFY(QDir().mkpath(paths_.runsRoot));
    stallLimit_ = envInt("STUDIO_STALL_LIMIT_MS", 100);
  }

  // The probe the tests below rely on counts what the GUI thread does itself: work that keeps
  // the loop from turning, and a blocking call it sleeps in, are both stalls (only the time the
  // thread was ready but had no core, or its virtual CPU was not running, is left out), and it
  // tells the two apart.
  void probeSeesTheGuiThreadHeld_data() {
    QTest::addColumn<bool>("sleeps");
    QTest::newRow("working") << false;
    QTest::newRow("blocked in a call") << true;
  }
  void probeSeesTheGuiThreadHeld() {
    QFETCH(bool, sleeps);
    StallProbe probe;
    probe.start();
    QTest::qWait(30);
    QTimer::singleShot(0, this, [sleeps] {
      QElapsedTimer held;
      held.start();
      if (sleeps) ::usleep(150000);
      while (held.elapsed() < 150) {
      }
    });
    QTest::qWait(60);
    const qint64 stall = probe.stop();
    qInfo("%s", qPrintable(probe.describe()));
    QVERIFY2(stall >= 140, qPrintable(probe.describe()));
    QVERIFY(probe.wallWorst() >= stall);
    if (probe.countsRunQueue()) {
      if (sleeps)
        QVERIFY2(stall - probe.workingInWorst() >= 130, qPrintable(probe.describe()));
      else
        QVERIFY2(probe.workingInWorst() >= 130, qPrintable(probe.describe()));
    }
  }

  // 200 runs, 20 of them with a 2 GB events file (sparse: the list reads a file's head and tail
  // only), listed without a stall; switching between them keeps the loop turning.
  void twoHundredRuns() {
    const QString dir = tmp_.filePath(QStringLiteral("many"));
    const QString root = paths_.runsRoot;
    paths_.runsRoot = dir;
    for (int i = 0; i < 200; ++i) {
      const QString run = QStringLiteral("%1/run-%2").arg(dir).arg(i, 3, 10, QLatin1Char('0'));
      writeRun(run, 40 + i, 2);
      if (i % 10 != 0) continue;
      // A head, 2 GB of a hole, and real steps at the end: as the list reads a huge file.
      QFile f(run + "/events.jsonl");
      QVERIFY(f.resize(qint64(2) << 30));
      std::string tail = "\n";
      for (long s = 1000; s < 1100; ++s) step_lines::appendStep(tail, s, 2, 1100);
      writeFile(run + "/events.jsonl", tail);
      appendEvent(run + "/events.jsonl", studio::EndEvent{"finished", "trained"});
    }
    StallProbe probe;
    const double rssBefore = rssMib();
    MainWindow w(paths_);
    w.resize(1600, 1000);
    probe.start();
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    // (runs opened from elsewhere by earlier tests are listed too)
    auto listed = [&] {
      int n = 0;
      for (const auto& run : w.runStore()->runs()) n += run.dir.startsWith(dir + "/") ? 1 : 0;
      return n;
    };
    QTRY_COMPARE_WITH_TIMEOUT(listed(), 200, 120000);
    for (int i = 0; i < 200; i += 20) {
      w.runsPanel()->selectRun(QStringLiteral("%1/run-%2").arg(dir).arg(i, 3, 10, QLatin1Char('0')));
      QTest::qWait(50);
    }
    QTest::qWait(500);
    const qint64 stall = probe.stop();
    qInfo("200 runs: GUI thread %s, memory +%.0f MiB", qPrintable(probe.describe()),
          rssMib() - rssBefore);
    QVERIFY2(stall < stallLimit_, qPrintable(probe.describe()));
    paths_.runsRoot = root;
  }

  // A 2 GB events file of 16 ranks on the dashboard: the first points show at once, the whole
  // file is read without a stall, the series keeps at most kDefaultMaxRows rows (memory bounded),
  // and the memory chart shows 16 ranks in distinct colours.
  void hugeEventsFile() {
    const qint64 target = qint64(envInt("STUDIO_LOAD_EVENTS_MB", 2048)) << 20;
    const QString dir = tmp_.filePath(QStringLiteral("huge/run"));
    QVERIFY(QDir().mkpath(dir));
    const QString events = dir + "/events.jsonl";
    appendEvent(events, startEvent(16));
    QElapsedTimer writing;
    writing.start();
    long steps = 0;
    {
      QFile f(events);
      QVERIFY(f.open(QIODevice::Append));
      std::string chunk;
      const long total = long(target / 2300);  // about 2.3 KB a line with 16 ranks
      while (f.size() < target) {
        chunk.clear();
        for (int i = 0; i < 4000; ++i) step_lines::appendStep(chunk, ++steps, 16, total);
        QCOMPARE(f.write(chunk.data(), qint64(chunk.size())), qint64(chunk.size()));
      }
    }
    const qint64 size = QFileInfo(events).size();
    qInfo("events.jsonl: %.2f GB, %ld steps of 16 ranks, written in %.1f s", double(size) / 1e9,
          steps, double(writing.elapsed()) / 1000);

    MainWindow w(paths_);
    w.resize(1600, 1000);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QTest::qWait(200);
    const double rssBefore = rssMib();
    StallProbe probe;
    probe.start();
    QElapsedTimer reading;
    reading.start();
    QSignalSpy replots(w.dashboard(), &studio::ui::RunDashboard::replotted);
    w.dashboard()->setSmoothing(0.6);
    QVERIFY(w.openRun(dir));
    QTRY_VERIFY_WITH_TIMEOUT(replots.count() > 0 && w.dashboard()->series(dir) &&
                                 w.dashboard()->series(dir)->size() > 0,
                             5000);
    const qint64 firstPaint = reading.elapsed();
    double rssPeak = 0;
    QTRY_VERIFY_WITH_TIMEOUT(
        (rssPeak = std::max(rssPeak, rssMib()),
         qint64(w.dashboard()->tailer(dir)->cursor().offset) == size),
        600000);
    w.dashboard()->flush();
    QTest::qWait(300);
    const qint64 stall = probe.stop();
    const auto* series = w.dashboard()->series(dir);
    qInfo("dashboard: first points after %lld ms, whole file in %.1f s (%.0f MB/s); GUI thread "
          "%s; %zu rows of %zu steps each; memory +%.0f MiB at most",
          firstPaint, double(reading.elapsed()) / 1000,
          double(size) / 1e6 / (double(reading.elapsed()) / 1000), qPrintable(probe.describe()),
          series->size(),
          series->stepsPerRow(), rssPeak - rssBefore);
    QVERIFY2(stall < stallLimit_, qPrintable(probe.describe()));
    QVERIFY(firstPaint < 3000);
    QVERIFY(series->size() <= studio::ui::RunSeries::kDefaultMaxRows);
    QVERIFY(series->stepsPerRow() > 1);
    QCOMPARE(series->steps().back(), double(steps));
    QVERIFY2(rssPeak - rssBefore < 600, "memory bounded, whatever the file's size");
    QCOMPARE(int(series->gpus().size()), 16);

    // The loss graphs, built row by row while rows filled up in place and merged, hold exactly
    // the series: the raw loss point for point, the smoothed curve as a fresh EMA over it.
    const auto lossGraphs = w.dashboard()->graphs(ChartKind::Loss, dir);
    QVERIFY(lossGraphs.size() >= 2);
    const auto& loss = series->values(studio::ui::Metric::Loss);
    const auto smoothed = studio::ui::RunSeries::ema(loss, 0.6);
    for (int which : {0, 1}) {
      const auto data = lossGraphs[std::size_t(which)]->data();
      QCOMPARE(std::size_t(data->size()), series->size());
      for (int i = 0; i < data->size(); ++i) {
        const double want = which == 0 ? loss[std::size_t(i)] : smoothed[std::size_t(i)];
        QVERIFY2(std::abs((data->constBegin() + i)->value - want) <= 1e-9 * std::abs(want),
                 qPrintable(QStringLiteral("graph %1, point %2").arg(which).arg(i)));
        QCOMPARE((data->constBegin() + i)->key, series->steps()[std::size_t(i)]);
      }
    }

    // 16 ranks: an allocated line each, in the legend, in 16 different colours.
    std::set<QRgb> colours;
    int inLegend = 0;
    QCustomPlot* memory = w.dashboard()->plot(ChartKind::Memory);
    for (QCPGraph* g : w.dashboard()->graphs(ChartKind::Memory, dir)) {
      // Allocated lines are named compactly, "RUN: r3"; reserved ones "RUN: rank 3 reserved".
      if (!QRegularExpression(QStringLiteral(": r\\d+$")).match(g->name()).hasMatch()) continue;
      colours.insert(g->pen().color().rgb());
      inLegend += memory->legend->hasItemWithPlottable(g) ? 1 : 0;
    }
    QCOMPARE(int(colours.size()), 16);
    QCOMPARE(inLegend, 16);
  }

  // The shown run's folder deleted: the dashboard says its file is gone and keeps what it drew;
  // the runs list drops it (a run found under the root) without switching the dashboard to
  // another run, or (a run opened from elsewhere) keeps it, saying it no longer exists.
  void shownFolderDeleted() {
    const QString a = root() + "/deleted-a", b = root() + "/deleted-b";
    writeRun(a, 30, 2);
    writeRun(b, 30, 2);
    MainWindow w(paths_);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QTRY_VERIFY_WITH_TIMEOUT(w.runStore()->run(a).has_value() && w.runStore()->run(b).has_value(),
                             20000);
    QVERIFY(w.runsPanel()->selectRun(b));  // as a click in the list
    QCOMPARE(w.currentRun(), b);
    QTRY_VERIFY_WITH_TIMEOUT(w.dashboard()->series(b) && w.dashboard()->series(b)->size() == 30,
                             20000);
    StallProbe probe;
    probe.start();
    QSignalSpy errors(w.dashboard(), &studio::ui::RunDashboard::readError);
    QSignalSpy removed(w.runsPanel(), &studio::ui::RunsPanel::selectedRunRemoved);
    QVERIFY(QDir(b).removeRecursively());
    QTRY_VERIFY2_WITH_TIMEOUT(!errors.isEmpty(),
                              qPrintable(w.currentRun() + " | " + w.dashboard()->runs().join(",")),
                              10000);
    QVERIFY2(errors.last().at(1).toString().contains(QStringLiteral("is gone")),
             qPrintable(errors.last().at(1).toString()));
    w.runStore()->refresh();
    QTRY_COMPARE_WITH_TIMEOUT(removed.count(), 1, 10000);
    QCOMPARE(removed.first().at(0).toString(), b);
    QCOMPARE(w.currentRun(), b);  // not the neighbour the list moved to
    QVERIFY(w.runsPanel()->selectedRun().isEmpty());
    QCOMPARE(w.dashboard()->series(b)->size(), std::size_t(30));  // what was read stays
    QVERIFY2(w.statusBar()->currentMessage().contains(QStringLiteral("is gone")),
             qPrintable(w.statusBar()->currentMessage()));

    // Opened from outside the root, it stays listed, and says why it shows nothing new.
    const QString c = tmp_.filePath(QStringLiteral("elsewhere/deleted-c"));
    writeRun(c, 20, 1);
    QVERIFY(w.openRun(c));
    QTRY_VERIFY_WITH_TIMEOUT(w.dashboard()->series(c) && w.dashboard()->series(c)->size() == 20,
                             20000);
    QVERIFY(QDir(c).removeRecursively());
    w.runStore()->refresh();
    QTRY_VERIFY_WITH_TIMEOUT(w.runStore()->run(c) &&
                                 w.runStore()->run(c)->reason.contains(QStringLiteral("no longer exists")),
                             10000);
    QCOMPARE(w.currentRun(), c);
    QCOMPARE(w.runsPanel()->selectedRun(), c);
    const qint64 stall = probe.stop();
    QVERIFY2(stall < stallLimit_, qPrintable(probe.describe()));
  }

  // A run on a read-only file system (a tmpfs remounted read-only): listed and drawn, nothing in
  // it touched; exporting a chart into it fails with the path and the reason.
  void readOnlyFileSystem() {
    if (::geteuid() != 0) QSKIP("mounting a tmpfs needs root (CI runs as root)");
    const QString mountPoint = tmp_.filePath(QStringLiteral("ro"));
    QVERIFY(QDir().mkpath(mountPoint));
    const QByteArray mp = QFile::encodeName(mountPoint);
    QVERIFY2(::mount("tmpfs", mp.constData(), "tmpfs", 0, "size=16m") == 0, strerror(errno));
    auto unmount = qScopeGuard([&] { ::umount2(mp.constData(), MNT_DETACH); });
    const QString run = mountPoint + "/run";
    writeRun(run, 50, 4);
    QVERIFY2(::mount("tmpfs", mp.constData(), "tmpfs", MS_REMOUNT | MS_RDONLY, "size=16m") == 0,
             strerror(errno));
    auto listing = [&] {
      QStringList out;
      QDirIterator it(mountPoint, QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot,
                      QDirIterator::Subdirectories);
      while (it.hasNext()) {
        const QFileInfo fi(it.next());
        out << QStringLiteral("%1 %2 %3").arg(fi.filePath()).arg(fi.size()).arg(
                   fi.lastModified().toMSecsSinceEpoch());
      }
      out.sort();
      return out;
    };
    const QStringList before = listing();
    {
      MainWindow w(paths_);
      w.show();
      QVERIFY(QTest::qWaitForWindowExposed(&w));
      StallProbe probe;
      probe.start();
      QVERIFY(w.openRun(run));
      QTRY_VERIFY_WITH_TIMEOUT(w.dashboard()->series(run) && w.dashboard()->series(run)->size() == 50,
                               20000);
      QTRY_VERIFY_WITH_TIMEOUT(w.runStore()->run(run) &&
                                   w.runStore()->run(run)->state == studio::ui::RunState::Finished,
                               20000);
      QString error;
      QVERIFY(!w.dashboard()->exportCsv(ChartKind::Loss, run + "/loss.csv", &error));
      QVERIFY2(error.contains(run) && error.contains(QStringLiteral("Read-only file system")),
               qPrintable(error));
      const qint64 stall = probe.stop();
      QVERIFY2(stall < stallLimit_, qPrintable(probe.describe()));
    }
    QCOMPARE(listing(), before);
  }
};

QTEST_MAIN(TestStudioLoad)
#include "tst_studio_load.moc"
