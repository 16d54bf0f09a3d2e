// ModelPage: the model folder's facts arrive off the GUI thread; a missing folder, a folder
// without config.json and an unsupported architecture keep the page incomplete with a message.
#include <QLineEdit>
#include <QPushButton>
#include <QTemporaryDir>
#include <QtTest>

#include "studio/ui/wizard/model_page.h"
#include "wizard_test_support.h"

using studio::ui::ModelPage;
using studio::ui::RunDraft;

class TestModelPage : public QObject {
  Q_OBJECT

 private slots:
  void validation_data();
  void validation();
  void facts();
  void demoButton();
};

void TestModelPage::validation_data() {
  QTest::addColumn<QString>("path");
  QTest::addColumn<bool>("complete");
  QTest::addColumn<QString>("message");

  QTest::newRow("demo model") << wizard_test::demoModel() << true << "";
  QTest::newRow("Qwen2.5-7B shape") << wizard_test::shape("qwen2.5-7b") << true << "";
  QTest::newRow("nothing chosen") << "" << false
                                  << "model_name_or_path: choose a Hugging Face model folder";
  QTest::newRow("missing folder") << "/nonexistent/model" << false
                                  << "model_name_or_path: no such folder: /nonexistent/model";
  QTest::newRow("hub id") << "Qwen/Qwen2.5-7B" << false << "it looks like a Hugging Face hub id";
  QTest::newRow("no config.json") << "EMPTY" << false << "model_name_or_path: cannot use the model";
  QTest::newRow("unsupported architecture")
      << wizard_test::testData("unsupported-model") << false
      << "model_name_or_path: architecture GPT2LMHeadModel is not supported";
}

void TestModelPage::validation() {
  QFETCH(QString, path);
  QFETCH(bool, complete);
  QFETCH(QString, message);
  QTemporaryDir empty;
  if (path == QLatin1String("EMPTY")) path = empty.path();

  RunDraft draft;
  draft.load({}, QDir::tempPath());
  ModelPage page(&draft);
  page.pathEdit()->setText(path);
  QCOMPARE(QString::fromStdString(draft.config().model_name_or_path), path);
  QVERIFY(!page.isComplete());  // until the folder has been read
  wizard_test::verifyPage(page, complete, message);
}

void TestModelPage::facts() {
  RunDraft draft;
  ModelPage page(&draft);
  QCOMPARE(page.fact("architecture"), QString());
  page.pathEdit()->setText(wizard_test::shape("qwen2.5-7b"));
  QTRY_COMPARE(page.fact("architecture"), QStringLiteral("Qwen2ForCausalLM"));
  QVERIFY2(page.fact("parameters").startsWith(QStringLiteral("7.62B (")),
           qPrintable(page.fact("parameters")));
  QCOMPARE(page.fact("layers"), QStringLiteral("28"));
  QCOMPARE(page.fact("heads"), QStringLiteral("28"));
  QCOMPARE(page.fact("kv_heads"), QStringLiteral("4"));
  QCOMPARE(page.fact("vocabulary"), QLocale().toString(152064));
  QCOMPARE(page.fact("max_positions"), QLocale().toString(32768));

  page.pathEdit()->setText(QStringLiteral("/nonexistent"));
  QTRY_COMPARE(page.fact("architecture"), QString());
}

void TestModelPage::demoButton() {
  RunDraft draft;
  ModelPage page(&draft);
  QVERIFY(page.demoButton()->isHidden());
  page.setDemoModelDir(wizard_test::demoModel());
  QVERIFY(!page.demoButton()->isHidden());
  page.demoButton()->click();
  QCOMPARE(QString::fromStdString(draft.config().model_name_or_path), wizard_test::demoModel());
  QTRY_COMPARE(page.fact("layers"), QStringLiteral("4"));
  QVERIFY(page.isComplete());
}

QTEST_MAIN(TestModelPage)
#include "tst_model_page.moc"
