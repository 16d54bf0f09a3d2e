// readRunInfo: what the studio makes of a run folder, whatever state the files are in, and the
// digest that keeps rescans of a huge events.jsonl cheap; and a folder whose files are a FIFO, a
// link to /dev/zero or a folder, read in time.
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include "../../base/hostile_files.h"
#include "runs_test_support.h"
#include "studio/ui/runs/launch_record.h"
#include "studio/ui/runs/run_event_digest.h"
#include "studio/ui/runs/run_folder.h"
#include "studio/ui/runs/run_info.h"

using studio::ui::RunInfo;
using studio::ui::RunState;
using namespace runs_test;

Q_DECLARE_METATYPE(studio::ui::RunState)

class TestRunInfo : public QObject {
  Q_OBJECT

 private slots:
  void folder_data();
  void folder();
  void hugeEventsReadIncrementally();
  void replacedEventsStartOver();
  void hostileFiles_data();
  void hostileFiles();

 private:
  qint64 livePid();
  qint64 deadPid();
  void setUp(const QString& kind, const QString& dir);

  std::unique_ptr<Sleeper> sleeper_;  // for the rows that need a live pid
};

qint64 TestRunInfo::livePid() {
  sleeper_ = std::make_unique<Sleeper>();
  return sleeper_->pid();
}

qint64 TestRunInfo::deadPid() {
  // The pid of a process that has come and gone (and been reaped).
  QProcess p;
  p.start(QStringLiteral("true"), {});
  if (!p.waitForStarted()) qFatal("cannot start true");
  const qint64 pid = p.processId();
  p.waitForFinished();
  return pid;
}

