// The newer training stages end to end under sequence parallelism: `stage: pt` (packed into
// cutoff_len blocks, and unpacked: one short text per row, mostly padding), DPO's orpo, simpo
// and kto_pair losses, `stage: rm` (a reward model scoring each sequence at its last token,
// which one rank holds; its value head saved apart as LLaMA-Factory saves it) and `stage: kto`
// (unpaired examples with their KL sequences), each run by `studio-train train --nproc N` (real worker processes, real
// Gloo) in zigzag-ring, ulysses and usp and with ZeRO-3, against the single-process run of the
// same config in fp32: per-step losses within 1e-5 relative over 12 steps, and the parameters
// after them within 1e-4 (tst_sp_equivalence's bound). orpo and simpo also show that they ran
// without a reference model: the rewards logged are beta x the policy's log-probs, no reference
// is mentioned, and the measured model states hold no reference copy.
#include <QtTest/QtTest>

#include <algorithm>
#include <cmath>
#include <map>

#include "train_runs.h"

namespace {

using train_runs::events;
using train_runs::step_losses;
using train_runs::sp_keys;
using train_runs::max_relative_param_error;

const QStringList kWords{"alpha", "river", "stone", "green", "moves", "under",
                         "seven", "light", "quick", "table", "north", "sings"};

// `n` words of kWords, starting at a place that depends on `i`.
QString words(int i, int n) {
  QStringList w;
  for (int k = 0; k < n; ++k) w << kWords[(i * 7 + k * 5) % kWords.size()];
  return w.join(' ');
}


}  // namespace

class TestStageEquivalence : public QObject {
  Q_OBJECT

 private:
  static constexpr int kSteps = 12;
  struct Trained {
    QString out;  // the output folder, "" when the run failed
    QString err;  // its stderr
  };
  QTemporaryDir dir_;
  QString model_;
  std::map<QString, Trained> reference_;  // the stage keys -> the single-process run

  // pt_texts: 48 texts of 10-79 words for packing. pt_short: 48 texts of 5-20 words, well under
  // cutoff_len, for packing: false. long_dpo: tst_sp_equivalence's long prompts (20-89 words,
  // more than cutoff_len 48 tokens) with answers of 1-3 words, so that the targets sit at the
  // end of each truncated sequence and most SP ranks hold none.
  bool write_data() {
    const QString data = dir_.filePath("data");
    QDir().mkpath(data);
    QJsonArray texts, short_texts, tiny_texts, dpo, kto;
    for (int i = 0; i < 48; ++i) {
      texts.append(QJsonObject{{"text", words(i, 10 + (i * 37) % 70)}});
      short_texts.append(QJsonObject{{"text", words(i + 3, 5 + (i * 7) % 16)}});
      tiny_texts.append(QJsonObject{{"text", words(i + 5, 1 + i % 2)}});
      dpo.append(QJsonObject{{"instruction", words(i, 20 + (i * 37) % 70)}, {"input", ""},
                             {"chosen", words(i + 1, 1 + i % 3)}, {"rejected", kWords[(i + 5) % 12]}});
      // Unpaired: every third example undesirable, no micro-batch of one kind only.
      kto.append(QJsonObject{{"instruction", words(i, 20 + (i * 37) % 70)}, {"input", ""},
                             {"output", words(i + 2, 1 + i % 3)}, {"label", i % 3 != 1}});
    }
    const QJsonObject text_column{{"prompt", "text"}};
    const QJsonObject info{
        {"pt_texts", QJsonObject{{"file_name", "pt_texts.json"}, {"columns", text_column}}},
        {"pt_short", QJsonObject{{"file_name", "pt_short.json"}, {"columns", text_column}}},
        {"pt_tiny", QJsonObject{{"file_name", "pt_tiny.json"}, {"columns", text_column}}},
        {"long_dpo", QJsonObject{{"file_name", "long_dpo.json"}, {"ranking", true},
                                 {"columns", QJsonObject{{"prompt", "instruction"}, {"query", "input"},
                                                         {"chosen", "chosen"}, {"rejected", "rejected"}}}}},
        {"long_kto", QJsonObject{{"file_name", "long_kto.json"},
                                 {"columns", QJsonObject{{"prompt", "instruction"}, {"query", "input"},
                                                         {"response", "output"}, {"kto_tag", "label"}}}}}};
    bool ok = true;
    for (const auto& [file, doc] : {std::pair{"pt_texts.json", QJsonDocument(texts)},
                                    {"pt_short.json", QJsonDocument(short_texts)},
                                    {"pt_tiny.json", QJsonDocument(tiny_texts)},
                                    {"long_dpo.json", QJsonDocument(dpo)},
                                    {"long_kto.json", QJsonDocument(kto)},
                                    {"dataset_info.json", QJsonDocument(info)}}) {
      QFile f(data + "/" + file);
      ok = ok && f.open(QIODevice::WriteOnly) && f.write(doc.toJson()) > 0;
    }
    return ok;
  }

