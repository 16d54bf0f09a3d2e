// MemoryPage: the estimate arrives off the GUI thread as a stacked bar whose parts add up to the
// total, against the GPU memory box; the verdict says whether it fits; "Smallest SP size that
// fits" sets sequence_parallel_size, which the Parallelism page then shows.
#include <QCheckBox>
#include <QComboBox>
#include <QTableWidget>
#include <QDoubleSpinBox>
#include <QPushButton>
#include <QSignalSpy>
#include <QtTest>

#include "studio/ui/wizard/memory_bar.h"
#include "studio/ui/wizard/memory_page.h"
#include "studio/ui/wizard/parallelism_page.h"
#include "wizard_test_support.h"

using studio::ui::MemoryBar;
using studio::ui::MemoryPage;
using studio::ui::ParallelismPage;
using studio::ui::RunDraft;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Qwen2.5-7B at 256k tokens on one node of 8 GPUs, ZeRO-3 with offload.
studio::RunConfig longRun() {
  return wizard_test::demoRun(
      {QStringLiteral("model_name_or_path=") + wizard_test::shape("qwen2.5-7b"),
       QStringLiteral("deepspeed=") +
           wizard_test::sourcePath("resources/deepspeed/ds_z3_offload_config.json"),
       "cutoff_len=262144", "per_device_train_batch_size=1", "bf16=true",
       "gradient_checkpointing=true"});
}

}  // namespace

class TestMemoryPage : public QObject {
  Q_OBJECT

 private slots:
  void estimateIsDrawn();
  void smallestSpButtonSetsTheSize();
  void gpuMemoryMovesTheLimit();
  void zeroChoicesChangeTheEstimate();
  void noModelNoEstimate();
  void longestSequenceAndWhatOptionsBuy();
};

void TestMemoryPage::estimateIsDrawn() {
  RunDraft draft;
  MemoryPage page(&draft);
  draft.setWorld(8, 1);
  draft.load(longRun(), QDir::tempPath());
  QTRY_VERIFY_WITH_TIMEOUT(page.outcome().has_value() && !page.isBusy(), 20000);
  const studio::MemoryEstimate& e = *page.outcome()->estimate;
  QCOMPARE(e.world_size, 8);
  QCOMPARE(e.sp_size, 1);
  QCOMPARE(e.capacity_bytes, 80 * kGiB);
  QVERIFY(page.outcome()->deepspeedError.isEmpty());
  double sum = 0;
  for (double gib : page.bar()->partGiB()) sum += gib;
  QVERIFY(qAbs(sum - e.bytes.total() / kGiB) < 1e-6);
  QCOMPARE(page.bar()->partGiB().size(), MemoryBar::partNames().size());
  QCOMPARE(page.bar()->capacityGiB(), 80.0);
  // 256k tokens on one GPU cannot fit in 80 GiB (tst_memory_estimate: 128k take 58.37 GiB).
  QVERIFY(!e.fits());
  QVERIFY2(page.verdictText().startsWith(QStringLiteral("Does not fit by ")),
           qPrintable(page.verdictText()));
}

void TestMemoryPage::smallestSpButtonSetsTheSize() {
  RunDraft draft;
  ParallelismPage parallelism(&draft);
  MemoryPage page(&draft);
  QSignalSpy estimated(&page, &MemoryPage::estimated);
  draft.setWorld(8, 1);
  draft.load(longRun(), QDir::tempPath());
  QTRY_VERIFY_WITH_TIMEOUT(page.outcome().has_value() && !page.isBusy(), 20000);
  const std::optional<int> best = page.outcome()->smallestFittingSp;
  QVERIFY(best.has_value());
  QVERIFY(*best > 1);
  QVERIFY(page.smallestSpButton()->isEnabled());

  page.smallestSpButton()->click();
  QCOMPARE(draft.config().sequence_parallel_size, int64_t{*best});
  QCOMPARE(parallelism.spSizeBox()->currentData().toInt(), *best);
  QTRY_VERIFY_WITH_TIMEOUT(!page.isBusy() && page.outcome()->estimate->sp_size == *best, 20000);
  QVERIFY2(page.verdictText().startsWith(QStringLiteral("Fits: ")),
           qPrintable(page.verdictText()));
  QVERIFY(!page.smallestSpButton()->isEnabled());  // already the smallest
  QVERIFY(estimated.count() >= 2);
}

