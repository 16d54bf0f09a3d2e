// run_folder.h's name rules, which the events reader (a checkpoint's trainer_state.json) and the
// run folder checks (has_trainer_state) share.
#include <QtTest>

#include <cstdint>

#include "studio/runs/run_folder.h"

using namespace studio;

class TestRunFolder : public QObject {
  Q_OBJECT

 private slots:
  void checkpointNames_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<qint64>("number");  // -1: not a checkpoint folder
    QTest::newRow("checkpoint-500") << "checkpoint-500" << qint64(500);
    QTest::newRow("checkpoint-0") << "checkpoint-0" << qint64(0);
    QTest::newRow("leading zeros") << "checkpoint-007" << qint64(7);
    QTest::newRow("int64 max") << "checkpoint-9223372036854775807" << qint64(INT64_MAX);
    QTest::newRow("beyond int64") << "checkpoint-9223372036854775808" << qint64(-1);
    QTest::newRow("no number") << "checkpoint-" << qint64(-1);
    QTest::newRow("a letter") << "checkpoint-12a" << qint64(-1);
    QTest::newRow("a sign") << "checkpoint--1" << qint64(-1);
    QTest::newRow("capital") << "Checkpoint-1" << qint64(-1);
    QTest::newRow("other folder") << "runs" << qint64(-1);
  }
  void checkpointNames() {
    QFETCH(QString, name);
    QFETCH(qint64, number);
    const auto n = checkpoint_number(name.toStdString());
    QCOMPARE(n ? qint64(*n) : qint64(-1), number);
  }
  void baseNames_data() {
    QTest::addColumn<QString>("path");
    QTest::addColumn<QString>("base");
    QTest::newRow("file") << "out/run/trainer_state.json" << "trainer_state.json";
    QTest::newRow("trailing slashes") << "out/checkpoint-5//" << "checkpoint-5";
    QTest::newRow("bare name") << "run" << "run";
    QTest::newRow("root: no last component") << "/" << "";
    QTest::newRow("empty") << "" << "";
  }
  void baseNames() {
    QFETCH(QString, path);
    QFETCH(QString, base);
    QCOMPARE(QString::fromStdString(base_name(path.toStdString())), base);
  }
};

QTEST_MAIN(TestRunFolder)
#include "tst_run_folder.moc"
