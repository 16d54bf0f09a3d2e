// The length planner (length_plan.h) on the published model shapes of resources/model-shapes: each
// point is the estimate's own longest cutoff_len (the point's config fits, 1,024 tokens more does
// not), the point's config is one validation accepts for its world, lengths grow with the GPUs
// and with each memory saving, heads that do not divide fall back to a smaller SP group, and an
// unknown GPU gives no lines.
#include <QtTest>

#include "studio/config/config_io.h"
#include "studio/config/length_plan.h"
#include "studio/config/validate.h"

using namespace studio;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

ModelInfo shape(const QString& name) {
  std::string error;
  const auto m = read_model_info(STUDIO_SOURCE_DIR "/resources/model-shapes/" + name.toStdString(),
                                 error);
  if (!m) qFatal("cannot read the model shape %s: %s", qPrintable(name), error.c_str());
  return *m;
}

RunConfig config(const QString& yaml) {
  const LoadResult r = load_config_string(
      ("model_name_or_path: m\ndataset: d\ntemplate: qwen\noutput_dir: o\nbf16: true\n" + yaml)
          .toStdString(),
      "case.yaml");
  if (!r.ok()) qFatal("bad test config:\n%s", format_all(r.diagnostics).c_str());
  return r.config;
}

EstimateOptions on_gpu(double gib) {
  EstimateOptions opt;
  opt.gpu_capacity_bytes = gib * kGiB;
  return opt;
}

}  // namespace

class TestLengthPlan : public QObject {
  Q_OBJECT

 private slots:
  void pointsAreTheEstimatesOwn_data() {
    QTest::addColumn<QString>("model");
    QTest::addColumn<QString>("stage");
    QTest::addColumn<double>("gib");
    QTest::newRow("llama-3.1-8b sft, 80 GB") << "llama-3.1-8b" << "sft" << 80.0;
    QTest::newRow("qwen2.5-7b dpo, 80 GB") << "qwen2.5-7b" << "dpo" << 80.0;
    QTest::newRow("qwen2.5-72b sft, 141 GB") << "qwen2.5-72b" << "sft" << 141.0;
  }
  void pointsAreTheEstimatesOwn() {
    QFETCH(QString, model);
    QFETCH(QString, stage);
    QFETCH(double, gib);
    const ModelInfo m = shape(model);
    const RunConfig cfg = config("stage: " + stage + "\nper_device_train_batch_size: 1\n");
    const EstimateOptions opt = on_gpu(gib);
    const LengthPlan plan = plan_lengths(cfg, m, opt, 8, 64);
    QCOMPARE(plan.gpu_counts, std::vector<int>({1, 2, 4, 8, 16, 32, 64}));
    QCOMPARE(int(plan.lines.size()), 12);
    int points_that_fit = 0;
    for (const PlanLine& line : plan.lines) {
      QCOMPARE(int(line.points.size()), 7);
      std::optional<int64_t> before;
      for (const PlanPoint& p : line.points) {
        const QString where = QString::fromStdString(line.option.label()) +
                              QStringLiteral(", %1 GPUs").arg(p.gpus);
        QCOMPARE(p.nodes, (p.gpus + 7) / 8);
        QVERIFY2(p.gpus % p.sp == 0, qPrintable(where));
        // More GPUs never shorten the longest length (the same SP group or a larger one).
        if (before && p.longest) QVERIFY2(*p.longest >= *before, qPrintable(where));
        if (before) QVERIFY2(p.longest.has_value(), qPrintable(where));
        before = p.longest;
        if (!p.longest) continue;
        ++points_that_fit;
        // The point's config, on its world, fits; 1,024 more tokens (or the SP padding) do not.
        RunConfig c = config_for(cfg, line.option, p);
        QCOMPARE(c.cutoff_len, *p.longest);
        EstimateOptions e = opt;
        e.nproc_per_node = std::min(p.gpus, 8);
        e.nnodes = p.nodes;
        QVERIFY2(estimate_memory(c, m, e).fits(), qPrintable(where));
        QCOMPARE(longest_fitting_cutoff(c, m, e), p.longest);
        // Validation takes it for that world: the planner's configs are ones the engine runs.
        ValidateOptions v;
        v.nproc_per_node = e.nproc_per_node;
        v.nnodes = e.nnodes;
        const auto diags = validate_config(c, v);
        QVERIFY2(!has_errors(diags), qPrintable(where + ": " + QString::fromStdString(format_all(diags))));
      }
    }
    QVERIFY(points_that_fit > 0);
    // Each saving lengthens (or keeps) every point: ZeRO-2 <= ZeRO-3 <= + offload <= + tiling.
    for (size_t l = 0; l + 1 < plan.lines.size(); ++l) {
      if (plan.lines[l].option.mode != plan.lines[l + 1].option.mode) continue;
      for (size_t k = 0; k < plan.gpu_counts.size(); ++k) {
        const auto& a = plan.lines[l].points[k].longest;
        const auto& b = plan.lines[l + 1].points[k].longest;
        if (a) QVERIFY2(b && *b >= *a, qPrintable(QString::fromStdString(plan.lines[l + 1].option.label())));
      }
    }
  }

