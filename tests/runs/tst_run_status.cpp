// status.json (RunStatus): written atomically and read back per state, malformed files named
// with the reason, and field issues that keep the rest of the file.
#include <QDir>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runs_test_support.h"
#include "studio/base/json_file.h"
#include "studio/runs/events.h"

using nlohmann::json;
using namespace studio;
using namespace runs_test;

class TestRunStatus : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void statusRoundTrip_data();
  void statusRoundTrip();
  void statusMalformed_data();
  void statusMalformed();
  void statusFieldIssues_data();
  void statusFieldIssues();
};

void TestRunStatus::statusRoundTrip_data() {
  QTest::addColumn<int>("state");
  QTest::addColumn<int>("exitCode");  // -1: none
  QTest::addColumn<QString>("reason");
  QTest::addColumn<qint64>("step");     // -1: none
  QTest::addColumn<double>("updated");  // NaN: let write() stamp it
  QTest::newRow("running") << int(RunState::Running) << -1 << "" << qint64(5) << std::nan("");
  QTest::newRow("finished") << int(RunState::Finished) << 0 << "completed 1000 steps"
                            << qint64(1000) << 1700000500.5;
  QTest::newRow("failed") << int(RunState::Failed) << 1 << "CUDA out of memory on rank 3"
                          << qint64(-1) << 1700000600.25;
  QTest::newRow("stopped") << int(RunState::Stopped) << 143 << "stopped by the user (SIGTERM)"
                           << qint64(12) << 1700000700.0;
}

void TestRunStatus::statusRoundTrip() {
  QFETCH(int, state);
  QFETCH(int, exitCode);
  QFETCH(QString, reason);
  QFETCH(qint64, step);
  QFETCH(double, updated);
  RunStatus status;
  status.state = RunState(state);
  status.pid = 4242;
  status.host = "gpu-node-7";
  if (exitCode >= 0) status.exit_code = exitCode;
  status.reason = reason.toStdString();
  if (step >= 0) status.step = step;
  status.updated = updated;

  QTemporaryDir dir;
  const std::string path = status_path(dir.path().toStdString());
  QCOMPARE(qs(status.write(path)), QString());
  QCOMPARE(QDir(dir.path()).entryList(QDir::Files), QStringList{"status.json"});  // no temp left

  const json on_disk = json::parse(view(read_all(qs(path))));
  QCOMPARE(qs(on_disk["state"].get<std::string>()), QString(run_state_name(RunState(state))));
  QCOMPARE(on_disk["exit_code"].is_null(), exitCode < 0);
  QCOMPARE(on_disk.contains("step"), step >= 0);

  RunStatus back;
  std::string error;
  QVERIFY2(RunStatus::read(path, back, error), error.c_str());
  QCOMPARE(int(back.state), state);
  QCOMPARE(back.pid, std::int64_t{4242});
  QCOMPARE(qs(back.host), QString("gpu-node-7"));
  QCOMPARE(back.exit_code.value_or(-1), exitCode);
  QCOMPARE(qs(back.reason), reason);
  QCOMPARE(qint64(back.step.value_or(-1)), step);
  if (std::isnan(updated)) {
    QVERIFY(std::fabs(back.updated - unix_time_now()) < 60.0);
  } else {
    QCOMPARE(back.updated, updated);
  }
}

void TestRunStatus::statusMalformed_data() {
  QTest::addColumn<QByteArray>("content");  // null: no file at all
  QTest::addColumn<QString>("message");
  QTest::newRow("no file") << QByteArray() << "cannot open";
  QTest::newRow("empty") << QByteArray("") << "empty";
  QTest::newRow("not JSON") << QByteArray(R"({"state": running})") << "not valid JSON";
  QTest::newRow("cut off") << QByteArray(R"({"state":"running","pid":)") << "not valid JSON";
  QTest::newRow("array") << QByteArray("[]") << "expected a JSON object, got array";
  QTest::newRow("no state") << QByteArray(R"({"pid":1})") << "missing field 'state'";
  QTest::newRow("unknown state") << QByteArray(R"({"state":"paused"})")
                                 << "field 'state': expected one of running|finished|failed|";
  QTest::newRow("number too large") << QByteArray(R"({"state":"running","pid":1e999999})")
                                    << "not valid JSON: line 1, column 26: the number '1e999999' is too large for a double";
  QTest::newRow("state a number") << QByteArray(R"({"state":1})")
                                  << "field 'state': expected a string, got number";
}

// status.json keeps what it can too: only the state is essential.
void TestRunStatus::statusFieldIssues_data() {
  QTest::addColumn<QByteArray>("content");
  QTest::addColumn<QString>("issue");
  QTest::newRow("pid as text") << QByteArray(R"({"state":"running","pid":"12","host":"h"})")
                               << R"(field 'pid': expected an integer, got string "12": read as 12)";
  QTest::newRow("exit code fractional")
      << QByteArray(R"({"state":"failed","exit_code":1.5,"host":"h"})")
      << "field 'exit_code': expected a 32-bit integer, got number 1.5: dropped";
  QTest::newRow("updated a word")
      << QByteArray(R"({"state":"finished","updated":"yesterday","host":"h"})")
      << R"(field 'updated': expected a number, got string "yesterday": dropped)";
  QTest::newRow("host a number") << QByteArray(R"({"state":"finished","host":7,"pid":3})")
                                 << "field 'host': expected a string, got number 7: read as \"7\"";
}

void TestRunStatus::statusFieldIssues() {
  QFETCH(QByteArray, content);
  QFETCH(QString, issue);
  QTemporaryDir dir;
  const QString path = dir.filePath("status.json");
  QVERIFY(overwrite(path, content));
  RunStatus status;
  std::string error;
  std::vector<FieldIssue> issues;
  QVERIFY2(RunStatus::read(path.toStdString(), status, error, &issues), error.c_str());
  QCOMPARE(int(issues.size()), 1);
  QCOMPARE(qs(issues[0].describe()), issue);
  QVERIFY(!status.host.empty());
  if (issue.contains("'pid'")) QCOMPARE(status.pid, std::int64_t{12});
  if (issue.contains("'exit_code'")) QVERIFY(!status.exit_code.has_value());
  if (issue.contains("'updated'")) QVERIFY(std::isnan(status.updated));
  // The strict reader (from_json) still refuses it.
  QVERIFY_THROWS_EXCEPTION(EventFormatError, json::parse(view(content)).get<RunStatus>());
}

void TestRunStatus::statusMalformed() {
  QFETCH(QByteArray, content);
  QFETCH(QString, message);
  QTemporaryDir dir;
  const QString path = dir.filePath("status.json");
  if (!content.isNull()) QVERIFY(overwrite(path, content));
  RunStatus status;
  std::string error;
  QVERIFY(!RunStatus::read(path.toStdString(), status, error));
  QVERIFY2(qs(error).contains(path), error.c_str());  // names the file
  QVERIFY2(qs(error).contains(message), error.c_str());
}

QTEST_GUILESS_MAIN(TestRunStatus)
#include "tst_run_status.moc"
