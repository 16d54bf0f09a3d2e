// ParallelismPage: only valid SP sizes are offered (valid_sp_sizes for the mode and the model),
// the others are listed with the reason; each mode is explained; usp offers its Ulysses x ring
// splits; validate_config's SP messages appear live, e.g. for an imported Ulysses SP=8 config of
// Qwen2.5-7B (28 query heads).
#include <QComboBox>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QtTest>

#include "studio/ui/wizard/parallelism_page.h"
#include "studio/ui/wizard/run_wizard.h"
#include "wizard_test_support.h"

using studio::ui::ParallelismPage;
using studio::ui::RunDraft;
using studio::ui::RunWizard;

Q_DECLARE_METATYPE(std::vector<int>)

namespace {

// A run of `shape` (a folder under resources/model-shapes) with `overrides`.
studio::RunConfig shapeRun(const QString& shape, const QStringList& overrides) {
  QStringList all{QStringLiteral("model_name_or_path=") + wizard_test::shape(shape)};
  return wizard_test::demoRun(all + overrides);
}

}  // namespace

class TestParallelismPage : public QObject {
  Q_OBJECT

 private slots:
  void offeredSizes_data();
  void offeredSizes();
  void validation_data();
  void validation();
  void importedUlysses8();
  void uspSplits();
  void choicesReachTheConfig();
};

void TestParallelismPage::offeredSizes_data() {
  QTest::addColumn<QString>("shape");
  QTest::addColumn<QString>("mode");
  QTest::addColumn<int>("gpus");
  QTest::addColumn<int>("nodes");
  QTest::addColumn<std::vector<int>>("offered");
  QTest::addColumn<QString>("excluded");

  QTest::newRow("qwen 7B zigzag-ring 8") << "qwen2.5-7b" << "zigzag-ring" << 8 << 1
                                         << std::vector<int>{1, 2, 4, 8} << "";
  QTest::newRow("qwen 7B ulysses 8")
      << "qwen2.5-7b" << "ulysses" << 8 << 1 << std::vector<int>{1, 2, 4}
      << "Not offered for ulysses - 8: 28 query heads are not divisible by 8.";
  QTest::newRow("qwen 7B usp 8") << "qwen2.5-7b" << "usp" << 8 << 1
                                 << std::vector<int>{1, 2, 4, 8} << "";
  QTest::newRow("qwen 7B ulysses 2 nodes x 8")
      << "qwen2.5-7b" << "ulysses" << 8 << 2 << std::vector<int>{1, 2, 4}
      << "Not offered for ulysses - 8: 28 query heads are not divisible by 8; 16: 28 query "
         "heads are not divisible by 16.";
  QTest::newRow("qwen 7B zigzag-ring 6") << "qwen2.5-7b" << "zigzag-ring" << 6 << 1
                                         << std::vector<int>{1, 2, 3, 6} << "";
  QTest::newRow("llama 8B ulysses 6")
      << "llama-3.1-8b" << "ulysses" << 6 << 1 << std::vector<int>{1, 2}
      << "Not offered for ulysses - 3: 32 query heads are not divisible by 3; 6: 32 query heads "
         "are not divisible by 6.";
}

void TestParallelismPage::offeredSizes() {
  QFETCH(QString, shape);
  QFETCH(QString, mode);
  QFETCH(int, gpus);
  QFETCH(int, nodes);
  QFETCH(std::vector<int>, offered);
  QFETCH(QString, excluded);
  RunDraft draft;
  ParallelismPage page(&draft);
  draft.load(shapeRun(shape, {}), QDir::tempPath());
  page.gpusBox()->setValue(gpus);
  page.nodesBox()->setValue(nodes);
  QCOMPARE(draft.worldSize(), gpus * nodes);
  QVERIFY(wizard_test::setField(&page, QStringLiteral("sequence_parallel_mode"), mode));
  QVERIFY(wizard_test::settled(draft));  // the model's heads arrive with the validation
  QCOMPARE(page.offeredSpSizes(), offered);
  QCOMPARE(page.spSizeBox()->count(), static_cast<int>(offered.size()));
  QCOMPARE(page.excludedNote(), excluded);
  QVERIFY(page.modeExplanation().startsWith(mode + QStringLiteral(": ")));
}

void TestParallelismPage::validation_data() {
  QTest::addColumn<QStringList>("overrides");
  QTest::addColumn<int>("gpus");
  QTest::addColumn<bool>("complete");
  QTest::addColumn<QString>("message");

  QTest::newRow("zigzag-ring 8 of 8") << QStringList{"sequence_parallel_size=8"} << 8 << true
                                      << "";
  QTest::newRow("ulysses 4 of 8")
      << QStringList{"sequence_parallel_size=4", "sequence_parallel_mode=ulysses"} << 8 << true
      << "";
  QTest::newRow("ulysses 8 of 8")
      << QStringList{"sequence_parallel_size=8", "sequence_parallel_mode=ulysses"} << 8 << false
      << "sequence_parallel_size: ulysses: 28 query heads are not divisible by 8";
  QTest::newRow("size not dividing the world") << QStringList{"sequence_parallel_size=3"} << 8
                                               << false
                                               << "3 does not divide the world size 8";
  QTest::newRow("usp 4 x 2")
      << QStringList{"sequence_parallel_size=8", "sequence_parallel_mode=usp",
                     "sequence_parallel_ulysses_degree=4", "sequence_parallel_ring_degree=2"}
      << 8 << true << "";
  QTest::newRow("usp 8 x 1")
      << QStringList{"sequence_parallel_size=8", "sequence_parallel_mode=usp",
                     "sequence_parallel_ulysses_degree=8", "sequence_parallel_ring_degree=1"}
      << 8 << false
      << "sequence_parallel_ulysses_degree: usp: 28 query heads are not divisible by 8";
  QTest::newRow("usp degrees not making the size")
      << QStringList{"sequence_parallel_size=8", "sequence_parallel_mode=usp",
                     "sequence_parallel_ulysses_degree=2", "sequence_parallel_ring_degree=2"}
      << 8 << false << "usp needs sequence_parallel_ulysses_degree x sequence_parallel_ring_degree";
  QTest::newRow("neat_packing on a ring")
      << QStringList{"sequence_parallel_size=2", "neat_packing=true"} << 2 << true << "";
  QTest::newRow("missing DeepSpeed JSON") << QStringList{"deepspeed=/nonexistent/ds.json"} << 1
                                          << true << "deepspeed: no such file";
}