  // Ulysses splits the heads: where they do not divide, the point uses the largest SP size that
  // works and the rest of the GPUs are data parallel; zigzag-ring takes them all.
  void headsLimitUlysses() {
    const ModelInfo m = shape("qwen2.5-7b");  // 28 heads over 4 KV heads
    const LengthPlan plan = plan_lengths(config("stage: sft\n"), m, on_gpu(80), 8, 64);
    for (const PlanLine& line : plan.lines) {
      for (const PlanPoint& p : line.points) {
        if (line.option.mode == SpMode::ZigzagRing) QCOMPARE(p.sp, p.gpus);
        if (line.option.mode == SpMode::Ulysses) {
          QVERIFY(28 % p.sp == 0);
          QCOMPARE(p.ulysses_degree, p.sp);
        }
        if (line.option.mode == SpMode::Usp) QCOMPARE(p.sp % p.ulysses_degree, 0);
      }
    }
    const PlanLine& ulysses = plan.lines[4];
    QCOMPARE(ulysses.option.mode, SpMode::Ulysses);
    QCOMPARE(ulysses.points.back().sp, 4);  // of 64's divisors, 28 heads over 4 KV heads allow 1, 2, 4
  }

  void labelsAndKeys() {
    const PlanOption o{SpMode::Usp, 3, true, true};
    QCOMPARE(QString::fromStdString(o.label()),
             QStringLiteral("usp, ZeRO-3 + offload, tiled MLP + activation offload"));
    RunConfig c = config("stage: sft\ndeepspeed: ds_z2.json\ngradient_checkpointing: false\n");
    o.apply(c);
    QCOMPARE(c.zero_stage.value_or(-1), int64_t{3});
    QVERIFY(!c.deepspeed.has_value());
    QVERIFY(c.offload_optimizer && c.offload_param && c.tiled_mlp && c.offload_activations &&
            c.gradient_checkpointing);
    QCOMPARE(QString::fromStdString(PlanOption{SpMode::ZigzagRing, 2, false, false}.label()),
             QStringLiteral("zigzag-ring, ZeRO-2"));
  }

  void unknownGpuGivesNoLines() {
    const LengthPlan plan = plan_lengths(config("stage: sft\n"), shape("qwen2.5-7b"), EstimateOptions{});
    QVERIFY(plan.lines.empty());
    QCOMPARE(plan.gpu_counts.size(), size_t{7});
  }

  void publishedPointsAreThere() {
    const auto& points = published_long_context_points();
    QVERIFY(points.size() >= 5);
    bool alst = false, lf360 = false;
    for (const PublishedPoint& p : points) {
      QVERIFY(p.tokens > 0 && p.gpus > 0 && !p.source.empty());
      alst |= p.who == "Snowflake ALST" && p.gpus == 1 && p.tokens == 500'000;
      lf360 |= p.who == "360-LLaMA-Factory" && p.gpus == 8 && p.tokens == 210'000;
    }
    QVERIFY(alst && lf360);
  }
};

QTEST_MAIN(TestLengthPlan)
#include "tst_length_plan.moc"
