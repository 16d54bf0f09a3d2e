// Sharded training (ZeRO stages 1-3, offload) end to end: `studio-train train --nproc N` (real
// worker processes, real Gloo, every collective verified) on a tiny GQA model in fp32 must give
// the per-step losses (relative 1e-6) and the parameters after 5 steps (max relative error 1e-6)
// of the unsharded run of the same world, for SFT and DPO, with SP=2 and dp x sp = 2 x 2; bf16
// within its rounding. Each rank's model states are measured by the CPU allocator and must be
// what the memory estimate says (5%); stage 3 holds 16/N bytes per parameter (2%), and with
// offload nothing of it on the device side. A stage 3 run resumes exactly from its checkpoint,
// also on another world size (the optimizer files are re-cut), and its saved model loads in
// transformers with the unsharded run's logits.
#include <QtTest/QtTest>

#include <cmath>
#include <map>

#include "studio/config/config_io.h"
#include "studio/config/memory_estimate.h"
#include "studio/config/validate.h"
#include "studio/model_facts/model_info.h"
#include "train_runs.h"

namespace {

const QString kSource = QStringLiteral(STUDIO_SOURCE_DIR);
using train_runs::max_relative_param_error;
using train_runs::Run;
using train_runs::run;

std::vector<QJsonObject> events(const QString& dir, const QString& kind) {
  std::vector<QJsonObject> out;
  for (const auto& e : train_runs::events(dir))
    if (e["event"].toString() == kind) out.push_back(e);
  return out;
}

std::map<int, double> step_losses(const QString& dir) {
  std::map<int, double> out;
  for (const auto& e : events(dir, "step")) out[e["step"].toInt()] = e["loss"].toDouble();
  return out;
}

double max_relative_loss_error(const std::map<int, double>& a, const std::map<int, double>& b) {
  double worst = a.size() == b.size() ? 0 : INFINITY;
  for (const auto& [step, loss] : a) {
    auto it = b.find(step);
    if (it == b.end()) return INFINITY;
    worst = std::max(worst, std::abs(loss - it->second) / std::max(std::abs(loss), 1e-30));
  }
  return worst;
}

}  // namespace

