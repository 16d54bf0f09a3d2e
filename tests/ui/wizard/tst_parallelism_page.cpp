// ParallelismPage: only valid SP sizes are offered (valid_sp_sizes for the mode and the model),
// the others are listed with the reason; each mode is explained; usp offers its Ulysses x ring
// splits; validate_config's SP messages appear live, e.g. for an imported Ulysses SP=8 config of
// Qwen2.5-7B (28 query heads).
#include <QComboBox>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QtTest>

#include "studio/ui/wizard/parallelism_page.h"
#include "studio/ui/wizard/sp_layout_view.h"
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
  void layoutIsDrawnLive();
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

// The layout is drawn live from the page's choices: zigzag-ring's paired chunks in each SP
// rank's colour (read back from the widget's pixels), the GPUs of both replicas, the traffic of a
// layer in words and bytes; switching to usp 4 x 2 adds the head groups and the all-to-alls.
void TestParallelismPage::layoutIsDrawnLive() {
  RunDraft draft;
  ParallelismPage page(&draft);
  page.resize(900, 900);
  page.show();
  QVERIFY(QTest::qWaitForWindowExposed(&page));
  draft.load(shapeRun(QStringLiteral("qwen2.5-7b"),
                      {"sequence_parallel_size=4", "cutoff_len=32768", "bf16=true",
                       "per_device_train_batch_size=1"}),
             QDir::tempPath());
  page.gpusBox()->setValue(8);
  QVERIFY(wizard_test::settled(draft));
  studio::ui::SpLayoutView* view = page.layoutView();
  QTRY_VERIFY(view->picture().has_value() && view->picture()->world == 8);
  const studio::SpPicture& pic = *view->picture();
  QCOMPARE(pic.sp, 4);
  QCOMPARE(pic.replicas, 2);
  QCOMPARE(int(pic.ranks[0].tokens.size()), 2);  // c_0 and c_7
  const QImage shot = view->grab().toImage();
  const qreal dpr = shot.devicePixelRatio();
  for (int s = 0; s < 4; ++s) {
    for (int k = 0; k < int(pic.ranks[size_t(s)].tokens.size()); ++k) {
      const QRect r = view->spanRect(s, k);
      QVERIFY(!r.isEmpty());
      // The centre of a span is its rank's colour unless a label is drawn there: look beside it.
      const QColor c = shot.pixelColor(QPoint(r.left() + 2, r.center().y()) * dpr);
      QCOMPARE(c.rgb(), view->rankColor(s).rgb());
    }
  }
  QVERIFY(view->spanRect(0, 0).left() < view->spanRect(1, 0).left());   // c_0 before c_1
  QVERIFY(view->spanRect(0, 1).left() > view->spanRect(1, 1).left());   // c_7 after c_6
  for (int g = 0; g < 8; ++g) {
    const QRect box = view->gpuRect(g);
    QCOMPARE(shot.pixelColor(QPoint(box.left() + 2, box.top() + 2) * dpr).rgb(),
             view->rankColor(g % 4).rgb());
  }
  const QStringList traffic = view->trafficLines();
  QCOMPARE(traffic.size(), 1);
  // 8,192 tokens a rank x 4 KV heads x 128 x 2 bytes x 2 (K, V) = 16.0 MiB, 3 times, 28 layers.
  QVERIFY2(traffic[0].startsWith("K/V block passed to the next of the 4 ring ranks: 16.0 MiB x 3 "
                                 "per layer forward, x 28 layers"),
           qPrintable(traffic[0]));

  QVERIFY(wizard_test::setField(&page, QStringLiteral("sequence_parallel_mode"),
                                QStringLiteral("usp")));
  QVERIFY(wizard_test::settled(draft));
  QTRY_VERIFY(view->picture()->mode == studio::SpMode::Usp);
  QCOMPARE(view->picture()->ulysses, 4);  // 4 divides the 28 heads: 4 x 1 for SP 4
  QVERIFY(!view->headsRect(1).isEmpty());
  QCOMPARE(view->trafficLines().size(), 2);  // the two all-to-alls; a ring of 1 passes nothing
  QVERIFY(view->trafficLines()[0].startsWith("all-to-all of q, k and v among the 4 Ulysses ranks"));
}

QTEST_MAIN(TestParallelismPage)
#include "tst_parallelism_page.moc"