void TestRunInfo::setUp(const QString& kind, const QString& dir) {
  const double t0 = 1717171717.0;
  if (kind == QLatin1String("finished")) {
    appendEvents(dir, startEvent(t0, 2, "ulysses", 2, 10), stepEvent(9, 1.5, t0 + 9),
                 stepEvent(10, 1.25, t0 + 10), studio::EndEvent{"finished", "completed 10 steps"});
    writeStatus(dir, studio::RunState::Finished, 4242, studio::ui::localHostName(),
                "completed 10 steps");
  } else if (kind == QLatin1String("failed")) {
    appendEvents(dir, startEvent(t0), stepEvent(3, 2.5, t0 + 3));
    writeStatus(dir, studio::RunState::Failed, 4242, QStringLiteral("gpu-node-7"),
                "rank 1: CUDA out of memory");
  } else if (kind == QLatin1String("running, live pid")) {
    appendEvents(dir, startEvent(t0, 4, "ulysses", 8), stepEvent(120, 1.8, t0 + 120));
    writeStatus(dir, studio::RunState::Running, livePid());
  } else if (kind == QLatin1String("running, dead pid")) {
    appendEvents(dir, startEvent(t0), stepEvent(7, 1.9, t0 + 7));
    writeStatus(dir, studio::RunState::Running, deadPid());
  } else if (kind == QLatin1String("running on another host")) {
    appendEvents(dir, startEvent(t0));
    writeStatus(dir, studio::RunState::Running, deadPid(), QStringLiteral("gpu-node-7"));
  } else if (kind == QLatin1String("garbage status")) {
    appendRaw(dir, studio::kStatusFileName, "{\"state\": runn");
  } else if (kind == QLatin1String("odd fields")) {
    // Written by another tool: a pid as text, a device as "cuda:0", a loss as a word.
    appendEvents(dir, startEvent(t0));
    appendRaw(dir, studio::kEventsFileName,
              "{\"event\":\"step\",\"step\":8,\"loss\":1.5,\"gpus\":[{\"device\":\"cuda:0\"}]}\n"
              "{\"event\":\"step\",\"step\":9,\"loss\":\"low\"}\n");
    appendRaw(dir, studio::kStatusFileName,
              "{\"state\":\"finished\",\"pid\":\"4242\",\"host\":\"gpu-node-7\","
              "\"reason\":\"completed 9 steps\",\"updated\":\"now\"}");
  } else if (kind == QLatin1String("llamafactory")) {
    // LLaMA-Factory's own log, one loss not a number.
    QByteArray lines;
    for (int step = 1; step <= 12; ++step)
      lines += QStringLiteral("{\"current_steps\": %1, \"total_steps\": 12, \"loss\": %2, "
                              "\"lr\": 1e-05, \"epoch\": 0.5, \"elapsed_time\": \"0:00:0%3\"}\n")
                   .arg(step)
                   .arg(step == 3 ? QStringLiteral("null") : step == 4 ? QStringLiteral("{}")
                                                                        : QStringLiteral("1.5"))
                   .arg(step % 10)
                   .toUtf8();
    appendRaw(dir, "trainer_log.jsonl", lines);
  } else if (kind == QLatin1String("events only")) {
    appendEvents(dir, startEvent(t0), stepEvent(5, 2.0, t0 + 5));
  } else if (kind == QLatin1String("events only, ended")) {
    appendEvents(dir, startEvent(t0), stepEvent(5, 2.0, t0 + 5),
                 studio::EndEvent{"stopped", "stopped by the user"});
  } else if (kind == QLatin1String("partial last line")) {
    appendEvents(dir, startEvent(t0), stepEvent(5, 2.0, t0 + 5));
    appendRaw(dir, studio::kEventsFileName, "{\"event\":\"step\",\"step\":6,\"lo");
    writeStatus(dir, studio::RunState::Running, 4242, QStringLiteral("gpu-node-7"));
  } else if (kind.startsWith(QLatin1String("launched"))) {
    const bool alive = kind.endsWith(QLatin1String("alive"));
    studio::ui::LaunchRecord r;
    r.pid = alive ? livePid() : deadPid();
    r.engine = QStringLiteral("/opt/studio/bin/studio-train");
    r.host = studio::ui::localHostName();
    r.nproc = 4;
    r.started = QDateTime::fromSecsSinceEpoch(static_cast<qint64>(t0));
    QCOMPARE(r.write(dir), QString());
    appendRaw(dir, studio::kTrainLogFileName,
              "studio-train: loading\nerror: model folder /models/x not found\n\n");
  }
  // "empty": nothing at all
}

void TestRunInfo::folder_data() {
  QTest::addColumn<QString>("kind");
  QTest::addColumn<RunState>("state");
  QTest::addColumn<QString>("reason");  // a part of it
  QTest::addColumn<qint64>("lastStep");
  QTest::addColumn<QString>("stage");
  QTest::addColumn<int>("spSize");
  QTest::addColumn<int>("worldSize");
  QTest::addColumn<bool>("local");

  QTest::newRow("finished") << "finished" << RunState::Finished << "completed 10 steps"
                            << qint64{10} << "sft" << 2 << 2 << true;
  QTest::newRow("failed with reason") << "failed" << RunState::Failed << "CUDA out of memory"
                                      << qint64{3} << "sft" << 1 << 1 << false;
  QTest::newRow("running, live pid")
      << "running, live pid" << RunState::Running << "" << qint64{120} << "sft" << 4 << 8 << true;
  QTest::newRow("running, dead pid")
      << "running, dead pid" << RunState::Lost << "killed before it could record" << qint64{7}
      << "sft" << 1 << 1 << true;
  QTest::newRow("running on another host") << "running on another host" << RunState::Running << ""
                                           << qint64{0} << "sft" << 1 << 1 << false;
  QTest::newRow("garbage status.json")
      << "garbage status" << RunState::Unknown
      << "status.json: the run status file is not valid JSON" << qint64{0} << "" << 0 << 0 << false;
  QTest::newRow("odd fields kept") << "odd fields" << RunState::Finished << "completed 9 steps"
                                   << qint64{9} << "sft" << 1 << 1 << false;
  QTest::newRow("LLaMA-Factory's trainer_log.jsonl")
      << "llamafactory" << RunState::Finished << "LLaMA-Factory run: reached step 12 of 12"
      << qint64{12} << "" << 0 << 0 << false;
  QTest::newRow("events only") << "events only" << RunState::Unknown << "no status.json"
                               << qint64{5} << "sft" << 1 << 1 << false;
  QTest::newRow("events only, ended")
      << "events only, ended" << RunState::Stopped << "stopped by the user" << qint64{5} << "sft"
      << 1 << 1 << false;
  QTest::newRow("partial last line")
      << "partial last line" << RunState::Running << "" << qint64{5} << "sft" << 1 << 1 << false;
  QTest::newRow("empty folder") << "empty" << RunState::Unknown << "neither status.json"
                                << qint64{0} << "" << 0 << 0 << false;
  QTest::newRow("launched, engine alive")
      << "launched, alive" << RunState::Starting << "" << qint64{0} << "" << 0 << 4 << true;
  QTest::newRow("launched, engine exited")
      << "launched, dead" << RunState::Failed << "model folder /models/x not found" << qint64{0}
      << "" << 0 << 4 << true;
}

