// Sequence parallelism, end to end and exact: `studio-train train --nproc N` (real worker
// processes, real Gloo) on a tiny GQA model (4 query heads, 2 key/value heads) in fp32 must give
// the per-step losses of the single-process run (relative difference <= 1e-5 over 20 steps) and
// the same parameters after the 20 steps (max relative error <= 1e-4), for SFT and DPO, in every SP
// mode and with dp x sp. Also the failure paths users hit: heads that Ulysses cannot split, a
// killed rank, a hung rank.
#include <QtTest/QtTest>

#include <QRandomGenerator>

#include <signal.h>
#include <sys/types.h>

#include <cmath>
#include <map>

#include "train_runs.h"

namespace {

const QString kExe = QStringLiteral(STUDIO_TRAIN_EXE);
const QString kSource = QStringLiteral(STUDIO_SOURCE_DIR);
using train_runs::events;
using train_runs::step_losses;
using train_runs::sp_keys;
using train_runs::max_relative_param_error;
using train_runs::Run;
using train_runs::run;
using train_runs::read_json;


// (step, loss) of every event of `kind` ("step" or "eval").
std::vector<std::pair<int, double>> losses_by_step(const QString& dir, const QString& kind) {
  std::vector<std::pair<int, double>> out;
  for (const auto& e : events(dir))
    if (e["event"].toString() == kind)
      out.emplace_back(e["step"].toInt(), e["loss"].isNull() ? std::nan("") : e["loss"].toDouble());
  return out;
}

// The launcher's child whose environment says RANK=`rank` (0 when there is none).
pid_t worker_pid(qint64 launcher, int rank) {
  const QByteArray wanted = "RANK=" + QByteArray::number(rank);
  for (const QString& entry : QDir("/proc").entryList(QDir::Dirs)) {
    QFile stat("/proc/" + entry + "/stat");
    if (!stat.open(QIODevice::ReadOnly)) continue;
    const QList<QByteArray> fields = stat.readAll().split(' ');
    if (fields.size() < 4 || fields[3].toLongLong() != launcher) continue;
    QFile env("/proc/" + entry + "/environ");
    if (env.open(QIODevice::ReadOnly) && env.readAll().split('\0').contains(wanted))
      return static_cast<pid_t>(entry.toLongLong());
  }
  return 0;
}

}  // namespace