  // Trains kSteps steps over `nproc` processes; `keys` ("key: value") add to or replace the
  // common ones.
  Trained train(const QString& name, int nproc, const QStringList& keys) {
    const QString out = dir_.filePath(name + "-out");
    const QString cfg = train_runs::write_yaml(
        dir_.filePath(name + ".yaml"),
        {"model_name_or_path: " + model_, "do_train: true", "finetuning_type: full",
         "dataset_dir: " + dir_.filePath("data"), "output_dir: " + out,
         "overwrite_output_dir: true", "logging_steps: 1", "save_steps: 100000",
         "learning_rate: 1.0e-3", "lr_scheduler_type: cosine", "warmup_steps: 0",
         "weight_decay: 0.01", "max_grad_norm: 1.0", "gradient_accumulation_steps: 2",
         "per_device_train_batch_size: 2", "eval_strategy: 'no'", "seed: 11", "pref_beta: 0.1",
         // Why not Adam's usual 1e-8: tst_sp_equivalence's write_config.
         "adam_epsilon: 1.0e-6", QStringLiteral("max_steps: %1").arg(kSteps)},
        keys);
    const train_runs::Run r = train_runs::run({"train", cfg, "--nproc", QString::number(nproc)});
    if (r.code != 0) qWarning().noquote() << name << "failed:\n" << r.err.right(3000);
    return {r.code == 0 ? out : QString(), r.err};
  }

  static bool is_reference_free(const QStringList& stage) {
    return stage.contains("pref_loss: orpo") || stage.contains("pref_loss: simpo");
  }

  // Each step's DPO metrics of a run without a reference: rewards = pref_beta x the logged
  // policy log-probs (with a reference they are beta x (policy - reference)). "" or what differs.
  static QString rewards_are_not_beta_logps(const QString& out) {
    int steps = 0;
    for (const auto& e : events(out)) {
      if (e["event"].toString() != "step") continue;
      ++steps;
      for (const QString side : {"chosen", "rejected"}) {
        const double reward = e["rewards/" + side].toDouble(std::nan(""));
        const double logps = e["logps/" + side].toDouble(std::nan(""));
        if (!(logps < 0 && std::abs(reward - 0.1 * logps) <= 1e-6 * std::abs(0.1 * logps)))
          return QStringLiteral("%1 step %2: rewards/%3 %4, logps/%3 %5").arg(out)
              .arg(e["step"].toInt()).arg(side).arg(reward).arg(logps);
      }
    }
    return steps == kSteps ? QString() : QStringLiteral("%1: %2 steps").arg(out).arg(steps);
  }

