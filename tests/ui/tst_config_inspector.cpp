// ConfigInspector: problems appear as the text changes, each located at its line; activating a
// row moves the editor there; the world size boxes re-validate; checks run off the GUI thread.
#include <QSpinBox>
#include <QTableView>
#include <QTextBlock>
#include <QtTest>

#include "studio/ui/editor/code_editor.h"
#include "studio/ui/editor/config_inspector.h"
#include "studio/ui/editor/diagnostics_model.h"
#include "ui_test_support.h"

using studio::Severity;
using studio::ui::ConfigInspector;
using studio::ui::DiagnosticsModel;
using studio::ui::ValidationResult;

namespace {

int errorRow(const ConfigInspector& w, const QString& key) {
  return ui_test::find(w.diagnosticsModel()->diagnostics(), Severity::Error, key);
}

// An inspector on screen (offscreen platform) with the fixture's paths resolvable.
class Shown {
 public:
  Shown() {
    w.setBaseDir(ui_test::configsDir());
    w.resize(900, 700);
    w.show();
  }
  ConfigInspector w;
};

}  // namespace

class TestConfigInspector : public QObject {
  Q_OBJECT

 private slots:
  void errorIsLocated_data();
  void errorIsLocated();
  void typingRevalidates();
  void worldSize_data();
  void worldSize();
  void validatesOffTheGuiThread();
  void summary();
  void untitledEmptyIsNotAnError();
};

void TestConfigInspector::errorIsLocated_data() {
  QTest::addColumn<QString>("from");
  QTest::addColumn<QString>("to");
  QTest::addColumn<QString>("key");
  QTest::newRow("unknown stage") << "stage: sft"
                                 << "stage: ppo"
                                 << "stage";
  QTest::newRow("negative learning rate") << "learning_rate: 5.0e-6"
                                          << "learning_rate: -1.0"
                                          << "learning_rate";
  QTest::newRow("unknown SP mode") << "sequence_parallel_mode: zigzag-ring"
                                   << "sequence_parallel_mode: rings"
                                   << "sequence_parallel_mode";
  QTest::newRow("unknown template") << "template: qwen"
                                    << "template: qwen9"
                                    << "template";
}

void TestConfigInspector::errorIsLocated() {
  QFETCH(QString, from);
  QFETCH(QString, to);
  QFETCH(QString, key);
  QString yaml = ui_test::readText(ui_test::fixturePath());
  const int line = ui_test::lineOf(yaml, from);
  QVERIFY(line > 0);
  yaml.replace(from, to);

  Shown s;
  QVERIFY(QTest::qWaitForWindowExposed(&s.w));
  s.w.setDocument(yaml, ui_test::fixturePath());
  QTRY_VERIFY(errorRow(s.w, key) >= 0);
  const int row = errorRow(s.w, key);
  DiagnosticsModel* model = s.w.diagnosticsModel();
  const QModelIndex index = model->index(row, DiagnosticsModel::MessageColumn);
  QCOMPARE(index.data(DiagnosticsModel::LineRole).toInt(), line);
  QCOMPARE(model->index(row, DiagnosticsModel::KeyColumn).data().toString(), key);
  QCOMPARE(s.w.editor()->lineMarks().count(line), size_t(1));

  // Double-clicking the row puts the editor's cursor on the problem.
  const int column = index.data(DiagnosticsModel::ColumnRole).toInt();
  QTableView* view = s.w.diagnosticsView();
  view->scrollTo(index);
  // A real double click is press, release, double-click; QTest's mouseDClick sends only the last.
  const QPoint centre = view->visualRect(index).center();
  QTest::mouseClick(view->viewport(), Qt::LeftButton, {}, centre);
  QTest::mouseDClick(view->viewport(), Qt::LeftButton, {}, centre);
  const QTextCursor cursor = s.w.editor()->textCursor();
  QCOMPARE(cursor.blockNumber() + 1, line);
  QCOMPARE(cursor.positionInBlock(), column - 1);
  QVERIFY(cursor.block().text() == to);
}

