// report_to: tensorboard for real: studio-train --nproc 2 (SFT with evaluation, and DPO) writes
// TensorBoard event files that TensorBoard itself (its Python package) reads back with the
// values of events.jsonl: the loss, learning rate, gradient norm, epoch and tokens/s of every
// logged step, the eval losses, DPO's rewards, the process memory; into logging_dir, or into
// Hugging Face's default OUTPUT_DIR/runs/<date>_<host>. The model FLOPs and MFU of every step
// follow docs/events.md's formula (STUDIO_PEAK_TFLOPS gives the CPU a peak).
#include <QtTest/QtTest>

#include <cmath>

#include "tensorboard_reference.h"
#include "train_runs.h"

namespace {

const QString kSource = QStringLiteral(STUDIO_SOURCE_DIR);

// TensorBoard's points of `tag` as step -> value.
std::map<int, double> points(const QJsonObject& tags, const QString& tag) {
  std::map<int, double> out;
  for (const auto& p : tags[tag].toArray()) out[p.toArray()[0].toInt()] = p.toArray()[1].toDouble();
  return out;
}

bool same_float(double tb, double written) {
  return float(tb) == float(written);  // TensorBoard's simple_value is a float32
}

}  // namespace

class TestReportTensorBoard : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString model_;

  QString config(const QString& name, const QString& out, const QStringList& extra, bool dpo) {
    QStringList lines{"model_name_or_path: " + model_,
                      dpo ? "stage: dpo" : "stage: sft",
                      "do_train: true",
                      "finetuning_type: full",
                      dpo ? "dataset: demo_dpo" : "dataset: demo_sft",
                      "dataset_dir: " + kSource + "/resources/demo/data",
                      "template: qwen",
                      "cutoff_len: 64",
                      "max_samples: 48",
                      "val_size: 8",
                      "eval_strategy: steps",
                      "eval_steps: 3",
                      "per_device_eval_batch_size: 4",
                      "output_dir: " + out,
                      "logging_steps: 1",
                      "save_steps: 100",
                      "learning_rate: 1.0e-3",
                      "per_device_train_batch_size: 2",
                      "max_steps: 6",
                      "seed: 3",
                      "report_to: tensorboard"};
    return train_runs::write_yaml(dir_.filePath(name + ".yaml"), lines, extra);
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    model_ = train_runs::make_tiny_model(dir_.path(), train_runs::TinyModel{});
    QVERIFY(!model_.isEmpty());
    qputenv("STUDIO_PEAK_TFLOPS", "0.25");  // inherited by studio-train
  }

  void valuesAsInEvents_data() {
    QTest::addColumn<bool>("dpo");
    QTest::addColumn<bool>("defaultDir");
    QTest::newRow("sft, logging_dir") << false << false;
    QTest::newRow("dpo, the default folder") << true << true;
  }
  void valuesAsInEvents() {
    QFETCH(bool, dpo);
    QFETCH(bool, defaultDir);
    const QString out = dir_.filePath(dpo ? "dpo" : "sft");
    const QString logdir = dir_.filePath(dpo ? "dpo-tb" : "sft-tb");
    QStringList extra;
    if (!defaultDir) extra << "logging_dir: " + logdir;
    const auto r = train_runs::run(
        {"train", config(dpo ? "dpo" : "sft", out, extra, dpo), "--nproc", "2"});
    QVERIFY2(r.code == 0, qPrintable(r.err.right(3000)));
    QString read = logdir;
    if (defaultDir) {  // OUTPUT_DIR/runs/<Mon><DD>_<HH-MM-SS>_<host>
      const QStringList runs = QDir(out + "/runs").entryList(QDir::Dirs | QDir::NoDotAndDotDot);
      QCOMPARE(runs.size(), 1);
      QVERIFY2(QRegularExpression("^[A-Z][a-z]{2}\\d{2}_\\d{2}-\\d{2}-\\d{2}_.+$").match(runs[0]).hasMatch(),
               qPrintable(runs[0]));
      read = out + "/runs/" + runs[0];
    }
    QString error;
    const QJsonObject tags = tensorboard_reference::scalars(read, error);
    QVERIFY2(error.isEmpty(), qPrintable(error));

    int steps = 0, evals = 0;
    const QStringList stepTags = dpo ? QStringList{"train/loss", "train/learning_rate",
                                                   "train/grad_norm", "train/epoch",
                                                   "train/rewards/chosen", "train/rewards/margins",
                                                   "train/rewards/accuracies", "train/mfu"}
                                     : QStringList{"train/loss", "train/learning_rate",
                                                   "train/grad_norm", "train/epoch",
                                                   "train/tokens_per_sec", "memory/rss_mib",
                                                   "train/model_tflops", "train/mfu"};
    const QStringList fields = dpo ? QStringList{"loss", "lr", "grad_norm", "epoch",
                                                 "rewards/chosen", "rewards/margins",
                                                 "rewards/accuracies", "mfu"}
                                   : QStringList{"loss", "lr", "grad_norm", "epoch",
                                                 "tokens_per_sec", "rss_mib", "model_tflops",
                                                 "mfu"};
    // The tiny model (hidden 32, intermediate 64, 2 layers, 4 heads of 8, 2 kv heads, vocab 4288,
    // untied): weights in matrix products per token, and the attention term's bound at S <= 64.
    const double matmul = 2 * (32 * 32 + 2 * 32 * 16 + 32 * 32 + 3 * 32 * 64) + 4288 * 32;
    const double passes = dpo ? 4 : 3;  // DPO: the reference's forward too
    const double per_token_min = passes * 2 * matmul;
    const double per_token_max = per_token_min + passes * 2 * 2 * 4 * 8 * 65;
    for (const QJsonObject& e : train_runs::events(out)) {
      if (e["event"].toString() == "start") {
        QCOMPARE(e["peak_tflops"].toDouble(), 0.25);
        QCOMPARE(e["device_name"].toString(), QString("cpu"));
        QCOMPARE(e["total_steps"].toInt(), 6);
      }
      if (e["event"].toString() == "step") {
        ++steps;
        const int step = e["step"].toInt();
        const double per_token =
            e["model_tflops"].toDouble() * 1e12 * 2 / e["tokens_per_sec"].toDouble();
        QVERIFY2(per_token >= per_token_min * (1 - 1e-9) && per_token <= per_token_max * (1 + 1e-9),
                 qPrintable(QString("model FLOPs per token %1, expected %2 .. %3")
                                .arg(per_token).arg(per_token_min).arg(per_token_max)));
        QVERIFY(std::abs(e["mfu"].toDouble() - e["model_tflops"].toDouble() / 0.25) < 1e-12);
        for (int i = 0; i < stepTags.size(); ++i) {
          const auto tb = points(tags, stepTags[i]);
          QVERIFY2(tb.count(step), qPrintable(stepTags[i] + " lacks step " + QString::number(step)));
          QVERIFY2(same_float(tb.at(step), e[fields[i]].toDouble()),
                   qPrintable(QStringLiteral("%1 at step %2: %3 vs %4")
                                  .arg(stepTags[i]).arg(step).arg(tb.at(step))
                                  .arg(e[fields[i]].toDouble())));
        }
      } else if (e["event"].toString() == "eval") {
        ++evals;
        const auto tb = points(tags, "eval/loss");
        QVERIFY(tb.count(e["step"].toInt()));
        QVERIFY(same_float(tb.at(e["step"].toInt()), e["loss"].toDouble()));
      }
    }
    QCOMPARE(steps, 6);
    QCOMPARE(evals, 2);
    QCOMPARE(int(points(tags, "train/loss").size()), 6);
  }

  // A name it does not write to is said at validation, not accepted in silence.
  void otherIntegrationsAreWarned() {
    const QString yaml = config("wandb", dir_.filePath("wandb"), {"report_to: [tensorboard, wandb]"},
                                false);
    const auto r = train_runs::run({"validate", yaml, "--nproc", "2"});
    QVERIFY2(r.err.contains("report_to") && r.err.contains("wandb is not built in"),
             qPrintable(r.err));
  }
};

QTEST_MAIN(TestReportTensorBoard)
#include "tst_report_tensorboard.moc"