void TestParallelismPage::validation() {
  QFETCH(QStringList, overrides);
  QFETCH(int, gpus);
  QFETCH(bool, complete);
  QFETCH(QString, message);
  RunDraft draft;
  ParallelismPage page(&draft);
  draft.load(shapeRun(QStringLiteral("qwen2.5-7b"), overrides), QDir::tempPath());
  page.gpusBox()->setValue(gpus);
  wizard_test::verifyPage(page, complete, message);
}

// The wizard sizes the world for the imported SP size; the size stays shown, marked, with
// validate_config's message, and the valid sizes are still the ones offered.
void TestParallelismPage::importedUlysses8() {
  RunWizard wizard;
  QString error;
  QVERIFY2(wizard.openConfig(wizard_test::testData("qwen7b-ulysses8.yaml"), &error),
           qPrintable(error));
  ParallelismPage* page = wizard.parallelismPage();
  QCOMPARE(page->gpusBox()->value(), 8);
  QVERIFY(wizard_test::settled(*wizard.draft()));
  QVERIFY(!page->isComplete());
  QVERIFY2(page->messageText().contains(
               "sequence_parallel_size: ulysses: 28 query heads are not divisible by 8; use "
               "zigzag-ring, or a degree that divides 28 (allowed: 1, 2, 4, 7, 14, 28)"),
           qPrintable(page->messageText()));
  QCOMPARE(page->offeredSpSizes(), (std::vector<int>{1, 2, 4}));
  QCOMPARE(page->spSizeBox()->currentText(), QStringLiteral("8 (not valid here)"));
  QVERIFY(page->selectSpSize(4));
  QCOMPARE(wizard.config().sequence_parallel_size, int64_t{4});
  QVERIFY(wizard_test::settled(*wizard.draft()));
  QVERIFY2(page->isComplete(), qPrintable(page->messageText()));
  QCOMPARE(page->spSizeBox()->count(), 3);  // the invalid 8 is gone once replaced
}

void TestParallelismPage::uspSplits() {
  RunDraft draft;
  ParallelismPage page(&draft);
  draft.load(shapeRun(QStringLiteral("qwen2.5-7b"), {"sequence_parallel_size=8"}),
             QDir::tempPath());
  page.gpusBox()->setValue(8);
  QVERIFY(wizard_test::settled(draft));
  QVERIFY(page.uspSplitBox()->isHidden());
  // Switching to usp picks the largest Ulysses degree the 28 heads allow: 4 x 2.
  QVERIFY(wizard_test::setField(&page, QStringLiteral("sequence_parallel_mode"),
                                QStringLiteral("usp")));
  QVERIFY(!page.uspSplitBox()->isHidden());
  QCOMPARE(draft.config().sequence_parallel_ulysses_degree, int64_t{4});
  QCOMPARE(draft.config().sequence_parallel_ring_degree, int64_t{2});
  QVERIFY(wizard_test::settled(draft));
  QStringList splits;
  for (int i = 0; i < page.uspSplitBox()->count(); ++i) splits << page.uspSplitBox()->itemText(i);
  QCOMPARE(splits, (QStringList{"1 x 8", "2 x 4", "4 x 2", "8 x 1"}));
  QCOMPARE(page.uspSplitBox()->currentText(), QStringLiteral("4 x 2"));
  // 8 x 1 would split 28 heads 8 ways: listed, not selectable.
  auto* items = qobject_cast<QStandardItemModel*>(page.uspSplitBox()->model());
  QVERIFY(!items->item(3)->isEnabled());
  QVERIFY(items->item(0)->isEnabled());
  page.uspSplitBox()->setCurrentIndex(1);
  QCOMPARE(draft.config().sequence_parallel_ulysses_degree, int64_t{2});
  QCOMPARE(draft.config().sequence_parallel_ring_degree, int64_t{4});
  QVERIFY(wizard_test::settled(draft));
  QVERIFY2(page.isComplete(), qPrintable(page.messageText()));
}

void TestParallelismPage::choicesReachTheConfig() {
  RunDraft draft;
  ParallelismPage page(&draft);
  draft.load(shapeRun(QStringLiteral("qwen2.5-7b"), {}), QDir::tempPath());
  page.nodesBox()->setValue(2);
  page.gpusBox()->setValue(4);
  QCOMPARE(draft.processesPerNode(), 4);
  QCOMPARE(draft.nodes(), 2);
  QVERIFY(wizard_test::settled(draft));
  QVERIFY(page.selectSpSize(8));
  QCOMPARE(draft.config().sequence_parallel_size, int64_t{8});
  QVERIFY(wizard_test::setField(&page, QStringLiteral("deepspeed"), QStringLiteral("ds.json")));
  QCOMPARE(draft.config().deepspeed.value_or(""), std::string("ds.json"));
  QVERIFY(!page.selectSpSize(5));
}

QTEST_MAIN(TestParallelismPage)
#include "tst_parallelism_page.moc"