  // Bytes of model states per parameter that rank 0 measured (single process, ZeRO stage 0, fp32:
  // weights, gradients and AdamW's m and v are 16; a DPO reference copy adds 4).
  static double state_bytes_per_parameter(const QString& out) {
    double params = 0;
    for (const auto& e : events(out)) {
      if (e["event"].toString() == "start") params = e["model"].toObject()["parameters"].toDouble();
      if (e["event"].toString() == "step" && params > 0)
        return e["gpus"].toArray()[0].toObject()["model_states_mib"].toDouble() * 1048576.0 / params;
    }
    return std::nan("");
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    QVERIFY(write_data());
    train_runs::TinyModel m;  // tst_sp_equivalence's: GQA, 4 query heads, 2 key/value heads
    m.name = "tiny-gqa";
    m.tied = true;
    m.seed = 3;
    model_ = train_runs::make_tiny_model(dir_.path(), m);
    QVERIFY2(!model_.isEmpty(), "init-model failed");
  }

  void matchesSingleProcess_data() {
    QTest::addColumn<QStringList>("stage");  // the keys the reference and the SP run share
    QTest::addColumn<QString>("mode");
    QTest::addColumn<int>("nproc");
    QTest::addColumn<int>("sp");
    QTest::addColumn<bool>("zero3");
    QTest::addColumn<QStringList>("only");  // keys of the parallel run alone
    // pt packs by default (no packing key): 48 texts with their eos concatenated and cut into
    // blocks of cutoff_len = 64 tokens, every token a target on every rank.
    const QStringList packed{"stage: pt", "dataset: pt_texts", "cutoff_len: 64"};
    QTest::newRow("pt packed, zigzag sp2") << packed << "zigzag-ring" << 2 << 2 << false << QStringList{};
    QTest::newRow("pt packed, ulysses sp4") << packed << "ulysses" << 4 << 4 << false << QStringList{};
    QTest::newRow("pt packed, usp 2x2") << packed << "usp" << 4 << 4 << false << QStringList{};
    QTest::newRow("pt packed, dp2 x zigzag sp2, ZeRO-3") << packed << "zigzag-ring" << 4 << 2 << true << QStringList{};
    // packing: false: one text of 5-20 words (~15-55 tokens) per row, cutoff_len 256 never
    // reached. A micro-batch is padded to its longest row (rounded up to the SP alignment), not
    // to cutoff_len, so a short text beside a long one is mostly padding: the ranks holding its
    // later chunks (zigzag sp4: ranks 2 and 3) have no target in that row, only in the other.
    const QStringList unpacked{"stage: pt", "dataset: pt_short", "cutoff_len: 256", "packing: false"};
    QTest::newRow("pt unpacked, zigzag sp4") << unpacked << "zigzag-ring" << 4 << 4 << false << QStringList{};
    QTest::newRow("pt unpacked, usp 2x2, ZeRO-3") << unpacked << "usp" << 4 << 4 << true << QStringList{};
    // Texts of 1-2 words (a few tokens with their eos): each micro-batch is padded to zigzag
    // sp4's alignment of 8 tokens, whose chunks 2-5 (ranks 2 and 3) are all padding: those ranks
    // hold no target in any row and still run every collective.
    const QStringList tiny{"stage: pt", "dataset: pt_tiny", "cutoff_len: 64", "packing: false"};
    QTest::newRow("pt tiny texts, zigzag sp4 (ranks without targets)")
        << tiny << "zigzag-ring" << 4 << 4 << false << QStringList{};
    // Prompts longer than cutoff_len, answers of 1-3 words: under zigzag sp2 rank 1 (the middle
    // chunks) holds no target, under ulysses sp4 only rank 3 holds any.
    for (const QString loss : {"orpo", "simpo", "kto_pair"}) {
      QStringList dpo{"stage: dpo", "dataset: long_dpo", "template: qwen", "cutoff_len: 48",
                      "pref_loss: " + loss};
      if (loss == "simpo") dpo << "simpo_gamma: 0.5";
      const QByteArray l = loss.toUtf8();
      QTest::newRow(l + ", zigzag sp2") << dpo << "zigzag-ring" << 2 << 2 << false << QStringList{};
      QTest::newRow(l + ", ulysses sp4") << dpo << "ulysses" << 4 << 4 << false << QStringList{};
      QTest::newRow(l + ", usp 2x2") << dpo << "usp" << 4 << 4 << false << QStringList{};
      if (loss != "kto_pair") {
        QTest::newRow(l + ", dp2 x zigzag sp2, ZeRO-3") << dpo << "zigzag-ring" << 4 << 2 << true << QStringList{};
      } else {
        // kto_pair's KL terms are means over each rank's micro-batch of pairs. dp2 with 1 pair
        // per rank (or 2 per rank without accumulation: the sampler deals pairs to the ranks
        // in turn) groups the pairs unlike the reference's micro-batches of 2, which
        // legitimately changes the loss from step 2 on (1e-3 relative here; docs/STAGES.md):
        // so no dp2 row, ZeRO-3 over one SP group of 4 instead.
        QTest::newRow(l + ", zigzag sp4, ZeRO-3") << dpo << "zigzag-ring" << 4 << 4 << true << QStringList{};
      }
    }
    // Stage rm on the same pairs: each sequence is scored at its last token, which lives on one
    // rank (under zigzag sp2 rank 0's second chunk, under ulysses sp4 rank 3): the others add 0.
    // The value head's dropout (TRL's 0.1: the tiny model's config.json has no
    // summary_dropout_prob) is on, its masks drawn per pair, the same under every layout.
    const QStringList rm{"stage: rm", "dataset: long_dpo", "template: qwen", "cutoff_len: 48"};
    QTest::newRow("rm, zigzag sp2") << rm << "zigzag-ring" << 2 << 2 << false << QStringList{};
    QTest::newRow("rm, ulysses sp4") << rm << "ulysses" << 4 << 4 << false << QStringList{};
    QTest::newRow("rm, usp 2x2") << rm << "usp" << 4 << 4 << false << QStringList{};
    QTest::newRow("rm, dp2 x zigzag sp2, ZeRO-3") << rm << "zigzag-ring" << 4 << 2 << true << QStringList{};
      // Stage kto on examples like those pairs (every third undesirable), each with the previous
    // example's answer as its KL sequence: the targets at the end of the truncated sequences, so
    // under zigzag sp2 rank 1 and under ulysses sp4 ranks 0-2 hold none, in the targets and in
    // the KL sequences. The KL estimate is a mean over each micro-batch (over the DP ranks' micro-
    // batches together, as TRL gathers it): dp2 with 2 examples per rank against one process with
    // 4 groups the same examples, with the SFT term off (pref_ftx rescales per rank, as LF's).
    const QStringList kto{"stage: kto", "dataset: long_kto", "template: qwen", "cutoff_len: 48"};
    QTest::newRow("kto, zigzag sp2") << kto << "zigzag-ring" << 2 << 2 << false << QStringList{};
    QTest::newRow("kto, ulysses sp4") << kto << "ulysses" << 4 << 4 << false << QStringList{};
    QTest::newRow("kto, usp 2x2, ftx") << kto + QStringList{"pref_ftx: 0.5"} << "usp" << 4 << 4
                                       << false << QStringList{};
    QTest::newRow("kto, zigzag sp4, ZeRO-3") << kto << "zigzag-ring" << 4 << 4 << true
                                             << QStringList{};
    QTest::newRow("kto, dp2 x zigzag sp2, ZeRO-3")
        << kto + QStringList{"per_device_train_batch_size: 4"} << "zigzag-ring" << 4 << 2 << true
        << QStringList{"per_device_train_batch_size: 2"};
  }