void TestConfigInspector::typingRevalidates() {
  Shown s;
  const QString yaml = ui_test::readText(ui_test::fixturePath());
  s.w.setDocument(yaml, ui_test::fixturePath());
  QTRY_VERIFY(!s.w.isValidating());
  QCOMPARE(s.w.diagnosticsModel()->errorCount(), 0);

  // Type over the value of `cutoff_len`, as a user would.
  const int line = ui_test::lineOf(yaml, "cutoff_len: 131072");
  s.w.jumpTo(line, 13);
  QTextCursor cursor = s.w.editor()->textCursor();
  cursor.movePosition(QTextCursor::EndOfBlock, QTextCursor::KeepAnchor);
  s.w.editor()->setTextCursor(cursor);
  QTest::keyClicks(s.w.editor(), "-5");
  QVERIFY(s.w.isModified());
  QVERIFY(s.w.isValidating());  // waiting for the typing pause
  QTRY_VERIFY(errorRow(s.w, "cutoff_len") >= 0);
  const int row = errorRow(s.w, "cutoff_len");
  QCOMPARE(s.w.diagnosticsModel()->diagnostic(row).line, line);
}

void TestConfigInspector::worldSize_data() {
  QTest::addColumn<int>("nproc");
  QTest::addColumn<int>("nnodes");
  QTest::addColumn<bool>("divides");
  QTest::newRow("8 x 1") << 8 << 1 << true;
  QTest::newRow("4 x 1") << 4 << 1 << false;
  QTest::newRow("4 x 2") << 4 << 2 << true;
  QTest::newRow("12 x 1") << 12 << 1 << false;
  QTest::newRow("not checked") << 0 << 1 << true;
}

// The fixture has sequence_parallel_size: 8; the boxes start at 8 processes on 1 node.
void TestConfigInspector::worldSize() {
  QFETCH(int, nproc);
  QFETCH(int, nnodes);
  QFETCH(bool, divides);
  Shown s;
  QCOMPARE(s.w.processesSpinBox()->value(), 8);
  s.w.setDocument(ui_test::readText(ui_test::fixturePath()), ui_test::fixturePath());
  QTRY_VERIFY(!s.w.isValidating());
  QCOMPARE(errorRow(s.w, "sequence_parallel_size"), -1);

  QSignalSpy spy(&s.w, &ConfigInspector::validated);
  s.w.processesSpinBox()->setValue(nproc);
  s.w.nodesSpinBox()->setValue(nnodes);
  if (nproc != 8 || nnodes != 1) QTRY_VERIFY(spy.count() >= 1);
  QTRY_VERIFY(!s.w.isValidating());
  const int row = errorRow(s.w, "sequence_parallel_size");
  QCOMPARE(row == -1, divides);
  if (!divides) {
    const studio::Diagnostic& d = s.w.diagnosticsModel()->diagnostic(row);
    QVERIFY(QString::fromStdString(d.message).contains("does not divide"));
    QCOMPARE(d.line, ui_test::lineOf(ui_test::readText(ui_test::fixturePath()),
                                     "sequence_parallel_size: 8"));
  }
}

void TestConfigInspector::validatesOffTheGuiThread() {
  Shown s;
  QSignalSpy spy(&s.w, &ConfigInspector::validated);
  s.w.setDocument(ui_test::readText(ui_test::fixturePath()), ui_test::fixturePath());
  QTRY_COMPARE(spy.count(), 1);
  const auto result = spy.at(0).at(0).value<ValidationResult>();
  QVERIFY(result.thread != nullptr);
  QVERIFY(result.thread != QThread::currentThread());
}

void TestConfigInspector::summary() {
  Shown s;
  const QString yaml = ui_test::readText(ui_test::fixturePath());
  s.w.setDocument(yaml, ui_test::fixturePath());
  QTRY_VERIFY(!s.w.isValidating());
  // (its report_to: none asks for nothing, so it is no warning; its data file long_docs.jsonl
  // is not in the fixture folder, which is one)
  QCOMPARE(s.w.summary(), QStringLiteral("valid (5 warnings): stage sft, SP 8 zigzag-ring, "
                                         "cutoff 131072, model Qwen2ForCausalLM 7.62B"));
  s.w.setDocument(QString(yaml).replace("stage: sft", "stage: ppo"), ui_test::fixturePath());
  QTRY_COMPARE(s.w.summary(), QStringLiteral("1 error, 5 warnings"));
}

void TestConfigInspector::untitledEmptyIsNotAnError() {
  Shown s;
  s.w.setDocument(QString(), QString());
  QVERIFY(!s.w.isValidating());
  QCOMPARE(s.w.diagnosticsModel()->rowCount(), 0);
  QCOMPARE(s.w.summary(), QStringLiteral("No config open"));
}

QTEST_MAIN(TestConfigInspector)
#include "tst_config_inspector.moc"
