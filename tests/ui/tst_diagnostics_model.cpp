// DiagnosticsModel: one row per problem, the columns a user reads and the roles a view jumps by.
#include <QAbstractItemModelTester>
#include <QIcon>
#include <QtTest>

#include "studio/ui/editor/diagnostics_model.h"

using studio::Diagnostic;
using studio::Severity;
using studio::ui::DiagnosticsModel;

namespace {

Diagnostic make(bool error, int line, int column, const char* key, const char* message,
                const char* allowed = "") {
  return {
      error ? Severity::Error : Severity::Warning, "run.yaml", line, column, key, message, allowed};
}

}  // namespace

class TestDiagnosticsModel : public QObject {
  Q_OBJECT

 private slots:
  void row_data();
  void row();
  void counts();
  void replaceAndClear();
  void headers();
};

void TestDiagnosticsModel::row_data() {
  QTest::addColumn<bool>("error");
  QTest::addColumn<int>("line");
  QTest::addColumn<int>("column");
  QTest::addColumn<QString>("key");
  QTest::addColumn<QString>("message");
  QTest::addColumn<QString>("allowed");
  QTest::addColumn<QString>("shownSeverity");
  QTest::addColumn<QString>("shownLine");
  QTest::addColumn<QString>("shownMessage");

  QTest::newRow("error with allowed values")
      << true << 37 << 25 << "sequence_parallel_size"
      << "3 does not divide the world size 4"
      << "1, 2, 4"
      << "error"
      << "37"
      << "3 does not divide the world size 4 (allowed: 1, 2, 4)";
  QTest::newRow("warning") << false << 3 << 1 << "trust_remote_code"
                           << "accepted for compatibility, no effect"
                           << ""
                           << "warning"
                           << "3"
                           << "accepted for compatibility, no effect";
  QTest::newRow("no place in the file") << true << 0 << 0 << ""
                                        << "the config is empty"
                                        << ""
                                        << "error"
                                        << ""
                                        << "the config is empty";
}

void TestDiagnosticsModel::row() {
  QFETCH(bool, error);
  QFETCH(int, line);
  QFETCH(int, column);
  QFETCH(QString, key);
  QFETCH(QString, message);
  QFETCH(QString, allowed);
  QFETCH(QString, shownSeverity);
  QFETCH(QString, shownLine);
  QFETCH(QString, shownMessage);

  DiagnosticsModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  const Diagnostic d{error ? Severity::Error : Severity::Warning,
                     "run.yaml",
                     line,
                     column,
                     key.toStdString(),
                     message.toStdString(),
                     allowed.toStdString()};
  model.setDiagnostics({d});

  QCOMPARE(model.rowCount(), 1);
  QCOMPARE(model.columnCount(), int(DiagnosticsModel::ColumnCount));
  const auto at = [&](int column) { return model.index(0, column); };
  QCOMPARE(at(DiagnosticsModel::SeverityColumn).data().toString(), shownSeverity);
  QVERIFY(!at(DiagnosticsModel::SeverityColumn).data(Qt::DecorationRole).value<QIcon>().isNull());
  QCOMPARE(at(DiagnosticsModel::LineColumn).data().toString(), shownLine);
  QCOMPARE(at(DiagnosticsModel::KeyColumn).data().toString(), key);
  QCOMPARE(at(DiagnosticsModel::MessageColumn).data().toString(), shownMessage);
  QCOMPARE(at(DiagnosticsModel::MessageColumn).data(Qt::ToolTipRole).toString(),
           QString::fromStdString(d.format()));
  // Every cell of the row carries the place, so a view can jump from whichever was clicked.
  for (int c = 0; c < DiagnosticsModel::ColumnCount; ++c) {
    QCOMPARE(at(c).data(DiagnosticsModel::LineRole).toInt(), line);
    QCOMPARE(at(c).data(DiagnosticsModel::ColumnRole).toInt(), column);
    QCOMPARE(at(c).data(DiagnosticsModel::SeverityRole).toInt(), int(d.severity));
  }
}

void TestDiagnosticsModel::counts() {
  DiagnosticsModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  model.setDiagnostics({make(true, 2, 1, "stage", "bad"), make(false, 3, 1, "plot_loss", "no"),
                        make(true, 9, 1, "template", "unknown")});
  QCOMPARE(model.rowCount(), 3);
  QCOMPARE(model.errorCount(), 2);
  QCOMPARE(model.warningCount(), 1);
  // Rows keep the order given (the validator sorts by position).
  QCOMPARE(model.index(2, DiagnosticsModel::KeyColumn).data().toString(), QString("template"));
  QCOMPARE(model.diagnostic(1).key, std::string("plot_loss"));
}

void TestDiagnosticsModel::replaceAndClear() {
  DiagnosticsModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
  QSignalSpy reset(&model, &QAbstractItemModel::modelReset);
  model.setDiagnostics({make(true, 1, 1, "a", "x"), make(true, 2, 1, "b", "y")});
  model.setDiagnostics({make(false, 5, 3, "c", "z")});
  QCOMPARE(model.rowCount(), 1);
  QCOMPARE(model.index(0, DiagnosticsModel::LineColumn).data().toInt(), 5);
  model.setDiagnostics({});
  QCOMPARE(model.rowCount(), 0);
  QCOMPARE(reset.count(), 3);
}

void TestDiagnosticsModel::headers() {
  DiagnosticsModel model;
  QCOMPARE(model.headerData(DiagnosticsModel::SeverityColumn, Qt::Horizontal).toString(),
           QString("Severity"));
  QCOMPARE(model.headerData(DiagnosticsModel::LineColumn, Qt::Horizontal).toString(),
           QString("Line"));
  QCOMPARE(model.headerData(DiagnosticsModel::KeyColumn, Qt::Horizontal).toString(),
           QString("Key"));
  QCOMPARE(model.headerData(DiagnosticsModel::MessageColumn, Qt::Horizontal).toString(),
           QString("Message"));
  QVERIFY(!model.headerData(0, Qt::Vertical).isValid());
}

QTEST_MAIN(TestDiagnosticsModel)
#include "tst_diagnostics_model.moc"