class TestSpEquivalence : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString model_;
  std::map<QString, QString> reference_;  // (stage, cutoff, steps) -> SP=1 output dir
  QString last_err_;                       // the last train()'s stderr

  // A tiny model with the demo tokenizer: `heads` query heads, `kv` key/value heads.
  QString make_model(const QString& name, int heads, int kv) {
    train_runs::TinyModel m;
    m.name = name;
    m.hidden = 8 * heads;
    m.heads = heads;
    m.kv_heads = kv;
    m.tied = true;
    m.seed = 3;
    return train_runs::make_tiny_model(dir_.path(), m);
  }

  // A run config; `extra` lines ("key: value") override or add keys. `data` picks the
  // dataset: "demo" (resources/demo/data), "long" (long prompts, answers of 1-3 words: prompts
  // longer than cutoff_len, so most SP ranks hold no target), "long-empty" (the same with the
  // `empty` template, where every third answer is empty: whole micro-batches without targets).
  QString write_config(const QString& name, const QString& model, const QString& stage,
                       int cutoff, const QStringList& extra, const QString& data = "demo") {
    const QString path = dir_.filePath(name + ".yaml");
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly)) return {};
    const bool demo = data == "demo";
    QStringList lines{
        "model_name_or_path: " + model, "stage: " + stage, "do_train: true",
        "finetuning_type: full",
        QString("dataset: ") + (stage == "dpo" ? (demo ? "demo_dpo" : "long_dpo")
                                               : (demo ? "demo_sft" : data == "long" ? "long_sft" : "long_empty")),
        "dataset_dir: " + (demo ? kSource + "/resources/demo/data" : dir_.filePath("data")),
        QString("template: ") + (data == "long-empty" ? "empty" : "qwen"),
        QStringLiteral("cutoff_len: %1").arg(cutoff), "max_samples: 48",
        "output_dir: " + dir_.filePath(name + "-out"), "overwrite_output_dir: true",
        "logging_steps: 1", "save_steps: 100000", "learning_rate: 1.0e-3",
        "lr_scheduler_type: cosine", "warmup_steps: 0", "weight_decay: 0.01", "max_grad_norm: 1.0",
        "gradient_accumulation_steps: 2", "eval_strategy: 'no'", "seed: 11", "pref_beta: 0.1",
        // Adam divides by sqrt(v) + eps: with the usual 1e-8 it turns the ~1e-9 rounding noise of
        // gradient components that are exactly 0 in exact arithmetic (k_proj.bias: softmax
        // ignores a per-row shift; DPO at step 1, where policy = reference) into steps of
        // +-lr whose signs depend on the summation order, i.e. on SP. 1e-6 keeps real
        // gradients Adam-scaled and noise negligible, so parameters compare meaningfully.
        "adam_epsilon: 1.0e-6"};
    for (const auto& e : extra) {
      const QString key = e.section(':', 0, 0) + ":";
      bool replaced = false;
      for (auto& l : lines)
        if (l.startsWith(key)) {
          l = e;
          replaced = true;
        }
      if (!replaced) lines << e;
    }
    f.write((lines.join('\n') + '\n').toUtf8());
    return path;
  }

  // The long-prompt datasets (SFT, SFT with empty answers, DPO) in dir_/data.
  bool write_long_data() {
    QDir().mkpath(dir_.filePath("data"));
    static const char* words[] = {"alpha", "river", "stone", "green", "moves", "under",
                                  "seven", "light", "quick", "table", "north", "sings"};
    QJsonArray sft, empty, dpo;
    for (int i = 0; i < 48; ++i) {
      QStringList prompt;
      const int n = 20 + (i * 37) % 70;  // 20..89 words: most prompts exceed cutoff_len
      for (int w = 0; w < n; ++w) prompt << words[(i * 7 + w * 5) % 12];
      QStringList answer;
      for (int w = 0; w <= i % 3; ++w) answer << words[(i + w * 3) % 12];
      sft.append(QJsonObject{{"instruction", prompt.join(' ')}, {"input", ""}, {"output", answer.join(' ')}});
      empty.append(QJsonObject{{"instruction", prompt.join(' ')}, {"input", ""},
                               {"output", i % 3 == 0 ? QString() : answer.join(' ')}});
      dpo.append(QJsonObject{{"instruction", prompt.join(' ')}, {"input", ""},
                             {"chosen", answer.join(' ')}, {"rejected", words[(i + 5) % 12]}});
    }
    auto write = [&](const QString& file, const QJsonDocument& doc) {
      QFile f(dir_.filePath("data/" + file));
      return f.open(QIODevice::WriteOnly) && f.write(doc.toJson()) > 0;
    };
    QJsonObject info{{"long_sft", QJsonObject{{"file_name", "long_sft.json"}}},
                     {"long_empty", QJsonObject{{"file_name", "long_empty.json"}}},
                     {"long_dpo", QJsonObject{{"file_name", "long_dpo.json"}, {"ranking", true},
                                              {"columns", QJsonObject{{"prompt", "instruction"},
                                                                      {"query", "input"},
                                                                      {"chosen", "chosen"},
                                                                      {"rejected", "rejected"}}}}}};
    return write("long_sft.json", QJsonDocument(sft)) && write("long_empty.json", QJsonDocument(empty)) &&
           write("long_dpo.json", QJsonDocument(dpo)) && write("dataset_info.json", QJsonDocument(info));
  }

  // Trains `steps` steps; returns the output folder ("" and a failure on error).
  QString train(const QString& name, const QString& stage, int cutoff, int nproc, int steps,
                const QStringList& extra, const QString& data = "demo") {
    QStringList keys = extra;
    keys << QStringLiteral("max_steps: %1").arg(steps);
    const QString cfg = write_config(name, model_, stage, cutoff, keys, data);
    const Run r = run({"train", cfg, "--nproc", QString::number(nproc)});
    last_err_ = r.err;
    if (r.code != 0) {
      qWarning().noquote() << r.err.right(3000);
      return {};
    }
    return dir_.filePath(name + "-out");
  }

  // Starts an endless SP=2 run over 2 workers and returns once it has logged 2 steps.
  bool start_long_run(QProcess& p, const QString& cfg, const QString& out) {
    p.start(kExe, {"train", cfg, "--nproc", "2"});
    if (!p.waitForStarted()) return false;
    QElapsedTimer t;
    t.start();
    while (step_losses(out).size() < 2) {
      if (t.elapsed() > 120000 || p.state() == QProcess::NotRunning) return false;
      QTest::qWait(100);
    }
    return true;
  }

  // The single-process run the SP runs are compared with (`extra`: keys that change the
  // training itself, such as pref_loss, which the SP run uses too).
  QString reference(const QString& stage, int cutoff, int steps, const QString& data = "demo",
                    const QStringList& extra = {}) {
    const QString key = QStringLiteral("%1-%2-%3-%4-%5-%6").arg(QFileInfo(model_).fileName())
                            .arg(stage).arg(cutoff).arg(steps).arg(data)
                            .arg(QString::number(qHash(extra.join('|')), 16));
    QStringList keys = extra;
    keys << "per_device_train_batch_size: 2";
    if (cutoff < 8) keys << "train_on_prompt: true";
    if (!reference_.count(key)) reference_[key] = train("ref-" + key, stage, cutoff, 1, steps, keys, data);
    return reference_[key];
  }

  // Per-step losses of `got` equal `ref`'s (relative 1e-5; a step without any target is NaN in
  // both), and the loss moved.
  void compare_losses(const QString& ref, const QString& got, size_t steps) {
    const auto a = step_losses(ref), b = step_losses(got);
    QCOMPARE(a.size(), steps);
    QCOMPARE(b.size(), a.size());
    double worst = 0;
    QString table;  // step: reference, got (in the failure message)
    for (size_t i = 0; i < a.size(); ++i) {
      table += QStringLiteral("\n  step %1: %2 %3").arg(i + 1).arg(a[i], 0, 'g', 9).arg(b[i], 0, 'g', 9);
      if (std::isnan(a[i])) {
        QVERIFY2(std::isnan(b[i]), qPrintable(QStringLiteral("step %1: %2, expected NaN").arg(i + 1).arg(b[i])));
        continue;
      }
      QVERIFY2(std::isfinite(b[i]), qPrintable(QStringLiteral("step %1 loss %2").arg(i + 1).arg(b[i])));
      worst = std::max(worst, std::abs(a[i] - b[i]) / std::abs(a[i]));
    }
    QVERIFY2(worst <= 1e-5,
             qPrintable(QStringLiteral("max relative loss difference %1:").arg(worst) + table));
    QVERIFY2(a.front() != a.back(), "the loss did not move: the comparison would prove nothing");
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    QVERIFY(write_long_data());
    model_ = make_model("tiny-gqa", 4, 2);
    QVERIFY2(!model_.isEmpty(), "init-model failed");
  }

  void matchesSingleProcess_data() {
    QTest::addColumn<QString>("stage");
    QTest::addColumn<QString>("mode");
    QTest::addColumn<int>("nproc");
    QTest::addColumn<int>("sp");
    QTest::addColumn<int>("cutoff");
    QTest::addColumn<QString>("data");
    QTest::addColumn<QString>("packing");  // "", "packing" or "neat_packing"
    for (const QString stage : {"sft", "dpo"}) {
      const QByteArray s = stage.toUtf8();
      QTest::newRow(s + " zigzag sp2") << stage << "zigzag-ring" << 2 << 2 << 64 << "demo" << "";
      QTest::newRow(s + " zigzag sp4") << stage << "zigzag-ring" << 4 << 4 << 64 << "demo" << "";
      QTest::newRow(s + " ulysses sp2") << stage << "ulysses" << 2 << 2 << 64 << "demo" << "";
      // 2 key/value heads, 4 ranks: each K/V head is replicated to two ranks.
      QTest::newRow(s + " ulysses sp4 (kv heads < sp)") << stage << "ulysses" << 4 << 4 << 64 << "demo" << "";
      QTest::newRow(s + " usp 2x2") << stage << "usp" << 4 << 4 << 64 << "demo" << "";
      QTest::newRow(s + " dp2 x zigzag sp2") << stage << "zigzag-ring" << 4 << 2 << 64 << "demo" << "";
      // Activation checkpointing recomputes each layer, ring included, inside the backward.
      QTest::newRow(s + " usp 2x2, gradient checkpointing") << stage << "usp" << 4 << 4 << 64 << "demo" << "";
      // Every long-sequence option at once: the fused loss (always), activations offloaded,
      // the MLP tiled, and the model states sharded by ZeRO-3 with both offloads.
      QTest::newRow(s + " zigzag sp4, long-context options") << stage << "zigzag-ring" << 4 << 4 << 64 << "demo" << "";
      // Long prompts, answers of 1-3 words, prompts longer than cutoff_len (truncated): the
      // targets sit at the end of each sequence, so under zigzag sp2 rank 1 (middle chunks)
      // holds none, under ulysses sp4 only rank 3 holds any (no targets on all but one rank),
      // and under dp2 x sp2 it differs per DP group. Gradient accumulation 2 throughout.
      QTest::newRow(s + " long prompts, zigzag sp2") << stage << "zigzag-ring" << 2 << 2 << 48 << "long" << "";
      QTest::newRow(s + " long prompts, ulysses sp4") << stage << "ulysses" << 4 << 4 << 48 << "long" << "";
      QTest::newRow(s + " long prompts, usp 2x2") << stage << "usp" << 4 << 4 << 48 << "long" << "";
      QTest::newRow(s + " long prompts, dp2 x zigzag sp2") << stage << "zigzag-ring" << 4 << 2 << 48 << "long" << "";
    }
    // Every third answer empty (`empty` template: no eos is learned), so some micro-batches
    // hold no target on any rank (and a step may hold none at all: NaN loss on every run).
    QTest::newRow("sft empty answers, zigzag sp2") << "sft" << "zigzag-ring" << 2 << 2 << 48 << "long-empty" << "";
    QTest::newRow("sft empty answers, usp 2x2") << "sft" << "usp" << 4 << 4 << 48 << "long-empty" << "";
    QTest::newRow("sft empty answers, dp2 x ulysses sp2") << "sft" << "ulysses" << 4 << 2 << 48 << "long-empty" << "";
    // Sequences of 3 tokens (train_on_prompt, so 2 targets each) over 4 ranks: shorter than
    // 2*sp, and under zigzag rank 3's chunks (positions 3 and 4 of 8) are all padding, under
    // ulysses rank 3's (position 3 of 4): it must contribute 0, never NaN, and still take part
    // in the ring / all-to-all of the forward and the backward.
    QTest::newRow("sft zigzag sp4, 3-token sequences") << "sft" << "zigzag-ring" << 4 << 4 << 3 << "demo" << "";
    QTest::newRow("sft ulysses sp4, 3-token sequences") << "sft" << "ulysses" << 4 << 4 << 3 << "demo" << "";
    // Packing (LLaMA-Factory's greedy knapsack into cutoff_len - 1 tokens; positions restart
    // per sample) and neat packing (attention isolated per sample too), the ring masking by
    // sample in every block: the same losses and parameters as one process packing the same way.
    for (const QString packing : {"packing", "neat_packing"}) {
      const QByteArray p = packing.toUtf8();
      QTest::newRow(p + ", zigzag sp2") << "sft" << "zigzag-ring" << 2 << 2 << 256 << "demo" << packing;
      QTest::newRow(p + ", ulysses sp2") << "sft" << "ulysses" << 2 << 2 << 256 << "demo" << packing;
      QTest::newRow(p + ", usp 2x2") << "sft" << "usp" << 4 << 4 << 256 << "demo" << packing;
      QTest::newRow(p + ", dp2 x zigzag sp2") << "sft" << "zigzag-ring" << 4 << 2 << 256 << "demo" << packing;
    }
    QTest::newRow("neat_packing, long prompts, zigzag sp4") << "sft" << "zigzag-ring" << 4 << 4 << 512 << "long" << "neat_packing";
    // LLaMA-Factory's DFT loss (use_dft_loss), weighted per token: in both runs.
    QTest::newRow("sft DFT loss, dp2 x zigzag sp2") << "sft" << "zigzag-ring" << 4 << 2 << 48 << "long" << "";
    QTest::newRow("sft EAFT loss, usp 2x2") << "sft" << "usp" << 4 << 4 << 48 << "long" << "";
    // ASFT (use_asft_loss): the DFT loss plus the KL to a frozen reference that runs on every
    // micro-batch, sharded and gathered under ZeRO-3 after the policy's forward.
    QTest::newRow("sft ASFT loss, ZeRO-3, dp2 x zigzag sp2") << "sft" << "zigzag-ring" << 4 << 2 << 48 << "long" << "";
    // DPO packs each micro-batch's sequences (always isolated): the reference is one process
    // WITHOUT packing, the same losses and parameters.
    QTest::newRow("dpo packing, one process") << "dpo" << "zigzag-ring" << 1 << 1 << 160 << "demo" << "packing";
    QTest::newRow("dpo neat_packing, zigzag sp2") << "dpo" << "zigzag-ring" << 2 << 2 << 160 << "demo" << "neat_packing";
    QTest::newRow("dpo packing, usp 2x2") << "dpo" << "usp" << 4 << 4 << 160 << "demo" << "packing";
    QTest::newRow("dpo packing, dp2 x ulysses sp2") << "dpo" << "ulysses" << 4 << 2 << 256 << "demo" << "packing";
    // finetuning_type lora (docs/ADAPTERS.md): only the adapters train, only their gradients are
    // reduced; at ZeRO-3 the frozen base is sharded too. DPO's reference is the base with the
    // adapters off (no second model). freeze: the last layer only.
    QTest::newRow("sft lora, zigzag sp2") << "sft" << "zigzag-ring" << 2 << 2 << 64 << "demo" << "";
    QTest::newRow("sft lora, ulysses sp4 (kv heads < sp)") << "sft" << "ulysses" << 4 << 4 << 64 << "demo" << "";
    QTest::newRow("sft DoRA lora, usp 2x2") << "sft" << "usp" << 4 << 4 << 64 << "demo" << "";
    QTest::newRow("sft lora, ZeRO-3, dp2 x zigzag sp2") << "sft" << "zigzag-ring" << 4 << 2 << 48 << "long" << "";
    QTest::newRow("dpo lora, usp 2x2") << "dpo" << "usp" << 4 << 4 << 64 << "demo" << "";
    QTest::newRow("dpo lora, ZeRO-3, dp2 x ulysses sp2") << "dpo" << "ulysses" << 4 << 2 << 64 << "demo" << "";
    QTest::newRow("sft freeze, ZeRO-2, zigzag sp2") << "sft" << "zigzag-ring" << 2 << 2 << 64 << "demo" << "";
    // QLoRA: the base in NF4 (double quantization), the same bytes on every rank.
    QTest::newRow("sft qlora lora, usp 2x2") << "sft" << "usp" << 4 << 4 << 64 << "demo" << "";
    QTest::newRow("dpo qlora lora, dp2 x zigzag sp2") << "dpo" << "zigzag-ring" << 4 << 2 << 64 << "demo" << "";
    // A base bitsandbytes saved in 4 bits (transformers' save_pretrained): its stored bytes.
    QTest::newRow("sft lora on a bnb-4bit folder, ulysses sp2") << "sft" << "ulysses" << 2 << 2 << 64 << "demo" << "";
  }

  void matchesSingleProcess() {
    QFETCH(QString, stage);
    QFETCH(QString, mode);
    QFETCH(int, nproc);
    QFETCH(int, sp);
    QFETCH(int, cutoff);
    QFETCH(QString, data);
    QFETCH(QString, packing);
    QStringList packed = packing.isEmpty() ? QStringList() : QStringList{packing + ": true"};
    if (QByteArray(QTest::currentDataTag()).contains("DFT")) packed << "use_dft_loss: true";
    if (QByteArray(QTest::currentDataTag()).contains("EAFT"))
      packed << "use_eaft_loss: true" << "eaft_alpha: 0.5";
    if (QByteArray(QTest::currentDataTag()).contains("ASFT"))
      packed << "use_asft_loss: true" << "asft_alpha: 0.5";
    // What is trained: the same in the single-process run.
    QStringList method;
    const bool lora = QByteArray(QTest::currentDataTag()).contains("lora");
    if (lora)
      method << "finetuning_type: lora" << "lora_rank: 4" << "lora_alpha: 8" << "lora_target: all";
    if (QByteArray(QTest::currentDataTag()).contains("DoRA")) method << "use_dora: true";
    if (QByteArray(QTest::currentDataTag()).contains("qlora")) method << "quantization_bit: 4";
    if (QByteArray(QTest::currentDataTag()).contains("bnb-4bit folder")) {
      QString error;
      const QString bnb = train_runs::bnb_4bit_copy(model_, dir_.filePath("bnb-4bit"), &error);
      QVERIFY2(!bnb.isEmpty(), qPrintable(error));
      method << "model_name_or_path: " + bnb;
    }
    if (QByteArray(QTest::currentDataTag()).contains("freeze"))
      method << "finetuning_type: freeze" << "freeze_trainable_layers: 1";
    if (QByteArray(QTest::currentDataTag()).contains("ZeRO-2")) packed << "zero_stage: 2";
    packed << method;
    QStringList keys = sp_keys(mode, nproc, sp);
    if (cutoff < 8) keys << "train_on_prompt: true";
    keys << packed;
    if (QByteArray(QTest::currentDataTag()).contains("checkpointing"))
      keys << "gradient_checkpointing: true";
    if (QByteArray(QTest::currentDataTag()).contains("ZeRO-3")) keys << "zero_stage: 3";
    if (QByteArray(QTest::currentDataTag()).contains("long-context options"))
      keys << "gradient_checkpointing: true" << "offload_activations: true" << "tiled_mlp: true"
           << "zero_stage: 3" << "offload_optimizer: true" << "offload_param: true";
    const QString name = QString::fromUtf8(QTest::currentDataTag()).replace(' ', '_')
                             .remove('(').remove(')').remove(',');

    const QStringList ref_keys = stage == "dpo" ? method : packed;
    const QString ref = reference(stage, cutoff, 20, data, ref_keys);
    QVERIFY(!ref.isEmpty());
    const QString got = train(name, stage, cutoff, nproc, 20, keys, data);
    QVERIFY(!got.isEmpty());
    compare_losses(ref, got, 20);
    if (stage == "sft" && !packing.isEmpty()) {
      // "studio-train: packing: 48 training samples in 20 sequences of at most 95 tokens"
      const auto m = QRegularExpression("packing: (\\d+) training samples in (\\d+) sequences")
                         .match(last_err_);
      QVERIFY2(m.hasMatch() && m.captured(2).toInt() < m.captured(1).toInt(),
               qPrintable("packing shared no sequence: " + last_err_.right(1500)));
    }
    if (stage == "dpo" && !packing.isEmpty()) {
      // Packing did share rows (or the comparison with the unpacked run would prove nothing).
      bool shared = false;
      const QRegularExpression re("dpo packing: (\\d+) sequences in (\\d+) rows");
      for (const auto& e : events(got)) {
        const auto m = re.match(e["message"].toString());
        if (m.hasMatch()) shared = m.captured(2).toInt() < m.captured(1).toInt();
      }
      QVERIFY2(shared, "no micro-batch packed two sequences into one row");
    }

    // The parameters after the 20 steps. This is stronger than comparing after one step, which
    // an earlier version did in two more runs: Adam's first update is lr * g / |g| per element,
    // the gradients' signs only, while 20 updates carry their magnitudes through m / sqrt(v).
    const double err = max_relative_param_error(ref, got);
    QVERIFY2(err <= 1e-4, qPrintable(QStringLiteral("max relative parameter error %1").arg(err)));
    // ... and training did change them, or the comparison would prove nothing (an adapter
    // starts with B = 0).
    if (lora)
      QVERIFY(train_runs::adapter_b_max(ref) > 0);
    else
      QVERIFY(max_relative_param_error(model_, ref) > 1e-6);
  }

  // LLaMA-Factory v1's dynamic batching: micro-batches filled to per_device_train_batch_size x
  // cutoff_len tokens (padded, or packed into one isolated row), under SP and dealt over DP.
  // dp 2 with accumulation 1 trains each step on the two micro-batches the single process
  // accumulates (2), so the losses match step by step within the first epoch.
  void dynamicBatchingMatchesSingleProcess_data() {
    QTest::addColumn<QString>("strategy");
    QTest::addColumn<QString>("mode");
    QTest::addColumn<int>("nproc");
    QTest::addColumn<int>("sp");
    QTest::newRow("dynamic_batching, zigzag sp2") << "dynamic_batching" << "zigzag-ring" << 2 << 2;
    QTest::newRow("dynamic_padding_free, ulysses sp2") << "dynamic_padding_free" << "ulysses" << 2 << 2;
    QTest::newRow("dynamic_batching, dp2 x zigzag sp2") << "dynamic_batching" << "zigzag-ring" << 4 << 2;
    QTest::newRow("dynamic_padding_free, dp2") << "dynamic_padding_free" << "zigzag-ring" << 2 << 1;
  }

  void dynamicBatchingMatchesSingleProcess() {
    QFETCH(QString, strategy);
    QFETCH(QString, mode);
    QFETCH(int, nproc);
    QFETCH(int, sp);
    const int steps = 5, dp = nproc / sp;
    const QStringList common{"batching_strategy: " + strategy, "per_device_train_batch_size: 2"};
    const QString name = QString("dyn-%1").arg(QTest::currentDataTag()).replace(QRegularExpression("[^A-Za-z0-9]+"), "-");
    const QString ref = train(name + "-ref", "sft", 256, 1, steps, common);
    QVERIFY(!ref.isEmpty());
    QStringList keys = common;
    keys << QStringLiteral("sequence_parallel_size: %1").arg(sp) << "sequence_parallel_mode: " + mode
         << QStringLiteral("gradient_accumulation_steps: %1").arg(2 / dp);
    const QString got = train(name, "sft", 256, nproc, steps, keys);
    QVERIFY(!got.isEmpty());
    compare_losses(ref, got, steps);
    // The micro-batches did take more samples than per_device_train_batch_size (or the runs
    // would be normal batching).
    const QRegularExpression re(strategy + ": (\\d+) samples in (\\d+) micro-batches");
    bool fuller = false;
    QString said;
    for (const auto& e : events(got)) {
      const auto m = re.match(e["message"].toString());
      if (m.hasMatch()) fuller = m.captured(2).toInt() * 2 < m.captured(1).toInt();
      if (e.contains("message")) said += "\n" + e["message"].toString();
    }
    QVERIFY2(fuller, qPrintable("no micro-batch held more than 2 samples:" + said));
  }

  // DPO variants through the whole engine under SP: ipo and pref_ftx normalise by each
  // sequence's GLOBAL target count (summed over the SP group, not a rank's chunk), label
  // smoothing, and precomputed reference log-probs (computed SP-split, then dropped).
  void dpoVariantsMatchSingleProcess_data() {
    QTest::addColumn<QStringList>("variant");
    QTest::addColumn<QString>("mode");
    QTest::addColumn<int>("nproc");
    QTest::addColumn<int>("sp");
    QTest::addColumn<QString>("data");
    const QStringList ipo{"pref_loss: ipo"}, ftx{"pref_ftx: 0.5"},
        pre{"precompute_ref_logps: true"}, smooth{"dpo_label_smoothing: 0.2"};
    QTest::newRow("ipo, zigzag sp2") << ipo << "zigzag-ring" << 2 << 2 << "demo";
    QTest::newRow("ipo, long prompts, ulysses sp4") << ipo << "ulysses" << 4 << 4 << "long";
    QTest::newRow("pref_ftx, usp 2x2") << ftx << "usp" << 4 << 4 << "demo";
    QTest::newRow("pref_ftx, long prompts, zigzag sp2") << ftx << "zigzag-ring" << 2 << 2 << "long";
    QTest::newRow("ipo + pref_ftx, dp2 x zigzag sp2") << (ipo + ftx) << "zigzag-ring" << 4 << 2 << "demo";
    QTest::newRow("label smoothing, zigzag sp2") << smooth << "zigzag-ring" << 2 << 2 << "demo";
    QTest::newRow("precompute_ref_logps, zigzag sp2") << pre << "zigzag-ring" << 2 << 2 << "demo";
    QTest::newRow("precompute_ref_logps, dp2 x ulysses sp2") << pre << "ulysses" << 4 << 2 << "long";
  }
  void dpoVariantsMatchSingleProcess() {
    QFETCH(QStringList, variant);
    QFETCH(QString, mode);
    QFETCH(int, nproc);
    QFETCH(int, sp);
    QFETCH(QString, data);
    const int cutoff = data == "demo" ? 64 : 48;
    const QString ref = reference("dpo", cutoff, 12, data, variant);
    QVERIFY(!ref.isEmpty());
    const QStringList keys = variant + sp_keys(mode, nproc, sp);
    const QString name = QString::fromUtf8(QTest::currentDataTag()).replace(' ', '_')
                             .remove('(').remove(')').remove(',').remove('+');
    const QString got = train("dpov-" + name, "dpo", cutoff, nproc, 12, keys, data);
    QVERIFY(!got.isEmpty());
    compare_losses(ref, got, 12);
  }

  // A run resumed from a checkpoint under SP logs the losses of the uninterrupted run (model,
  // optimizer, schedule and data position restored), for SFT and DPO; and evaluation under SP
  // reports the single-process eval loss.
  void resumeAndEvalUnderSp_data() {
    QTest::addColumn<QString>("stage");
    QTest::addColumn<QString>("mode");
    QTest::addColumn<int>("nproc");
    QTest::addColumn<int>("sp");
    QTest::newRow("sft zigzag sp2") << "sft" << "zigzag-ring" << 2 << 2;
    QTest::newRow("sft usp 2x2") << "sft" << "usp" << 4 << 4;
    QTest::newRow("dpo zigzag sp2") << "dpo" << "zigzag-ring" << 2 << 2;
    QTest::newRow("dpo dp2 x ulysses sp2") << "dpo" << "ulysses" << 4 << 2;
  }
  void resumeAndEvalUnderSp() {
    QFETCH(QString, stage);
    QFETCH(QString, mode);
    QFETCH(int, nproc);
    QFETCH(int, sp);
    const QStringList eval{"val_size: 8", "eval_strategy: steps", "eval_steps: 4",
                           "per_device_eval_batch_size: 2", "save_steps: 6"};
    const QString ref = reference(stage, 64, 12, "demo", eval);
    QVERIFY(!ref.isEmpty());
    const QStringList keys = eval + sp_keys(mode, nproc, sp);
    const QString name = stage + "-resume-" + mode + QString::number(nproc);
    const QString full = train(name + "-full", stage, 64, nproc, 12, keys, "demo");
    QVERIFY(!full.isEmpty());
    compare_losses(ref, full, 12);
    // Evaluation under SP: the same eval losses at the same steps.
    const auto ev_ref = losses_by_step(ref, "eval"), ev_got = losses_by_step(full, "eval");
    QCOMPARE(ev_got.size(), size_t(3));
    QCOMPARE(ev_got.size(), ev_ref.size());
    for (size_t i = 0; i < ev_ref.size(); ++i) {
      QCOMPARE(ev_got[i].first, ev_ref[i].first);
      QVERIFY2(std::abs(ev_got[i].second - ev_ref[i].second) <= 1e-5 * std::abs(ev_ref[i].second),
               qPrintable(QStringLiteral("eval at step %1: %2 vs %3").arg(ev_ref[i].first)
                              .arg(ev_got[i].second).arg(ev_ref[i].second)));
    }
    // Resumed from step 6 in a fresh output folder: steps 7..12 as the uninterrupted run.
    QVERIFY(QFileInfo::exists(full + "/checkpoint-6"));
    QStringList resume = keys;
    resume << "resume_from_checkpoint: " + full + "/checkpoint-6";
    const QString resumed = train(name + "-resumed", stage, 64, nproc, 12, resume, "demo");
    QVERIFY(!resumed.isEmpty());
    const auto a = losses_by_step(full, "step"), b = losses_by_step(resumed, "step");
    QCOMPARE(b.size(), size_t(6));
    for (size_t i = 0; i < b.size(); ++i) {
      QCOMPARE(b[i].first, a[i + 6].first);
      QVERIFY2(std::abs(b[i].second - a[i + 6].second) <= 1e-5 * std::abs(a[i + 6].second),
               qPrintable(QStringLiteral("step %1: resumed %2, uninterrupted %3").arg(b[i].first)
                              .arg(b[i].second).arg(a[i + 6].second)));
    }
  }

  // Two "nodes" on this host, one launcher each (--nnodes 2 --node-rank R --master-addr
  // --master-port, as on a cluster without Slurm): one SP=2 group spanning both, the losses of
  // one process.
  void twoLaunchersAsTwoNodes() {
    const QString ref = reference("sft", 64, 20);
    QVERIFY(!ref.isEmpty());
    const QString cfg = write_config("nodes", model_, "sft", 64,
                                     {"sequence_parallel_size: 2", "max_steps: 20",
                                      "per_device_train_batch_size: 2"});
    const QString port = QString::number(29500 + QRandomGenerator::global()->bounded(20000));
    QProcess node[2];
    for (int r = 0; r < 2; ++r)
      node[r].start(kExe, {"train", cfg, "--nproc", "1", "--nnodes", "2", "--node-rank",
                           QString::number(r), "--master-addr", "127.0.0.1", "--master-port", port});
    for (auto& n : node) {
      QVERIFY(n.waitForFinished(300000));
      QVERIFY2(n.exitCode() == 0, n.readAllStandardError().right(2000).constData());
    }
    const auto a = step_losses(ref), b = step_losses(dir_.filePath("nodes-out"));
    QCOMPARE(b.size(), a.size());
    for (size_t i = 0; i < a.size(); ++i)
      QVERIFY2(std::abs(a[i] - b[i]) <= 1e-5 * std::abs(a[i]),
               qPrintable(QStringLiteral("step %1: %2 vs %3").arg(i + 1).arg(a[i]).arg(b[i])));
  }

  // The architectures beyond LLaMA/Qwen in every SP mode, SFT over 10 steps: Gemma 2 (sliding
  // window 6 on alternate layers, so windows cross the zigzag chunks of 8 tokens; soft-capped
  // attention scores and logits; sandwich norms), Gemma 3 (qk norms, the sliding layers' own
  // RoPE base), Phi-3 (fused projections, partial longrope whose long factors apply past 32
  // tokens, window 7), GLM-4 (interleaved half rotary, biases, sandwich norms).
  void architecturesMatchSingleProcess_data() {
    QTest::addColumn<QString>("arch");
    QTest::addColumn<QString>("mode");
    QTest::addColumn<int>("sp");
    QTest::addColumn<int>("zero");
    for (const char* arch : {"gemma2", "gemma3", "phi3", "glm4", "qwen2moe", "qwen3moe"})
      for (const auto& [mode, sp] : {std::pair<const char*, int>{"zigzag-ring", 4},
                                     {"ulysses", 2}, {"usp", 4}})
        QTest::newRow(qPrintable(QStringLiteral("%1 %2 sp%3").arg(arch, mode).arg(sp)))
            << QString(arch) << QString(mode) << sp << 0;
    // The experts sharded over the 4 ranks with the rest of the model states.
    QTest::newRow("qwen2moe usp sp4, ZeRO-3") << "qwen2moe" << "usp" << 4 << 3;
  }

  void architecturesMatchSingleProcess() {
    QFETCH(QString, arch);
    QFETCH(QString, mode);
    QFETCH(int, sp);
    QFETCH(int, zero);
    // The MoE models train with the auxiliary loss on (coefficient 0.05, so that it moves the
    // loss): each micro-batch's aux covers its whole sequences, whatever SP splits.
    static const std::map<QString, const char*> kConfigs = {
        {"gemma2", R"({"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2",
            "hidden_activation": "gelu_pytorch_tanh", "head_dim": 8, "query_pre_attn_scalar": 6,
            "sliding_window": 6, "layer_types": ["sliding_attention", "full_attention"],
            "attn_logit_softcapping": 2.0, "final_logit_softcapping": 3.0})"},
        {"gemma3", R"({"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
            "hidden_activation": "gelu_pytorch_tanh", "head_dim": 8, "query_pre_attn_scalar": 8,
            "sliding_window": 5, "layer_types": ["sliding_attention", "full_attention"],
            "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
              "full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1000000.0}}})"},
        {"phi3", R"({"architectures": ["Phi3ForCausalLM"], "model_type": "phi3",
            "sliding_window": 7, "rope_parameters": {"rope_type": "longrope", "rope_theta": 10000.0,
              "partial_rotary_factor": 0.5, "short_factor": [1.0, 2.0], "long_factor": [1.0, 4.0],
              "original_max_position_embeddings": 32}})"},
        {"glm4", R"({"architectures": ["Glm4ForCausalLM"], "model_type": "glm4",
            "attention_bias": true, "partial_rotary_factor": 0.5})"},
        {"qwen2moe", R"({"architectures": ["Qwen2MoeForCausalLM"], "model_type": "qwen2_moe",
            "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
            "shared_expert_intermediate_size": 24, "mlp_only_layers": [1],
            "initializer_range": 0.2})"},
        {"qwen3moe", R"({"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
            "num_experts": 6, "num_experts_per_tok": 3, "moe_intermediate_size": 12,
            "norm_topk_prob": true, "head_dim": 8, "initializer_range": 0.2})"}};
    train_runs::TinyModel m;
    m.name = "tiny-" + arch;
    m.hidden = 32;
    m.heads = 4;
    m.kv_heads = 2;
    m.tied = arch.startsWith("gemma");
    m.seed = 3;
    m.overrides = QJsonDocument::fromJson(kConfigs.at(arch)).object();
    QVERIFY(!m.overrides.isEmpty());
    const QString model = QDir(dir_.path()).exists(m.name) ? dir_.filePath(m.name)
                                                           : train_runs::make_tiny_model(dir_.path(), m);
    QVERIFY2(!model.isEmpty(), "init-model failed");
    const QString saved = model_;
    model_ = model;
    const QStringList moe = arch.contains("moe") ? QStringList{"moe_aux_loss_coef: 0.05"}
                                                 : QStringList{};
    const QString ref = reference("sft", 64, 10, "demo", moe);
    const QString name = QStringLiteral("%1-%2-sp%3-z%4").arg(arch, mode).arg(sp).arg(zero);
    QStringList keys = sp_keys(mode, sp, sp) + moe;
    if (zero > 0) keys << QStringLiteral("zero_stage: %1").arg(zero);
    const QString got = train(name, "sft", 64, sp, 10, keys);
    model_ = saved;
    QVERIFY(!ref.isEmpty() && !got.isEmpty());
    if (!moe.isEmpty()) {  // the aux loss was on in both, and is in the loss compared
      for (const QString& out : {ref, got}) {
        std::vector<double> aux;
        for (const auto& e : events(out))
          if (e["event"].toString() == "step") aux.push_back(e["aux_loss"].toDouble());
        QCOMPARE(aux.size(), size_t(10));
        QVERIFY2(aux.front() > 1.0, qPrintable(QString("aux_loss %1").arg(aux.front())));
      }
    }
    compare_losses(ref, got, 10);
  }

  // 3 key/value heads cannot be split over 2 Ulysses ranks, nor replicated: a clear refusal
  // that suggests zigzag-ring, before any worker trains.
  void ulyssesRefusesIndivisibleKvHeads() {
    const QString model = make_model("tiny-kv3", 6, 3);
    QVERIFY(!model.isEmpty());
    const QString cfg = write_config("kv3", model, "sft", 64,
                                     {"sequence_parallel_size: 2", "sequence_parallel_mode: ulysses",
                                      "max_steps: 2"});
    const Run r = run({"train", cfg, "--nproc", "2"});
    QVERIFY(r.code != 0);
    QVERIFY2(r.err.contains("zigzag-ring"), qPrintable(r.err));
    QVERIFY2(r.err.contains("3"), qPrintable(r.err));
  }

  // kill -9 of one worker mid-run: the launcher stops the other within 10 s, and status.json
  // and the end event name the rank.
  void killedRankStopsTheRun() {
    const QString cfg = write_config("killed", model_, "sft", 64,
                                     {"sequence_parallel_size: 2", "max_steps: 100000"});
    const QString out = dir_.filePath("killed-out");
    QProcess p;
    QVERIFY(start_long_run(p, cfg, out));
    const pid_t victim = worker_pid(p.processId(), 1);
    QVERIFY(victim > 0);
    QElapsedTimer t;
    t.start();
    ::kill(victim, SIGKILL);
    QVERIFY(p.waitForFinished(15000));
    QVERIFY2(t.elapsed() < 10000, qPrintable(QStringLiteral("%1 ms").arg(t.elapsed())));
    QVERIFY(p.exitCode() != 0);
    const QJsonObject status = read_json(out + "/status.json");
    QCOMPARE(status["state"].toString(), QStringLiteral("failed"));
    QVERIFY2(status["reason"].toString().contains("rank 1"), qPrintable(status["reason"].toString()));
    const auto ev = events(out);
    QVERIFY(!ev.empty());
    QCOMPARE(ev.back()["event"].toString(), QStringLiteral("end"));
    QVERIFY(ev.back()["reason"].toString().contains("rank 1"));
  }

  // SIGTERM (or Ctrl-C's SIGINT) to the launcher: every rank stops at the same step, rank 0
  // records `stopped`, and nothing is left running.
  void stopSignalStopsEveryRank() {
    const QString cfg = write_config("stop", model_, "sft", 64,
                                     {"sequence_parallel_size: 2", "max_steps: 100000"});
    const QString out = dir_.filePath("stop-out");
    QProcess p;
    QVERIFY(start_long_run(p, cfg, out));
    ::kill(static_cast<pid_t>(p.processId()), SIGTERM);
    QVERIFY(p.waitForFinished(15000));
    const QJsonObject status = read_json(out + "/status.json");
    QCOMPARE(status["state"].toString(), QStringLiteral("stopped"));
    const auto ev = events(out);
    QCOMPARE(ev.back()["event"].toString(), QStringLiteral("end"));
    QCOMPARE(ev.back()["state"].toString(), QStringLiteral("stopped"));
  }

  // A rank that stops answering (SIGSTOP): past ddp_timeout its peer fails with an error naming
  // the operation instead of hanging, and the launcher ends the run.
  void hungRankBecomesAnError() {
    const QString cfg = write_config("hung", model_, "sft", 64,
                                     {"sequence_parallel_size: 2", "max_steps: 100000",
                                      "ddp_timeout: 4"});
    const QString out = dir_.filePath("hung-out");
    QProcess p;
    QVERIFY(start_long_run(p, cfg, out));
    const pid_t victim = worker_pid(p.processId(), 1);
    QVERIFY(victim > 0);
    ::kill(victim, SIGSTOP);
    QVERIFY(p.waitForFinished(60000));
    QVERIFY(p.exitCode() != 0);
    const QString err = QString::fromUtf8(p.readAllStandardError());
    QVERIFY2(err.contains("timed out"), qPrintable(err.right(2000)));
    const QJsonObject status = read_json(out + "/status.json");
    QCOMPARE(status["state"].toString(), QStringLiteral("failed"));
    bool logged = false;
    for (const auto& e : events(out))
      logged |= e["event"].toString() == "log" && e["message"].toString().contains("timed out");
    QVERIFY2(logged, "the timeout (with the operation's name) is in events.jsonl");
  }
};

QTEST_MAIN(TestSpEquivalence)
#include "tst_sp_equivalence.moc"
