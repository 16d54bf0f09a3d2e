// MemoryPage: the estimate arrives off the GUI thread as a stacked bar whose parts add up to the
// total, against the GPU memory box; the verdict says whether it fits; "Smallest SP size that
// fits" sets sequence_parallel_size, which the Parallelism page then shows.
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QPushButton>
#include <QSignalSpy>
#include <QTabWidget>
#include <QTableWidget>
#include <QtTest>

#include "studio/ui/wizard/length_plan_chart.h"
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

// 1048576 -> "1,048,576", as the page writes lengths.
QString grouped(qint64 n) {
  QString d = QString::number(n);
  for (auto i = d.size() - 3; i > 0; i -= 3) d.insert(i, QLatin1Char(','));
  return d;
}

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
  void lengthPlannerDrawsAndSetsAPoint();
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
  QVERIFY2(page.verdictText().startsWith(QStringLiteral("Fits: ")), qPrintable(page.verdictText()));
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
  QTRY_VERIFY_WITH_TIMEOUT(!page.isBusy() && page.outcome()->estimate->model_state_bytes == 0.0,
                           20000);
  QVERIFY(page.outcome()->estimate->offloaded_bytes > 10 * kGiB);
  QVERIFY2(page.detailsText().contains(QStringLiteral("ZeRO stage 3")) &&
               page.detailsText().contains(QStringLiteral("Offloaded to host memory")) &&
               page.detailsText().contains(QStringLiteral("0.50 GiB of host memory of its own")),
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
      wizard_test::sourcePath("resources/deepspeed/ds_z3_offload_config.json").toStdString(),
      error);
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