void TestRunInfo::folder() {
  QFETCH(QString, kind);
  QFETCH(RunState, state);
  QFETCH(QString, reason);
  QFETCH(qint64, lastStep);
  QFETCH(QString, stage);
  QFETCH(int, spSize);
  QFETCH(int, worldSize);
  QFETCH(bool, local);

  QTemporaryDir tmp;
  const QString dir = tmp.filePath(QStringLiteral("my run"));
  QVERIFY(QDir().mkpath(dir));
  setUp(kind, dir);

  const RunInfo info = studio::ui::readRunInfo(dir + QStringLiteral("/"));
  QCOMPARE(info.dir, QDir::cleanPath(dir));
  QCOMPARE(info.name, QStringLiteral("my run"));
  QCOMPARE(info.state, state);
  QCOMPARE(info.stateText, studio::ui::runStateText(state));
  if (reason.isEmpty())
    QCOMPARE(info.reason, QString());
  else
    QVERIFY2(info.reason.contains(reason), qPrintable(info.reason));
  QCOMPARE(info.lastStep, lastStep);
  QCOMPARE(info.stage, stage);
  QCOMPARE(info.spSize, spSize);
  QCOMPARE(info.worldSize, worldSize);
  QCOMPARE(info.local, local);
  if (kind == QLatin1String("finished")) {
    QCOMPARE(info.maxSteps, qint64{10});
    QCOMPARE(info.lastLoss, 1.25);
    QCOMPARE(info.spMode, QStringLiteral("ulysses"));
    QCOMPARE(info.pid, qint64{4242});
    QCOMPARE(info.started, QDateTime::fromSecsSinceEpoch(1717171717));
    QVERIFY(info.updated > info.started);
  }
  if (kind == QLatin1String("odd fields")) {
    QCOMPARE(info.pid, qint64{4242});
    QCOMPARE(info.host, QStringLiteral("gpu-node-7"));
    QCOMPARE(info.readProblems,
             QStringLiteral("status.json: field 'pid': expected an integer, got string \"4242\": "
                            "read as 4242; field 'updated': expected a number, got string "
                            "\"now\": dropped\n"
                            "events.jsonl: 2 lines had fields not as the format says, kept without "
                            "them or converted (1 field converted, 1 dropped; first: line 2: field "
                            "'gpus[0].device': expected an integer device index, got string "
                            "\"cuda:0\": read as 0)"));
  } else if (kind == QLatin1String("llamafactory")) {
    QVERIFY(studio::ui::isRunFolder(dir));
    QCOMPARE(info.lastLoss, 1.5);
    QCOMPARE(info.readProblems,
             QStringLiteral("trainer_log.jsonl: 1 line had fields not as the format says, kept "
                            "without them or converted (0 fields converted, 1 dropped; first: "
                            "line 4: field 'loss': expected a number, got object: dropped)"));
  } else {
    QCOMPARE(info.readProblems, QString());
  }
  if (kind.startsWith(QLatin1String("launched"))) {
    QCOMPARE(info.logPath, QDir(dir).filePath(QStringLiteral("train.log")));
    QCOMPARE(info.started, QDateTime::fromSecsSinceEpoch(1717171717));
  }
  sleeper_.reset();
}