// The Parallelism page's ZeRO controls (no JSON) reach the estimate: stage 3 shards the model
// states over the 8 ranks, offload takes them off the GPU into host memory.
void TestMemoryPage::zeroChoicesChangeTheEstimate() {
  RunDraft draft;
  ParallelismPage parallelism(&draft);
  MemoryPage page(&draft);
  draft.setWorld(8, 1);
  studio::RunConfig cfg = longRun();
  cfg.deepspeed.reset();
  draft.load(cfg, QDir::tempPath());
  QTRY_VERIFY_WITH_TIMEOUT(page.outcome().has_value() && !page.isBusy(), 20000);
  QCOMPARE(page.outcome()->estimate->zero_stage, 0);
  const double unsharded = page.outcome()->estimate->model_state_bytes;
  QVERIFY(unsharded > 100 * kGiB);  // 18 B/param of 7.6B parameters

  parallelism.zeroStageBox()->setValue(3);
  QCOMPARE(draft.config().zero_stage, std::optional<int64_t>(3));
  QTRY_VERIFY_WITH_TIMEOUT(!page.isBusy() && page.outcome()->estimate->zero_stage == 3, 20000);
  QVERIFY(qAbs(page.outcome()->estimate->model_state_bytes - unsharded / 18 * 16 / 8) <
          0.01 * unsharded);  // 16/8 B/param

  parallelism.offloadOptimizerBox()->setChecked(true);
  QVERIFY(draft.config().offload_optimizer);
  QTRY_VERIFY_WITH_TIMEOUT(
      !page.isBusy() && page.outcome()->estimate->model_state_bytes == 0.0, 20000);
  QVERIFY(page.outcome()->estimate->offloaded_bytes > 10 * kGiB);
  QVERIFY2(page.detailsText().contains(QStringLiteral("ZeRO stage 3")) &&
               page.detailsText().contains(QStringLiteral("Offloaded to host memory")),
           qPrintable(page.detailsText()));
}

void TestMemoryPage::gpuMemoryMovesTheLimit() {
  RunDraft draft;
  MemoryPage page(&draft);
  QCOMPARE(page.gpuMemoryBox()->value(), MemoryPage::kDefaultGpuGiB);
  draft.load(wizard_test::demoRun(), QDir::tempPath());
  QTRY_VERIFY_WITH_TIMEOUT(page.outcome().has_value() && !page.isBusy(), 20000);
  QVERIFY(page.verdictText().startsWith(QStringLiteral("Fits: ")));  // a 1.4M-parameter model
  page.gpuMemoryBox()->setValue(24);
  QTRY_COMPARE(page.bar()->capacityGiB(), 24.0);
  QCOMPARE(page.outcome()->estimate->capacity_bytes, 24 * kGiB);
}

void TestMemoryPage::noModelNoEstimate() {
  RunDraft draft;
  MemoryPage page(&draft);
  draft.load(wizard_test::demoRun({"model_name_or_path=/nonexistent"}), QDir::tempPath());
  QVERIFY(wizard_test::settled(draft));
  QVERIFY(!page.outcome().has_value());
  QVERIFY(!page.smallestSpButton()->isEnabled());
  QCOMPARE(page.verdictText(), QString());
}

// Below the bar: the longest cutoff_len that fits (the estimate at it fits, 1024 tokens more
// does not) and, per long-sequence option, the longest with it switched; switching one on the
// page moves the longest to what the table said, live.
void TestMemoryPage::longestSequenceAndWhatOptionsBuy() {
  RunDraft draft;
  MemoryPage page(&draft);
  draft.setWorld(8, 1);
  studio::RunConfig cfg = longRun();
  cfg.sequence_parallel_size = 8;
  cfg.sequence_parallel_mode = studio::SpMode::ZigzagRing;
  draft.load(cfg, QDir::tempPath());
  QTRY_VERIFY_WITH_TIMEOUT(page.outcome().has_value() && !page.isBusy(), 20000);
  const auto longest = page.outcome()->longestCutoff;
  QVERIFY(longest.has_value());
  studio::EstimateOptions opt;
  opt.nproc_per_node = 8;
  opt.gpu_capacity_bytes = 80 * kGiB;
  std::string error;
  opt.deepspeed = studio::read_deepspeed_json(
      wizard_test::sourcePath("resources/deepspeed/ds_z3_offload_config.json").toStdString(), error);
  const auto model = *draft.model();
  studio::RunConfig at = draft.config();
  at.cutoff_len = *longest;
  QVERIFY(studio::estimate_memory(at, model, opt).fits());
  at.cutoff_len = *longest + 1024;
  QVERIFY(!studio::estimate_memory(at, model, opt).fits());
  QVERIFY2(page.longestText().contains(QStringLiteral("Longest cutoff_len that fits in 80.00 GiB")),
           qPrintable(page.longestText()));

  std::optional<int64_t> withOffload;
  for (const auto& g : page.outcome()->gains)
    if (g.option == QLatin1String("offload_activations")) withOffload = g.longestSwitched;
  QVERIFY(withOffload && *withOffload > *longest);
  QCOMPARE(page.gainsTable()->rowCount(), int(page.outcome()->gains.size()));

  auto* box = page.findChild<QCheckBox*>(QStringLiteral("offload_activations"));
  QVERIFY(box);
  box->setChecked(true);
  QVERIFY(draft.config().offload_activations);
  QTRY_VERIFY_WITH_TIMEOUT(!page.isBusy() && page.outcome()->longestCutoff == withOffload, 20000);
}

QTEST_MAIN(TestMemoryPage)
#include "tst_memory_page.moc"