// The length planner on Qwen2.5-7B at 80 GiB: the chart's lines and the table's cells are the
// planner's own points (studio::plan_lengths, checked in tst_length_plan), the published points
// are drawn, and choosing a cell by keyboard ("Use this point") or a point on the chart by mouse
// sets that configuration: SP mode and size, ZeRO and offload keys, tiling, cutoff_len and the
// world, which the estimate then finds fitting.
void TestMemoryPage::lengthPlannerDrawsAndSetsAPoint() {
  RunDraft draft;
  ParallelismPage parallelism(&draft);
  MemoryPage page(&draft);
  page.resize(1100, 800);
  page.QWidget::show();
  page.tabs()->setCurrentWidget(page.planChart()->parentWidget());
  QVERIFY(QTest::qWaitForWindowExposed(&page));
  draft.setWorld(8, 1);
  draft.load(longRun(), QDir::tempPath());
  QTRY_VERIFY_WITH_TIMEOUT(page.outcome().has_value() && !page.isBusy(), 30000);
  const studio::LengthPlan want = studio::plan_lengths(
      draft.config(), *draft.model(),
      [] {
        studio::EstimateOptions o;
        o.gpu_capacity_bytes = 80 * kGiB;
        return o;
      }(),
      MemoryPage::kPlanGpusPerNode, 64);
  const studio::LengthPlan& plan = page.outcome()->plan;
  QCOMPARE(int(plan.lines.size()), 12);
  QCOMPARE(page.planChart()->lineCount(), 12);
  QCOMPARE(page.planTable()->rowCount(), 12);
  QCOMPARE(page.planTable()->columnCount(), 7);
  for (int l = 0; l < 12; ++l) {
    QCOMPARE(page.planChart()->lineName(l),
             QString::fromStdString(want.lines[size_t(l)].option.label()));
    QCOMPARE(page.planTable()->verticalHeaderItem(l)->text(), page.planChart()->lineName(l));
    QVector<QPointF> drawn;
    for (int k = 0; k < 7; ++k) {
      const studio::PlanPoint& p = want.lines[size_t(l)].points[size_t(k)];
      QCOMPARE(plan.lines[size_t(l)].points[size_t(k)].longest, p.longest);
      if (p.longest) drawn << QPointF(p.gpus, double(*p.longest));
      QCOMPARE(page.planTable()->item(l, k)->text(),
               p.longest ? grouped(*p.longest) : QStringLiteral("none"));
    }
    QCOMPARE(page.planChart()->linePoints(l), drawn);
  }
  QCOMPARE(page.planChart()->publishedPoints().size(),
           int(studio::published_long_context_points().size()));

  // Keyboard: the cell of "ulysses, ZeRO-3 + offload, tiled MLP + activation offload" at 16
  // GPUs, then "Use this point".
  const int line = 7, column = 4;  // ulysses' fourth line; 1, 2, 4, 8, 16
  const studio::PlanPoint target = plan.lines[line].points[column];
  QVERIFY(target.longest.has_value());
  page.planTable()->setFocus();
  page.planTable()->setCurrentCell(line, column);
  QVERIFY(page.planUseButton()->isEnabled());
  QTest::keyClick(page.planUseButton(), Qt::Key_Space);
  QCOMPARE(draft.worldSize(), 16);
  QCOMPARE(draft.nodes(), 2);
  const studio::RunConfig& c = draft.config();
  QCOMPARE(c.sequence_parallel_mode, studio::SpMode::Ulysses);
  QCOMPARE(c.sequence_parallel_size, int64_t{target.sp});
  QCOMPARE(c.cutoff_len, *target.longest);
  QVERIFY(c.tiled_mlp && c.offload_activations && c.offload_optimizer && c.offload_param);
  QCOMPARE(c.zero_stage.value_or(-1), int64_t{3});
  QVERIFY(!c.deepspeed.has_value());
  QTRY_VERIFY_WITH_TIMEOUT(!page.isBusy() && page.outcome()->estimate->world_size == 16, 30000);
  QVERIFY2(page.outcome()->estimate->fits(), qPrintable(page.verdictText()));

  // Mouse: a click on a point of the chart that no other line's point is near (lines that
  // reach the same length at a GPU count draw their points on top of each other).
  page.planChart()->replot();
  const studio::LengthPlan& now = page.outcome()->plan;
  auto pixel = [&](const studio::PlanPoint& p) {
    return QPointF(page.planChart()->xAxis->coordToPixel(p.gpus),
                   page.planChart()->yAxis->coordToPixel(double(*p.longest)));
  };
  int pickLine = -1, pickPoint = -1;
  for (int l = 0; l < 12 && pickLine < 0; ++l)
    for (int k = 0; k < 7 && pickLine < 0; ++k) {
      const studio::PlanPoint& p = now.lines[size_t(l)].points[size_t(k)];
      if (!p.longest || p.gpus == 16) continue;
      bool alone = true;
      for (int m = 0; m < 12 && alone; ++m)
        for (int j = 0; j < 7 && alone; ++j) {
          const studio::PlanPoint& q = now.lines[size_t(m)].points[size_t(j)];
          if ((m != l || j != k) && q.longest && QLineF(pixel(p), pixel(q)).length() < 14)
            alone = false;
        }
      if (alone) pickLine = l, pickPoint = k;
    }
  QVERIFY2(pickLine >= 0, "every point of the chart has a neighbour within 14 px");
  const studio::PlanLine& line2 = now.lines[size_t(pickLine)];
  const studio::PlanPoint picked = line2.points[size_t(pickPoint)];
  const QPoint at = pixel(picked).toPoint();
  QCOMPARE(page.planChart()->pointAt(at), std::make_pair(pickLine, pickPoint));
  QSignalSpy chosen(page.planChart(), &studio::ui::LengthPlanChart::pointChosen);
  QTest::mouseClick(page.planChart(), Qt::LeftButton, {}, at);
  QCOMPARE(chosen.count(), 1);
  QCOMPARE(draft.worldSize(), picked.gpus);
  QCOMPARE(draft.config().sequence_parallel_mode, line2.option.mode);
  QCOMPARE(draft.config().sequence_parallel_size, int64_t{picked.sp});
  QCOMPARE(draft.config().cutoff_len, *picked.longest);
  QCOMPARE(draft.config().zero_stage.value_or(-1), int64_t{line2.option.zero_stage});
  QCOMPARE(parallelism.spSizeBox()->currentData().toInt(), picked.sp);
}
