// record_run_outcome on prepared OUTPUT_DIRs: an `end` is appended only when the current run
// segment has none, a torn last line does not swallow it, status.json keeps its step, and rank
// 0's own account is never duplicated or overwritten.
#include <QtTest>

#include <fstream>

#include <unistd.h>

#include "studio/base/atomic_file.h"
#include "studio/runs/events.h"
#include "studio/runs/run_outcome.h"

using studio::RunOutcome;
using studio::record_run_outcome;

namespace {

// Every event of OUTPUT_DIR/events.jsonl, and the number of lines that were not events.
std::vector<studio::Event> read_events(const std::string& dir, std::uint64_t* bad = nullptr) {
  studio::EventFileReader reader(studio::events_path(dir));
  auto polled = reader.poll();
  if (bad) *bad = reader.parser().bad_lines();
  return polled.events;
}

std::vector<const studio::Event*> end_events(const std::vector<studio::Event>& events) {
  std::vector<const studio::Event*> out;
  for (const auto& e : events)
    if (e.kind == studio::EventKind::End) out.push_back(&e);
  return out;
}

RunOutcome failure() {
  RunOutcome r;
  r.exit_code = 1;
  r.reason = "rank 2 exited with code 1";
  return r;
}

RunOutcome stop() {
  RunOutcome r;
  r.exit_code = 130;  // the launcher's kExitStopped
  r.stopped = true;
  r.reason = "stopped: the launcher was asked to stop (SIGINT/SIGTERM)";
  return r;
}

const char* kStart = R"({"event":"start","world_size":4})";
const char* kStep = R"({"event":"step","step":3,"loss":1.5})";
const char* kEndFailed =
    R"({"event":"end","state":"failed","reason":"CUDA out of memory on rank 0"})";
const char* kEndFinished = R"({"event":"end","state":"finished","reason":"completed 3 steps"})";

}  // namespace

class TestRunOutcome : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void events_data();
  void events();
  void statusKeepsTheStep();
  void statusOfRankZeroIsKept();
  void successRecordsNothing();
  void createsTheOutputDir();
};

void TestRunOutcome::events_data() {
  QTest::addColumn<QString>("before");  // events.jsonl content; "<none>": no file
  QTest::addColumn<bool>("stopped");
  QTest::addColumn<int>("ends");       // end events after recording
  QTest::addColumn<QString>("state");  // of the last end, and of status.json
  QTest::addColumn<QString>("reason");
  const QString mine = "rank 2 exited with code 1";
  const QString theirs = "CUDA out of memory on rank 0";
  const QString nl = "\n";
  QTest::newRow("no file") << "<none>" << false << 1 << "failed" << mine;
  QTest::newRow("running") << QString(kStart) + nl + kStep + nl << false << 1 << "failed" << mine;
  QTest::newRow("stopped while running")
      << QString(kStart) + nl + kStep + nl << true << 1 << "stopped"
      << "stopped: the launcher was asked to stop (SIGINT/SIGTERM)";
  QTest::newRow("rank 0 ended it")
      << QString(kStart) + nl + kEndFailed + nl << false << 1 << "failed" << theirs;
  QTest::newRow("resumed after an end: new segment has none")
      << QString(kStart) + nl + kEndFinished + nl + kStart + nl + kStep + nl << false << 2
      << "failed" << mine;
  QTest::newRow("torn last line") << QString(kStart) + nl + kStep + nl + R"({"event":"step","st)"
                                  << false << 1 << "failed" << mine;
}

void TestRunOutcome::events() {
  QFETCH(QString, before);
  QFETCH(bool, stopped);
  QFETCH(int, ends);
  QFETCH(QString, state);
  QFETCH(QString, reason);
  const QString nl = "\n";
  QTemporaryDir dir;
  const std::string out = dir.path().toStdString();
  if (before != "<none>") std::ofstream(studio::events_path(out)) << before.toStdString();
  const RunOutcome result = stopped ? stop() : failure();
  const std::string error = record_run_outcome(out, result);
  QVERIFY2(error.empty(), error.c_str());

  std::uint64_t bad = 0;
  const auto events = read_events(out, &bad);
  const auto found = end_events(events);
  QCOMPARE(int(found.size()), ends);
  QCOMPARE(found.back(), &events.back());
  QCOMPARE(QString::fromStdString(found.back()->get<studio::EndEvent>()->state), state);
  QCOMPARE(QString::fromStdString(found.back()->get<studio::EndEvent>()->reason), reason);
  QCOMPARE(bad,
           std::uint64_t{before.endsWith(nl) || before == "<none>" ? 0u : 1u});  // the torn line
  studio::RunStatus status;
  std::string status_error;
  QVERIFY2(studio::RunStatus::read(studio::status_path(out), status, status_error),
           status_error.c_str());
  QCOMPARE(QString(studio::run_state_name(status.state)), state);
  QCOMPARE(QString::fromStdString(status.reason), reason);
  QCOMPARE(status.exit_code.value_or(-1), result.exit_code);
}

void TestRunOutcome::statusKeepsTheStep() {
  QTemporaryDir dir;
  const std::string out = dir.path().toStdString();
  studio::RunStatus running;
  running.step = 1200;
  running.pid = 1;
  QVERIFY(running.write(studio::status_path(out)).empty());
  QVERIFY(record_run_outcome(out, failure()).empty());
  studio::RunStatus status;
  std::string error;
  QVERIFY(studio::RunStatus::read(studio::status_path(out), status, error));
  QCOMPARE(status.step.value_or(-1), std::int64_t{1200});
  QCOMPARE(status.pid, std::int64_t{::getpid()});  // the launcher is what is left to watch
  QCOMPARE(int(status.state), int(studio::RunState::Failed));
}

void TestRunOutcome::statusOfRankZeroIsKept() {
  QTemporaryDir dir;
  const std::string out = dir.path().toStdString();
  std::ofstream(studio::events_path(out)) << kStart << "\n" << kEndFailed << "\n";
  studio::RunStatus ended;
  ended.state = studio::RunState::Failed;
  ended.reason = "CUDA out of memory on rank 0 (status)";
  ended.exit_code = 1;
  QVERIFY(ended.write(studio::status_path(out)).empty());
  std::string before, after, error;
  QVERIFY(studio::read_file(studio::status_path(out), before, error));
  QVERIFY(record_run_outcome(out, failure()).empty());
  QVERIFY(studio::read_file(studio::status_path(out), after, error));
  QCOMPARE(QString::fromStdString(after), QString::fromStdString(before));
  QCOMPARE(int(end_events(read_events(out)).size()), 1);
}

void TestRunOutcome::successRecordsNothing() {
  QTemporaryDir dir;
  const std::string out = dir.path().toStdString();
  QVERIFY(record_run_outcome(out, RunOutcome{}).empty());
  QVERIFY(!QFile::exists(QString::fromStdString(studio::events_path(out))));
  QVERIFY(!QFile::exists(QString::fromStdString(studio::status_path(out))));
}

void TestRunOutcome::createsTheOutputDir() {
  QTemporaryDir dir;
  const std::string out = dir.filePath("never/started").toStdString();
  QVERIFY(record_run_outcome(out, failure()).empty());
  QCOMPARE(int(end_events(read_events(out)).size()), 1);
}

QTEST_MAIN(TestRunOutcome)
#include "tst_run_outcome.moc"