// A huge events.jsonl (tens of MB): the first read takes its head and tail only, a rescan the new
// bytes only.
void TestRunInfo::hugeEventsReadIncrementally() {
  QTemporaryDir tmp;
  const QString dir = tmp.path();
  const double t0 = 1717171717.0;
  appendEvents(dir, startEvent(t0, 8, "usp", 16, 300000));
  {
    // Formatted by hand: dumping 250000 JSON objects would make this test slow, not stronger.
    QByteArray bulk;
    for (long long step = 1; step <= 250000; ++step)
      bulk += "{\"event\":\"step\",\"grad_norm\":0.6875,\"loss\":" +
              QByteArray::number(1000.0 / static_cast<double>(step), 'g', 17) +
              ",\"step\":" + QByteArray::number(step) +
              ",\"time\":" + QByteArray::number(t0 + step, 'f', 3) +
              ",\"tokens_per_sec\":21845.3}\n";
    appendRaw(dir, studio::kEventsFileName, bulk);
  }
  const qint64 size = QFileInfo(QDir(dir).filePath(QStringLiteral("events.jsonl"))).size();
  QVERIFY(size > 20 * 1024 * 1024);

  studio::ui::RunEventDigest digest(path(dir, studio::kEventsFileName));
  RunInfo info = studio::ui::readRunInfo(dir, digest);
  QCOMPARE(info.lastStep, qint64{250000});
  QCOMPARE(info.lastLoss, 1000.0 / 250000);
  QCOMPARE(info.spSize, 8);
  QCOMPARE(info.spMode, QStringLiteral("usp"));
  QCOMPARE(info.worldSize, 16);
  QCOMPARE(info.maxSteps, qint64{300000});
  QCOMPARE(info.started, QDateTime::fromSecsSinceEpoch(1717171717));
  QVERIFY2(digest.bytesRead() < 1024 * 1024, qPrintable(QString::number(digest.bytesRead())));

  const quint64 before = digest.bytesRead();
  const qint64 sizeBefore = QFileInfo(QDir(dir).filePath(QStringLiteral("events.jsonl"))).size();
  appendEvents(dir, stepEvent(250001, 0.5, t0 + 250001),
               studio::EndEvent{"finished", "completed 250001 steps"});
  const qint64 appended =
      QFileInfo(QDir(dir).filePath(QStringLiteral("events.jsonl"))).size() - sizeBefore;
  info = studio::ui::readRunInfo(dir, digest);
  QCOMPARE(digest.bytesRead() - before, static_cast<quint64>(appended));
  QCOMPARE(info.lastStep, qint64{250001});
  QCOMPARE(info.lastLoss, 0.5);
  QCOMPARE(info.state, RunState::Finished);  // from the end event: there is no status.json
  QCOMPARE(info.reason, QStringLiteral("completed 250001 steps"));

  // A rescan with nothing new reads nothing.
  const quint64 settled = digest.bytesRead();
  studio::ui::readRunInfo(dir, digest);
  QCOMPARE(digest.bytesRead(), settled);
}