  void matchesSingleProcess() {
    QFETCH(QStringList, stage);
    QFETCH(QString, mode);
    QFETCH(int, nproc);
    QFETCH(int, sp);
    QFETCH(bool, zero3);
    QFETCH(QStringList, only);
    const QString key = stage.join(", ");
    if (!reference_.count(key))
      reference_[key] = train(QStringLiteral("ref%1").arg(reference_.size()), 1, stage);
    const Trained ref = reference_[key];
    QVERIFY(!ref.out.isEmpty());
    QStringList keys = stage + sp_keys(mode, nproc, sp);
    if (zero3) keys << "zero_stage: 3";
    keys << only;
    const QString name = QString::fromUtf8(QTest::currentDataTag())
                             .replace(QRegularExpression("[^A-Za-z0-9]+"), "-");
    const Trained got = train(name, nproc, keys);
    QVERIFY(!got.out.isEmpty());

    // The same loss at every step, and a loss that moved.
    const auto a = step_losses(ref.out), b = step_losses(got.out);
    QCOMPARE(a.size(), size_t(kSteps));
    QCOMPARE(b.size(), a.size());
    double worst = 0;
    QString table;
    for (size_t i = 0; i < a.size(); ++i) {
      table += QStringLiteral("\n  step %1: %2 %3").arg(i + 1).arg(a[i], 0, 'g', 9).arg(b[i], 0, 'g', 9);
      worst = std::max(worst, std::isfinite(a[i]) && std::isfinite(b[i])
                                  ? std::abs(a[i] - b[i]) / std::abs(a[i]) : INFINITY);
    }
    QVERIFY2(worst <= 1e-5, qPrintable(QStringLiteral("max relative loss difference %1 (reference, SP):")
                                           .arg(worst) + table));
    QVERIFY2(a.front() != a.back(), "the loss did not move: the comparison would prove nothing");
    // The same parameters after the last step, and parameters that moved.
    const double params = max_relative_param_error(ref.out, got.out);
    QVERIFY2(params <= 1e-4, qPrintable(QStringLiteral("max relative parameter error %1").arg(params)));
    QVERIFY(max_relative_param_error(model_, ref.out) > 1e-6);
    qInfo("%s: losses within %.3g, parameters within %.3g", QTest::currentDataTag(), worst, params);

    // pt: packing into blocks is the default; packing: false trains one text per sequence.
    if (stage.contains("stage: pt"))
      for (const QString& err : {ref.err, got.err})
        QVERIFY2(err.contains(stage.contains("packing: false") ? "studio-train: 48 training samples"
                                                               : "training blocks of 64 tokens"),
                 qPrintable(err.right(1500)));

    if (stage.contains("stage: rm")) {
      for (const Trained& r : {ref, got}) {
        // The head was initialised (the model folder has none) and saved as LLaMA-Factory saves
        // it: value_head.safetensors with its two tensors in fp32, none in the model's file.
        QVERIFY2(r.err.contains("value head initialised (seed 11"), qPrintable(r.err.right(1500)));
        const auto head = studio::trainer::SafetensorsFile::open(
            (r.out + "/" + studio::trainer::kValueHeadFile).toStdString());
        std::vector<std::string> names = head.names();
        std::sort(names.begin(), names.end());
        QCOMPARE(names, (std::vector<std::string>{"v_head.summary.bias", "v_head.summary.weight"}));
        QCOMPARE(head.info("v_head.summary.weight").dtype, torch::kFloat);
        QCOMPARE(head.info("v_head.summary.weight").shape, (std::vector<int64_t>{1, 32}));
        for (const auto& name : studio::trainer::CheckpointReader::open(r.out.toStdString()).names())
          QVERIFY2(!studio::trainer::is_value_head_tensor(name), name.c_str());
        // The scores' metrics: accuracy a share, margin = chosen - rejected, no log-probs.
        int steps = 0;
        for (const auto& e : events(r.out)) {
          if (e["event"].toString() != "step") continue;
          ++steps;
          const double acc = e["rewards/accuracies"].toDouble(-1);
          QVERIFY2(acc >= 0 && acc <= 1, qPrintable(QString::number(acc)));
          const double margin = e["rewards/chosen"].toDouble() - e["rewards/rejected"].toDouble();
          QVERIFY(std::abs(e["rewards/margins"].toDouble() - margin) <= 1e-6 * (1 + std::abs(margin)));
          QVERIFY(e["logps/chosen"].isNull());
        }
        QCOMPARE(steps, kSteps);
      }
      // No reference copy: 16 B per parameter (fp32 weights, gradients, m, v).
      const double bytes = state_bytes_per_parameter(ref.out);
      QVERIFY2(bytes > 15 && bytes < 17, qPrintable(QStringLiteral("%1 B/parameter").arg(bytes)));
    }

    if (stage.contains("stage: kto")) {
      // The KL estimate (clamped at 0) and both kinds' rewards at every step, LF's margin, the
      // same KL under SP as without it; a reference copy (20 B/parameter).
      const auto ea = events(ref.out), eb = events(got.out);
      int steps = 0, both = 0;
      for (size_t i = 0, j = 0; i < ea.size() && j < eb.size(); ++i, ++j) {
        while (i < ea.size() && ea[i]["event"].toString() != "step") ++i;
        while (j < eb.size() && eb[j]["event"].toString() != "step") ++j;
        if (i == ea.size() || j == eb.size()) break;
        ++steps;
        // The KL is a small difference of log-prob sums (tens of nats here): its rounding is
        // relative to them.
        const double kl = ea[i]["kl"].toDouble(-1), kl_sp = eb[j]["kl"].toDouble(-1);
        const double scale = std::max({1.0, std::abs(ea[i]["logps/chosen"].toDouble(0)),
                                       std::abs(ea[i]["logps/rejected"].toDouble(0))});
        QVERIFY2(kl >= 0 && std::abs(kl - kl_sp) <= 1e-6 * scale,
                 qPrintable(QStringLiteral("step %1: kl %2, under SP %3").arg(steps).arg(kl).arg(kl_sp)));
        // A step without an undesirable (or desirable) example has no mean for that kind
        // (null) and so no margin.
        const QJsonValue chosen = ea[i]["rewards/chosen"], rejected = ea[i]["rewards/rejected"];
        if (chosen.isDouble() && rejected.isDouble()) {
          const double margin = chosen.toDouble() - rejected.toDouble();
          QVERIFY(std::abs(ea[i]["rewards/margins"].toDouble() - margin) <=
                  1e-6 * (1 + std::abs(margin)));
          QVERIFY(ea[i]["logps/chosen"].toDouble(0) < 0 && ea[i]["logps/rejected"].toDouble(0) < 0);
          ++both;
        } else {
          QVERIFY(ea[i]["rewards/margins"].isNull());
          QVERIFY(chosen.isDouble() || rejected.isDouble());
        }
      }
      QCOMPARE(steps, kSteps);
      QVERIFY2(both >= kSteps / 2, qPrintable(QString::number(both)));
      const double bytes = state_bytes_per_parameter(ref.out);
      QVERIFY2(bytes > 19 && bytes < 21, qPrintable(QStringLiteral("%1 B/parameter").arg(bytes)));
    }

    if (stage.contains("stage: dpo")) {
      const double bytes = state_bytes_per_parameter(ref.out);
      if (!is_reference_free(stage)) {  // kto_pair: the reference copy is there
        QVERIFY2(bytes > 19 && bytes < 21, qPrintable(QStringLiteral("%1 B/parameter").arg(bytes)));
        return;
      }
      QVERIFY2(bytes > 15 && bytes < 17, qPrintable(QStringLiteral("%1 B/parameter: a reference copy?").arg(bytes)));
      for (const Trained& r : {ref, got}) {
        const QString differs = rewards_are_not_beta_logps(r.out);
        QVERIFY2(differs.isEmpty(), qPrintable(differs));
        // Nothing is said of a reference (no run logs building one; precompute_ref_logps and
        // ref_model would be logged or warned about).
        QVERIFY2(!r.err.contains("reference", Qt::CaseInsensitive), qPrintable(r.err.right(1500)));
      }
    }
  }
};

QTEST_MAIN(TestStageEquivalence)
#include "tst_stage_equivalence.moc"
