// ModelPage: the model folder's facts arrive off the GUI thread; a missing folder, a folder
// without config.json and an unsupported architecture keep the page incomplete with a message.
// A hub id is read from the local Hugging Face cache (HF_HUB_CACHE, set here to a test cache).
#include <QDir>
#include <QFile>
#include <QLabel>
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

 private:
  QTemporaryDir cache_;

 private slots:
  void initTestCase();
  void validation_data();
  void validation();
  void facts();
  void demoButton();
};

// A cache holding the demo model as Org/Tiny-Chat at main (huggingface_hub's layout).
void TestModelPage::initTestCase() {
  QVERIFY(cache_.isValid());
  const QString commit(40, QLatin1Char('a'));
  const QString repo = cache_.filePath("models--Org--Tiny-Chat");
  QVERIFY(QDir().mkpath(repo + "/refs") && QDir().mkpath(repo + "/snapshots/" + commit));
  QFile ref(repo + "/refs/main");
  QVERIFY(ref.open(QIODevice::WriteOnly));
  ref.write(commit.toUtf8());
  ref.close();
  for (const char* file : {"config.json", "tokenizer.json", "tokenizer_config.json"})
    QVERIFY(QFile::copy(wizard_test::demoModel() + "/" + file,
                        repo + "/snapshots/" + commit + "/" + file));
  qputenv("HF_HUB_CACHE", QFile::encodeName(cache_.path()));
}

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
  QTest::newRow("hub id in the local cache") << "Org/Tiny-Chat" << true << "";
  QTest::newRow("hub id not in the cache")
      << "Qwen/Qwen2.5-7B" << false
      << "model_name_or_path: 'Qwen/Qwen2.5-7B' is no folder here";
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
  // 28 query heads over 4 key/value heads: Ulysses splits them over at most 28 ranks.
  QCOMPARE(page.fact("trainable"),
           QStringLiteral("Yes: full-parameter SFT and DPO; sequence parallelism zigzag-ring at "
                          "any degree, Ulysses up to 28 ranks (28 query, 4 key/value heads)"));

  QVERIFY(!page.summaryText().contains(QStringLiteral("Hugging Face cache")));

  // A hub id: the facts of its snapshot, and the summary says where it was found.
  page.pathEdit()->setText(QStringLiteral("Org/Tiny-Chat"));
  QTRY_COMPARE(page.fact("layers"), QStringLiteral("4"));
  QVERIFY2(page.summaryText().contains(
               QStringLiteral("From the local Hugging Face cache: %1/models--Org--Tiny-Chat/"
                              "snapshots/%2 (revision main).")
                   .arg(cache_.path(), QString(40, QLatin1Char('a')))),
           qPrintable(page.summaryText()));

  // A model this engine cannot train says so before anything else is filled in.
  page.pathEdit()->setText(wizard_test::testData("unsupported-model"));
  QTRY_COMPARE(page.fact("architecture"), QStringLiteral("GPT2LMHeadModel"));
  QVERIFY2(page.fact("trainable").startsWith(
               QStringLiteral("No: architecture GPT2LMHeadModel is not supported (supported: ")),
           qPrintable(page.fact("trainable")));

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