// A new run writing into the same folder replaces events.jsonl: the old run's facts go away.
void TestRunInfo::replacedEventsStartOver() {
  QTemporaryDir tmp;
  const QString dir = tmp.path();
  appendEvents(dir, startEvent(100.0), stepEvent(50, 1.0, 150.0),
               studio::EndEvent{"failed", "diverged"});
  studio::ui::RunEventDigest digest(path(dir, studio::kEventsFileName));
  QCOMPARE(studio::ui::readRunInfo(dir, digest).lastStep, qint64{50});

  const QString events = QDir(dir).filePath(QStringLiteral("events.jsonl"));
  QVERIFY(QFile::rename(events, events + QStringLiteral(".old")));
  appendEvents(dir, startEvent(200.0, 2, "ulysses", 2), stepEvent(3, 2.0, 203.0));
  const RunInfo info = studio::ui::readRunInfo(dir, digest);
  QCOMPARE(info.lastStep, qint64{3});
  QCOMPARE(info.spSize, 2);
  QCOMPARE(info.state, RunState::Unknown);  // the old end event is gone with its file
  QCOMPARE(info.started, QDateTime::fromSecsSinceEpoch(200));

  QVERIFY(QFile::resize(events, 0));
  const RunInfo truncated = studio::ui::readRunInfo(dir, digest);
  QCOMPARE(truncated.lastStep, qint64{0});
  QCOMPARE(truncated.spSize, 0);
}

// The runs list reads every folder under its roots: one whose status.json, launch record,
// events.jsonl or train.log is a FIFO, a link to /dev/zero or a folder must neither block the
// scan nor fill its memory. What status.json is instead is the run's reason.
void TestRunInfo::hostileFiles_data() {
  QTest::addColumn<QString>("file");
  QTest::addColumn<QString>("kind");
  QTest::addColumn<QString>("reason");  // a part of it, after "DIR/"
  QTest::addColumn<QString>("problem");  // a part of readProblems
  const std::pair<const char*, const char*> kinds[] = {
      {"link", "a character device (a link to /dev/zero), not a regular file"},
      {"fifo", "a FIFO (named pipe), not a regular file"},
      {"folder", "a folder, not a regular file"}};
  for (const char* file : {studio::kStatusFileName, studio::kLaunchRecordFileName,
                           studio::kEventsFileName, studio::kTrainLogFileName})
    for (const auto& [kind, what] : kinds)
      QTest::addRow("%s as a %s", file, kind)
          << QString::fromLatin1(file) << QString::fromLatin1(kind)
          << (file == std::string(studio::kStatusFileName)
                  ? QStringLiteral("%1: %2").arg(file, what)
                  : QString())
          // The launch record is skipped, and the runs list says why.
          << (file == std::string(studio::kLaunchRecordFileName)
                  ? QStringLiteral("studio-launch.json was skipped, so the studio neither stops "
                                   "this run nor reads its pid from it: %1/studio-launch.json: ") +
                        QString::fromLatin1(what)
                  : QString());
}

void TestRunInfo::hostileFiles() {
  QFETCH(QString, file);
  QFETCH(QString, kind);
  QFETCH(QString, reason);
  QFETCH(QString, problem);
  QTemporaryDir run;  // the run folder itself
  const QString dir = run.path();
  setUp(QStringLiteral("launched, dead"), dir);
  writeStatus(dir, studio::RunState::Failed, 4242, QStringLiteral("gpu-node-7"), "it failed");
  appendEvents(dir, startEvent(1717171717.0));
  const QString path = QDir(dir).filePath(file);
  QVERIFY(QFile::remove(path));
  QVERIFY(makeHostileFile(path, kind, "/dev/zero"));
  using namespace std::chrono_literals;
  const RunInfo info = within(5s, "readRunInfo", [&] { return studio::ui::readRunInfo(dir); });
  if (!reason.isEmpty())
    QVERIFY2(info.reason.contains(dir + "/" + reason), qPrintable(info.reason));
  if (!problem.isEmpty())
    QVERIFY2(info.readProblems.contains(problem.arg(dir)), qPrintable(info.readProblems));
}

QTEST_MAIN(TestRunInfo)
#include "tst_run_info.moc"