class TestZero : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString model_;
  QString vocabModel_;  // peakIsTheEstimate's: tied embeddings, most of its weights
  std::map<QString, QString> reference_;  // unsharded run key -> output dir

  QString bnbModel_;  // model_ as bitsandbytes saves it in 4 bits (bnb_model())

  QString bnb_model() {
    if (!bnbModel_.isEmpty()) return bnbModel_;
    QString error;
    bnbModel_ = train_runs::bnb_4bit_copy(model_, dir_.filePath("bnb-nf4"), &error);
    if (bnbModel_.isEmpty()) qFatal("bnb_quantize_model.py: %s", qPrintable(error));
    return bnbModel_;
  }

  QString write_config(const QString& name, const QStringList& extra) {
    const QStringList lines{
        "model_name_or_path: " + model_, "stage: sft", "do_train: true", "finetuning_type: full",
        "dataset: demo_sft", "dataset_dir: " + kSource + "/resources/demo/data", "template: qwen",
        "cutoff_len: 96", "max_samples: 48", "output_dir: " + dir_.filePath(name + "-out"),
        "overwrite_output_dir: true", "logging_steps: 1", "save_steps: 100000",
        "learning_rate: 1.0e-3", "lr_scheduler_type: cosine", "warmup_steps: 0",
        "weight_decay: 0.01", "max_grad_norm: 1.0", "gradient_accumulation_steps: 2",
        "max_steps: 5", "eval_strategy: 'no'", "seed: 11", "pref_beta: 0.1",
        // As in tst_sp_equivalence: gradients that are 0 in exact arithmetic must
        // not become +-lr Adam steps whose sign depends on the summation order.
        "adam_epsilon: 1.0e-6"};
    return train_runs::write_yaml(dir_.filePath(name + ".yaml"), lines, extra);
  }

  // Trains `name` with `extra` keys on `nproc` processes; returns its output folder or "".
  QString train(const QString& name, const QStringList& extra, int nproc, QString* err = nullptr) {
    const QString cfg = write_config(name, extra);
    const Run r = run({"train", cfg, "--nproc", QString::number(nproc)});
    if (err) *err = r.err;
    if (r.code != 0) {
      qWarning("%s failed (%d):\n%s", qPrintable(name), r.code, qPrintable(r.err.right(3000)));
      return {};
    }
    return dir_.filePath(name + "-out");
  }

  // The unsharded (stage 0) run of the same world, keys and data.
  QString reference(const QStringList& extra, int nproc) {
    const QString key = extra.join('|') + "|" + QString::number(nproc);
    auto it = reference_.find(key);
    if (it != reference_.end()) return it->second;
    const QString out = train("ref" + QString::number(reference_.size()),
                              extra + QStringList{"zero_stage: 0"}, nproc);
    reference_[key] = out;
    return out;
  }

  studio::ModelInfo model_info() const {
    std::string error;
    auto info = studio::read_model_info(model_.toStdString(), error);
    if (!info) qFatal("%s", error.c_str());
    return *info;
  }

  // A run resumed from the 5-step run `whole`'s checkpoint-3: steps 4 and 5 have its losses
  // and the saved weights (or adapters) are its own.
  void expect_continues(const QString& whole, const QString& resumed) {
    auto a = step_losses(whole), b = step_losses(resumed);
    QCOMPARE(b.size(), size_t(2));  // steps 4 and 5
    for (const auto& [step, loss] : b)
      QVERIFY2(std::abs(loss - a[step]) <= 1e-6 * std::abs(a[step]),
               qPrintable(QString("step %1: %2 vs %3").arg(step).arg(loss).arg(a[step])));
    const double param_error = max_relative_param_error(whole, resumed);
    QVERIFY2(param_error <= 1e-6, qPrintable(QString("parameters differ by %1").arg(param_error)));
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    train_runs::TinyModel m;
    m.layers = 3;
    model_ = train_runs::make_tiny_model(dir_.path(), m);
    QVERIFY(!model_.isEmpty());
  }

  void matchesUnsharded_data() {
    QTest::addColumn<QStringList>("keys");  // the run's own keys (besides the ZeRO request)
    QTest::addColumn<QStringList>("zero");
    QTest::addColumn<int>("nproc");
    QTest::addColumn<double>("tolerance");
    const QStringList sp2{"sequence_parallel_size: 2"};
    const QStringList grid{"sequence_parallel_size: 2"};  // on 4 processes: dp 2 x sp 2
    const QStringList ulysses{"sequence_parallel_size: 2", "sequence_parallel_mode: ulysses"};
    const QStringList dpo{"stage: dpo", "dataset: demo_dpo"};
    const QStringList z1{"zero_stage: 1"}, z2{"zero_stage: 2"}, z3{"zero_stage: 3"};
    const QStringList z2off{"zero_stage: 2", "offload_optimizer: true"};
    const QStringList z3off{"zero_stage: 3", "offload_optimizer: true", "offload_param: true"};
    QTest::newRow("sft sp2 stage 1") << sp2 << z1 << 2 << 1e-6;
    QTest::newRow("sft sp2 stage 2") << sp2 << z2 << 2 << 1e-6;
    QTest::newRow("sft sp2 stage 2 offload") << sp2 << z2off << 2 << 1e-6;
    QTest::newRow("sft sp2 stage 3") << sp2 << z3 << 2 << 1e-6;
    QTest::newRow("sft sp2 stage 3 offload") << sp2 << z3off << 2 << 1e-6;
    QTest::newRow("sft dp2xsp2 stage 1") << grid << z1 << 4 << 1e-6;
    QTest::newRow("sft dp2xsp2 stage 2") << grid << z2 << 4 << 1e-6;
    QTest::newRow("sft dp2xsp2 stage 3") << grid << z3 << 4 << 1e-6;
    QTest::newRow("sft dp2xsp2 stage 3 offload") << grid << z3off << 4 << 1e-6;
    QTest::newRow("sft ulysses dp2xsp2 stage 3") << ulysses << z3 << 4 << 1e-6;
    QTest::newRow("sft dp2 stage 3 checkpointing")
        << QStringList{"gradient_checkpointing: true"} << z3 << 2 << 1e-6;
    QTest::newRow("dpo sp2 stage 3 (sharded reference)") << dpo + sp2 << z3 << 2 << 1e-6;
    QTest::newRow("dpo sp2 stage 3 precomputed reference")
        << dpo + sp2 + QStringList{"precompute_ref_logps: true"} << z3 << 2 << 1e-6;
    QTest::newRow("dpo sp2 stage 2 offload") << dpo + sp2 << z2off << 2 << 1e-6;
    QTest::newRow("dpo dp2xsp2 stage 3 offload") << dpo + grid << z3off << 4 << 1e-6;
    // Evaluation on dp 2 with an odd number of eval samples: the DP ranks get different batch
    // counts, and the one with fewer runs idle gathers (stage 3 forwards gather over the world).
    const QStringList eval{"val_size: 5", "eval_strategy: steps", "eval_steps: 2",
                           "per_device_eval_batch_size: 1"};
    QTest::newRow("sft dp2 stage 3 uneven evaluation") << eval << z3 << 2 << 1e-6;
    QTest::newRow("dpo dp2 stage 3 uneven evaluation, precomputed reference")
        << dpo + eval + QStringList{"precompute_ref_logps: true"} << z3 << 2 << 1e-6;
    QTest::newRow("dpo dp2xsp2 stage 3 uneven evaluation") << dpo + grid + eval << z3 << 4 << 1e-6;
    // ASFT (use_asft_loss): a frozen reference runs after the policy on every micro-batch and
    // every eval batch; the rank with fewer eval batches runs idle gathers for both.
    const QStringList asft{"use_asft_loss: true", "asft_alpha: 0.5"};
    QTest::newRow("sft ASFT dp2 stage 3 uneven evaluation") << asft + eval << z3 << 2 << 1e-6;
    QTest::newRow("sft ASFT dp2xsp2 stage 3 offload") << asft + grid << z3off << 4 << 1e-6;
    // bf16: the same bf16 weights on every path (stage 3 gathers the masters rounded to bf16,
    // as stage 0 copies them); only the fp32 reduction order differs, amplified by bf16 math.
    QTest::newRow("sft sp2 bf16 stage 3") << sp2 + QStringList{"bf16: true"} << z3 << 2 << 2e-3;
    // The DeepSpeed JSON instead of the native keys: the bundled ZeRO-3 offload file.
    QTest::newRow("sft dp2xsp2 deepspeed ds_z3_offload_config.json")
        << grid
        << QStringList{"deepspeed: " + kSource + "/resources/deepspeed/ds_z3_offload_config.json"}
        << 4 << 1e-6;
  }

  void matchesUnsharded() {
    QFETCH(QStringList, keys);
    QFETCH(QStringList, zero);
    QFETCH(int, nproc);
    QFETCH(double, tolerance);
    const QString ref = reference(keys, nproc);
    QVERIFY(!ref.isEmpty());
    const QString name = QString("z%1")
                             .arg(QTest::currentDataTag())
                             .replace(QRegularExpression("[^A-Za-z0-9]+"), "-");
    const QString out = train(name, keys + zero, nproc);
    QVERIFY(!out.isEmpty());
    const auto a = step_losses(ref), b = step_losses(out);
    QCOMPARE(int(b.size()), 5);
    const double loss_error = max_relative_loss_error(a, b);
    QVERIFY2(loss_error <= tolerance, qPrintable(QString("losses differ by %1").arg(loss_error)));
    const double param_error = max_relative_param_error(ref, out);
    QVERIFY2(param_error <= tolerance,
             qPrintable(QString("parameters after 5 steps differ by %1").arg(param_error)));
    std::map<int, double> ref_eval, got_eval;
    for (const auto& e : events(ref, "eval")) ref_eval[e["step"].toInt()] = e["loss"].toDouble();
    for (const auto& e : events(out, "eval")) got_eval[e["step"].toInt()] = e["loss"].toDouble();
    if (keys.contains("eval_strategy: steps")) QVERIFY(!ref_eval.empty());
    const double eval_error = max_relative_loss_error(ref_eval, got_eval);
    QVERIFY2(eval_error <= tolerance,
             qPrintable(QString("eval losses differ by %1").arg(eval_error)));
  }

  // Every rank's model states as measured (events: gpus[].model_states_mib) against the
  // estimate's model_state_bytes + offloaded_bytes (5%); stage 3 at 16/N B/param (2%), and
  // with offload nothing of it on the device side.
  // The whole step's measured peak (the CPU allocator's count outside offload, what a GPU run's
  // max_memory_allocated is) against the estimate's total, on a model whose tied embeddings are
  // most of its weights: the end of the backward (their gradient's reduction) is the peak there.
  void peakIsTheEstimate_data() {
    QTest::addColumn<QStringList>("keys");
    QTest::addColumn<int>("nproc");
    const QStringList longContext{"bf16: true", "gradient_checkpointing: true",
                                  "offload_activations: true", "tiled_mlp: true"};
    QTest::newRow("stage 3 offload, one process")
        << longContext +
               QStringList{"zero_stage: 3", "offload_optimizer: true", "offload_param: true"}
        << 1;
    QTest::newRow("stage 3 offload, two processes")
        << longContext +
               QStringList{"zero_stage: 3", "offload_optimizer: true", "offload_param: true"}
        << 2;
    QTest::newRow("stage 2, two processes") << longContext + QStringList{"zero_stage: 2"} << 2;
    QTest::newRow("stage 3, one process") << longContext + QStringList{"zero_stage: 3"} << 1;
  }

  void peakIsTheEstimate() {
    QFETCH(QStringList, keys);
    QFETCH(int, nproc);
    if (vocabModel_.isEmpty()) {
      train_runs::TinyModel m;
      m.name = "vocab-heavy";
      m.hidden = 128;
      m.tied = true;
      m.overrides = QJsonObject{{"vocab_size", 32768},
                                {"intermediate_size", 256},
                                {"max_position_embeddings", 4096},
                                {"torch_dtype", "bfloat16"}};
      vocabModel_ = train_runs::make_tiny_model(dir_.path(), m);
      QVERIFY(!vocabModel_.isEmpty());
    }
    const QString name = QString("peak-%1")
                             .arg(QTest::currentDataTag())
                             .replace(QRegularExpression("[^A-Za-z0-9]+"), "-");
    // Packed rows trained on every token: each row is cutoff_len tokens with a target at
    // almost every one, what the estimate takes (the fused loss's chunk is sized by the rows
    // that have targets; short demo rows with masked prompts would hold far less).
    const QString out =
        train(name,
              keys + QStringList{"model_name_or_path: " + vocabModel_, "cutoff_len: 256",
                                 "max_steps: 2", "packing: true", "train_on_prompt: true",
                                 "gradient_accumulation_steps: 1"},
              nproc);
    QVERIFY(!out.isEmpty());
    const auto steps = events(out, "step");
    QCOMPARE(int(steps.size()), 2);
    const auto loaded = studio::load_config_file(dir_.filePath(name + ".yaml").toStdString());
    QVERIFY(loaded.ok());
    std::string error;
    const auto info = studio::read_model_info(vocabModel_.toStdString(), error);
    QVERIFY2(info, error.c_str());
    studio::EstimateOptions opt;
    opt.nproc_per_node = nproc;
    opt.cpu = true;
    const auto est = studio::estimate_memory(loaded.config, *info, opt);
    const double estimated = est.bytes.total() / (1024.0 * 1024.0);
    // What the process holds as the kernel counts it (rank 0's VmHWM): the estimate plus the
    // process's own memory, which the estimate gives apart (kProcessHostBytes).
    const double rss = steps.back()["peak_rss_mib"].toDouble();
    const double withProcess = estimated + est.process_host_bytes / (1024.0 * 1024.0);
    QVERIFY2(rss <= withProcess * 1.1 && rss >= withProcess * 0.6,
             qPrintable(
                 QString("rank 0: peak RSS %1 MiB, estimate %2 MiB + the process's own %3 MiB (%4)")
                     .arg(rss)
                     .arg(estimated)
                     .arg(withProcess - estimated)
                     .arg(rss / withProcess)));
    // The second step: the first one's peak also holds the loading of the model.
    for (const auto& g : steps.back()["gpus"].toArray()) {
      const QJsonObject o = g.toObject();
      const double peak = o["peak_mib"].toDouble();
      QVERIFY2(peak <= estimated * 1.05 && peak >= estimated * 0.8,
               qPrintable(QString("rank %1: measured peak %2 MiB, estimated %3 MiB (%4)")
                              .arg(o["rank"].toInt())
                              .arg(peak)
                              .arg(estimated)
                              .arg(peak / estimated)));
    }
  }

  void modelStatesAreTheEstimate_data() {
    QTest::addColumn<QStringList>("keys");
    QTest::addColumn<int>("nproc");
    QTest::newRow("stage 0") << QStringList{"zero_stage: 0"} << 4;
    QTest::newRow("stage 1") << QStringList{"zero_stage: 1"} << 4;
    QTest::newRow("stage 2") << QStringList{"zero_stage: 2"} << 4;
    QTest::newRow("stage 3") << QStringList{"zero_stage: 3"} << 4;
    QTest::newRow("stage 3 on 2") << QStringList{"zero_stage: 3"} << 2;
    QTest::newRow("stage 2 offload")
        << QStringList{"zero_stage: 2", "offload_optimizer: true"} << 4;
    QTest::newRow("stage 3 offload")
        << QStringList{"zero_stage: 3", "offload_optimizer: true", "offload_param: true"} << 4;
    QTest::newRow("stage 3 dpo (sharded reference)")
        << QStringList{"zero_stage: 3", "stage: dpo", "dataset: demo_dpo"} << 4;
    // orpo and simpo build no reference: 16/N B/param as SFT; kto_pair's is sharded like DPO's.
    QTest::newRow("stage 3 dpo orpo (no reference)")
        << QStringList{"zero_stage: 3", "stage: dpo", "dataset: demo_dpo", "pref_loss: orpo"} << 4;
    QTest::newRow("stage 1 dpo simpo (no reference)")
        << QStringList{"zero_stage: 1", "stage: dpo", "dataset: demo_dpo", "pref_loss: simpo"} << 2;
    QTest::newRow("stage 3 dpo kto_pair (sharded reference)")
        << QStringList{"zero_stage: 3", "stage: dpo", "dataset: demo_dpo", "pref_loss: kto_pair"}
        << 4;
    QTest::newRow("stage 3 pt") << QStringList{"zero_stage: 3", "stage: pt", "dataset: demo_pt"}
                                << 4;
    QTest::newRow("stage 3 ASFT (sharded reference)")
        << QStringList{"zero_stage: 3", "use_asft_loss: true"} << 4;
    QTest::newRow("stage 1 ASFT (whole reference)")
        << QStringList{"zero_stage: 1", "use_asft_loss: true"} << 2;
    QTest::newRow("stage 1 bf16") << QStringList{"zero_stage: 1", "bf16: true"} << 4;
    QTest::newRow("stage 3 bf16") << QStringList{"zero_stage: 3", "bf16: true"} << 4;
    // finetuning_type lora / freeze (docs/ADAPTERS.md): gradients, masters and AdamW states for
    // the trained weights only; the frozen base whole below stage 3, in pieces at stage 3; a
    // LoRA DPO's reference is the base with the adapters off (nothing more).
    const QStringList lora{"finetuning_type: lora", "lora_rank: 4", "lora_target: all"};
    QTest::newRow("stage 0 lora") << lora + QStringList{"zero_stage: 0"} << 2;
    QTest::newRow("stage 2 lora bf16") << lora + QStringList{"zero_stage: 2", "bf16: true"} << 4;
    QTest::newRow("stage 3 lora") << lora + QStringList{"zero_stage: 3"} << 4;
    QTest::newRow("stage 3 lora offload")
        << lora + QStringList{"zero_stage: 3", "offload_optimizer: true", "offload_param: true"}
        << 4;
    QTest::newRow("stage 3 dpo lora (base reference)")
        << lora + QStringList{"zero_stage: 3", "stage: dpo", "dataset: demo_dpo"} << 4;
    QTest::newRow("stage 1 dpo lora, additional_target norm (a copy as reference)")
        << lora + QStringList{"zero_stage: 1", "stage: dpo", "dataset: demo_dpo",
                              "additional_target: norm"}
        << 2;
    // QLoRA: the decoder's linear weights in 4 bits, whole on every rank.
    QTest::newRow("stage 2 qlora nf4")
        << lora + QStringList{"zero_stage: 2", "quantization_bit: 4"} << 2;
    QTest::newRow("stage 0 qlora fp4, no double quantization, dpo")
        << lora + QStringList{"zero_stage: 0",
                              "quantization_bit: 4",
                              "quantization_type: fp4",
                              "double_quantization: false",
                              "stage: dpo",
                              "dataset: demo_dpo"}
        << 2;
    // A base bitsandbytes saved in 4 bits (NF4, double quantization; @bnb: made on first use
    // by transformers, tests/reference/bnb_quantize_model.py): its stored bytes, counted as the
    // on-the-fly ones.
    QTest::newRow("stage 1 lora on a base quantized on disk")
        << lora + QStringList{"zero_stage: 1", "model_name_or_path: @bnb"} << 2;
    QTest::newRow("stage 2 freeze")
        << QStringList{"zero_stage: 2", "finetuning_type: freeze", "freeze_trainable_layers: 1"}
        << 4;
    QTest::newRow("stage 3 freeze, embeddings too")
        << QStringList{"zero_stage: 3", "finetuning_type: freeze", "freeze_trainable_layers: -1",
                       "freeze_extra_modules: embed_tokens"}
        << 2;
  }

  void modelStatesAreTheEstimate() {
    QFETCH(QStringList, keys);
    QFETCH(int, nproc);
    for (QString& k : keys)
      if (k.contains("@bnb")) k.replace("@bnb", bnb_model());
    const QString name = QString("mem-%1")
                             .arg(QTest::currentDataTag())
                             .replace(QRegularExpression("[^A-Za-z0-9]+"), "-");
    const QStringList all = keys + QStringList{"max_steps: 1"};
    const QString out = train(name, all, nproc);
    QVERIFY(!out.isEmpty());
    const auto steps = events(out, "step");
    QVERIFY(!steps.empty());
    const QJsonArray gpus = steps.front()["gpus"].toArray();
    QCOMPARE(gpus.size(), nproc);

    const auto loaded = studio::load_config_file(dir_.filePath(name + ".yaml").toStdString());
    QVERIFY(loaded.ok());
    studio::EstimateOptions opt;
    opt.nproc_per_node = nproc;
    std::string info_error;
    const auto info = studio::read_model_info(loaded.config.model_name_or_path, info_error);
    QVERIFY2(info, info_error.c_str());
    const auto est = studio::estimate_memory(loaded.config, *info, opt);
    const double expected_mib = (est.model_state_bytes + est.offloaded_bytes) / (1024.0 * 1024.0);
    const double params = double(model_info().parameter_count());
    for (const auto& g : gpus) {
      const QJsonObject o = g.toObject();
      QCOMPARE(o["device"].toInt(), -1);  // a CPU run reports its host memory per rank
      const double measured = o["model_states_mib"].toDouble();
      const double offloaded = o["offloaded_mib"].toDouble();
      QVERIFY2(std::abs(measured - expected_mib) <= 0.05 * expected_mib,
               qPrintable(QString("rank %1: measured %2 MiB, estimated %3 MiB")
                              .arg(o["rank"].toInt())
                              .arg(measured)
                              .arg(expected_mib)));
      const bool reference = (keys.contains("stage: dpo") && !keys.contains("pref_loss: orpo") &&
                              !keys.contains("pref_loss: simpo")) ||
                             keys.contains("use_asft_loss: true");
      const bool adapters = keys.join('\n').contains("finetuning_type");
      if (keys.contains("zero_stage: 3") && !reference && !adapters) {
        const double ideal = 16.0 * params / nproc / (1024.0 * 1024.0);
        QVERIFY2(std::abs(measured - ideal) <= 0.02 * ideal,
                 qPrintable(QString("rank %1: %2 MiB, 16/N B/param is %3 MiB")
                                .arg(o["rank"].toInt())
                                .arg(measured)
                                .arg(ideal)));
      }
      if (keys.contains("offload_param: true"))
        QVERIFY2(measured - offloaded <= 0.02 * measured,
                 qPrintable(QString("rank %1: %2 MiB on the device side")
                                .arg(o["rank"].toInt())
                                .arg(measured - offloaded)));
      else if (!keys.contains("offload_optimizer: true"))
        QCOMPARE(offloaded, 0.0);
    }
  }

  // A stage 3 run stopped at its checkpoint and resumed (on the same world, and on twice the
  // ranks: the optimizer files re-cut) continues exactly as the uninterrupted run.
  void resumeUnderStage3_data() {
    QTest::addColumn<int>("resume_nproc");
    QTest::addColumn<QString>("resume_sp");
    QTest::newRow("same world") << 2 << "sequence_parallel_size: 2";
    QTest::newRow("four ranks (sp 4)") << 4 << "sequence_parallel_size: 4";
  }

  void resumeUnderStage3() {
    QFETCH(int, resume_nproc);
    QFETCH(QString, resume_sp);
    // The uninterrupted run writes checkpoint-3 on its way; the resumed run starts from it.
    const QStringList base{"zero_stage: 3", "sequence_parallel_size: 2", "save_steps: 3"};
    const QString whole = reference_.count("resume-whole") ? reference_["resume-whole"]
                                                           : train("resume-whole", base, 2);
    reference_["resume-whole"] = whole;
    QVERIFY(!whole.isEmpty());
    const QString ckpt = whole + "/checkpoint-3";
    QVERIFY(QFile::exists(ckpt + "/model.safetensors"));
    QVERIFY(QFile::exists(ckpt + "/optimizer-00000-of-00002.safetensors"));
    QVERIFY(QFile::exists(ckpt + "/optimizer-00001-of-00002.safetensors"));
    QString err;
    const QString resumed =
        train("resume-" + QString::number(resume_nproc),
              QStringList{"zero_stage: 3", resume_sp, "resume_from_checkpoint: " + ckpt},
              resume_nproc, &err);
    QVERIFY(!resumed.isEmpty());
    QVERIFY2(err.contains("resuming from"), qPrintable(err));
    expect_continues(whole, resumed);
  }

  // A LoRA run stopped at its checkpoint (the adapter and its AdamW states) and resumed, under
  // ZeRO-3 over SP 2, continues exactly as the uninterrupted run; the base comes from
  // model_name_or_path.
  void resumeLora() {
    const QStringList base{"finetuning_type: lora", "lora_rank: 4",  "lora_target: all",
                           "use_dora: true",        "zero_stage: 3", "sequence_parallel_size: 2",
                           "save_steps: 3"};
    const QString whole = train("lora-whole", base, 2);
    QVERIFY(!whole.isEmpty());
    const QString ckpt = whole + "/checkpoint-3";
    QVERIFY(QFile::exists(ckpt + "/adapter_model.safetensors"));
    QVERIFY(!QFile::exists(ckpt + "/model.safetensors"));
    QVERIFY(QFile::exists(ckpt + "/optimizer-00001-of-00002.safetensors"));
    QString err;
    const QString resumed =
        train("lora-resumed", base + QStringList{"resume_from_checkpoint: " + ckpt}, 2, &err);
    QVERIFY(!resumed.isEmpty());
    QVERIFY2(err.contains("resuming from"), qPrintable(err));
    expect_continues(whole, resumed);
  }

  // A checkpoint missing a rank's optimizer file is refused by name, not half-loaded.
  void resumeRefusesMissingOptimizerPiece() {
    const QString first =
        train("piece-first", {"zero_stage: 2", "save_steps: 2", "max_steps: 2"}, 2);
    QVERIFY(!first.isEmpty());
    const QString ckpt = first + "/checkpoint-2";
    QVERIFY(QFile::remove(ckpt + "/optimizer-00001-of-00002.safetensors"));
    const QString cfg =
        write_config("piece-second", {"zero_stage: 2", "resume_from_checkpoint: " + ckpt});
    const Run r = run({"train", cfg, "--nproc", "2"});
    QVERIFY(r.code != 0);
    QVERIFY2(r.err.contains("optimizer-00001-of-00002.safetensors is missing"), qPrintable(r.err));
  }

  // The stage 3 model as saved (gathered tensor by tensor) loads in transformers, whose logits
  // are those of the unsharded run's model.
  void savedModelLoadsInTransformers() {
    const QStringList keys{"sequence_parallel_size: 2"};
    const QString ref = reference(keys, 2);
    const QString z3 =
        train("hf-z3", keys + QStringList{"zero_stage: 3", "offload_param: true"}, 2);
    QVERIFY(!ref.isEmpty() && !z3.isEmpty());
    // transformers' logits of both folders, in one start of Python.
    QProcess p;
    p.start(QStringLiteral(STUDIO_PYTHON),
            {kSource + "/tests/reference/hf_logits.py", ref, z3, "4256,11,42,977,3001,8,4258"});
    // (Without torch and transformers it says so, and that scripts/setup.sh installs them.)
    QVERIFY(p.waitForFinished(300000));
    QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
    const QList<QByteArray> lines = p.readAllStandardOutput().split('\n');
    auto logits = [&](int i) {
      return i < lines.size() ? QJsonDocument::fromJson(lines[i]).object()["logits"].toArray() : QJsonArray();
    };
    const QJsonArray a = logits(0), b = logits(1);
    QVERIFY(!a.isEmpty());
    QCOMPARE(a.size(), b.size());
    double worst = 0;
    for (int i = 0; i < a.size(); ++i) {
      const QJsonArray ra = a[i].toArray(), rb = b[i].toArray();
      for (int j = 0; j < ra.size(); ++j)
        worst = std::max(worst, std::abs(ra[j].toDouble() - rb[j].toDouble()));
    }
    QVERIFY2(worst <= 1e-4, qPrintable(QString("logits differ by %1").arg(worst)));
  }
};

QTEST_GUILESS_MAIN(TestZero)
#include "tst_zero.moc"
