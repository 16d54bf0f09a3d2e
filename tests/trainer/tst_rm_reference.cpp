// Stage rm against LLaMA-Factory's own rm stage, end to end: `studio-train train` trains a tiny
// Llama-shaped reward model (fp32, the demo tokenizer with template qwen, summary_dropout_prob
// 0.0 so that TRL's value-head dropout is off) for kSteps steps on 12 preference pairs in ONE
// global batch, evaluating the same pairs after every step and saving a checkpoint at each;
// tests/reference/lf_rm.py then runs LLaMA-Factory 0.9.5's run_rm pieces (its tokenizer,
// template, PairwiseDatasetProcessor, load_model(add_valuehead=True) over TRL's
// AutoModelForCausalLMWithValueHead with load_valuehead_params, PairwiseDataCollatorWithPadding,
// PairwiseTrainer.compute_loss, evaluate() with ComputeAccuracy) on the model folder, each
// checkpoint and the output folder, loaded LF's way. Compared:
//  - the pairs' token ids: studio_data's load_pair_data against LF's PairwiseDatasetProcessor
//    (one pair is longer than cutoff_len, so both truncate it);
//  - step k's loss (the weights before step k: the model folder, then checkpoint k-1) against
//    LF's compute_loss on one batch of all pairs, rel 1e-5, and its rewards/chosen, rejected,
//    margins and accuracies against LF's scores (means) and ComputeAccuracy;
//  - the eval after step k against LF's evaluate() on checkpoint k (the last: the output
//    folder): loss rel 1e-5, and the logged accuracy and mean scores;
//  - the output folder's layout: model.safetensors without a v_head tensor, value_head.safetensors
//    with v_head.summary.weight [1, hidden] and .bias [1] in fp32, which LF's loader finds.
// Two rows: the head read from the model folder's value_head.safetensors (seeded values; LF
// loads the same file), and no such file (studio-train initialises the head from the seed, TRL
// from torch's generator: only the steps after the first are compared). lf_rm.py runs with LF's
// own environment (scripts/setup.sh installs it): the test fails, never skips, without it.
#include <QProcess>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include <nlohmann/json.hpp>

#include "lf_stage_reference.h"
#include "studio/config/config_io.h"
#include "studio/data/dataset.h"
#include "studio/trainer/hf_checkpoint.h"
#include "studio/trainer/model_folder.h"
#include "studio/trainer/tensors/safetensors.h"

using nlohmann::json;

using namespace lf_stage_reference;

namespace {

const QString kSource = QStringLiteral(STUDIO_SOURCE_DIR);
constexpr int kPairs = 12;
constexpr int kSteps = 2;
constexpr int kHidden = 32;


double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s / double(v.size());
}

// |ours - lf| <= rel * |lf| (losses), or <= rel * (1 + |lf|) with `floor` (scores near 0).
bool close(double ours, double lf, double rel, bool floor = false) {
  return std::abs(ours - lf) <= rel * ((floor ? 1.0 : 0.0) + std::abs(lf));
}

QString ids_text(const std::vector<int64_t>& ids) {
  QStringList s;
  for (auto id : ids) s << QString::number(id);
  return "[" + s.join(", ") + "]";
}

}  // namespace

class TestRmReference : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;

  // 12 pairs in alpaca ranking form: prompts of 3-11 words (every third with an input), one of
  // 90 words (truncated at cutoff_len 64), answers of 1-6 words, chosen never equal to rejected.
  bool write_data() {
    const QString data = dir_.filePath("data");
    QDir().mkpath(data);
    QJsonArray rows;
    for (int i = 0; i < kPairs; ++i) {
      const QString chosen = words(i, 1 + (i * 3) % 6, 5);
      QString rejected = words(i + 3, 1 + (i * 5) % 4, 7);
      if (rejected == chosen) rejected += " " + word_list()[i % word_list().size()];
      rows.append(QJsonObject{{"instruction", words(i, i == 5 ? 90 : 3 + (i * 5) % 9, 1)},
                              {"input", i % 3 == 0 ? word_list()[(i + 2) % word_list().size()] : ""},
                              {"chosen", chosen},
                              {"rejected", rejected}});
    }
    const QJsonObject info{
        {"prefs", QJsonObject{{"file_name", "prefs.json"},
                              {"ranking", true},
                              {"columns", QJsonObject{{"prompt", "instruction"},
                                                      {"query", "input"},
                                                      {"chosen", "chosen"},
                                                      {"rejected", "rejected"}}}}}};
    bool ok = true;
    for (const auto& [file, doc] : {std::pair{"prefs.json", QJsonDocument(rows)},
                                    {"dataset_info.json", QJsonDocument(info)}}) {
      QFile f(data + "/" + file);
      ok = ok && f.open(QIODevice::WriteOnly) && f.write(doc.toJson()) > 0;
    }
    return ok;
  }

  // A tiny Llama-shaped model with the demo tokenizer; with `head`, value_head.safetensors beside
  // it (seeded normal weights, bias 0.3), as LF saves a reward model.
  QString make_model(const QString& name, bool head) {
    const QString src = dir_.filePath(name + "-src"), out = dir_.filePath(name);
    QDir().mkpath(src);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
      if (!QFile::copy(kSource + "/resources/demo/model/" + f, src + "/" + f)) return {};
    const json config = {{"architectures", {"LlamaForCausalLM"}},
                         {"model_type", "llama"},
                         {"hidden_act", "silu"},
                         {"hidden_size", kHidden},
                         {"intermediate_size", 64},
                         {"num_hidden_layers", 2},
                         {"num_attention_heads", 4},
                         {"num_key_value_heads", 2},
                         {"vocab_size", 4288},
                         {"max_position_embeddings", 512},
                         {"rms_norm_eps", 1e-6},
                         {"rope_theta", 10000.0},
                         {"tie_word_embeddings", false},
                         // Large enough that the layers mix the context into the last token's
                         // state: with 0.02 every sequence's score is nearly its last token's.
                         {"initializer_range", 0.2},
                         {"bos_token_id", 4256},
                         {"eos_token_id", 4258},
                         {"torch_dtype", "float32"},
                         {"summary_dropout_prob", 0.0}};
    QFile cfg(src + "/config.json");
    if (!cfg.open(QIODevice::WriteOnly)) return {};
    cfg.write(QByteArray::fromStdString(config.dump(2)));
    cfg.close();
    studio::trainer::init_model_folder((src + "/config.json").toStdString(), out.toStdString(), 5);
    if (head) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
      studio::trainer::write_safetensors(
          (out + "/" + studio::trainer::kValueHeadFile).toStdString(),
          {{"v_head.summary.weight", torch::randn({1, kHidden}, gen)},
           {"v_head.summary.bias", torch::full({1}, 0.3)}},
          {{"format", "pt"}}, torch::kFloat);
    }
    return out;
  }

  // The keys LLaMA-Factory's evaluation shares with the run.
  json lf_args() const {
    return {{"template", "qwen"},
            {"dataset_dir", dir_.filePath("data").toStdString()},
            {"eval_dataset", "prefs"},
            {"cutoff_len", 64},
            {"per_device_eval_batch_size", kPairs},
            {"seed", 3}};
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    QVERIFY(write_data());
  }

  void matchesLlamaFactory_data() {
    QTest::addColumn<bool>("head");
    QTest::newRow("value_head.safetensors in the model folder") << true;
    QTest::newRow("value head initialised") << false;
  }

  void matchesLlamaFactory() {
    QFETCH(bool, head);
    const QString name = head ? "with-head" : "no-head";
    const QString model = make_model(name, head);
    QVERIFY(!model.isEmpty());
    const QString out = dir_.filePath(name + "-out");
    QStringList yaml{
        "model_name_or_path: " + model, "stage: rm", "do_train: true", "finetuning_type: full",
        "dataset: prefs", "eval_dataset: prefs", "dataset_dir: " + dir_.filePath("data"),
        "template: qwen", "cutoff_len: 64", "output_dir: " + out, "overwrite_output_dir: true",
        // The whole dataset in one global batch, and in one eval batch.
        QStringLiteral("per_device_train_batch_size: %1").arg(kPairs),
        QStringLiteral("per_device_eval_batch_size: %1").arg(kPairs),
        "gradient_accumulation_steps: 1", "learning_rate: 5.0e-3", "lr_scheduler_type: constant",
        QStringLiteral("max_steps: %1").arg(kSteps), "logging_steps: 1", "eval_strategy: steps",
        "eval_steps: 1", "save_steps: 1", "seed: 3", "report_to: none"};
    const QString yaml_path = dir_.filePath(name + ".yaml");
    {
      QFile f(yaml_path);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write((yaml.join('\n') + '\n').toUtf8());
    }
    const Proc train = run(QStringLiteral(STUDIO_TRAIN_EXE), {"train", yaml_path});
    QVERIFY2(train.code == 0, qPrintable(train.err.right(3000)));
    QVERIFY2(train.err.contains(head ? "value head read from" : "value head initialised (seed 3"),
             qPrintable(train.err.right(2000)));

    // The output folder as LF writes it (fix_valuehead_checkpoint).
    for (const auto& n : studio::trainer::CheckpointReader::open(out.toStdString()).names())
      QVERIFY2(!studio::trainer::is_value_head_tensor(n), n.c_str());
    const auto vhead = studio::trainer::SafetensorsFile::open(
        (out + "/" + studio::trainer::kValueHeadFile).toStdString());
    auto names = vhead.names();
    std::sort(names.begin(), names.end());
    QCOMPARE(names, (std::vector<std::string>{"v_head.summary.bias", "v_head.summary.weight"}));
    QCOMPARE(vhead.info("v_head.summary.weight").dtype, torch::kFloat);
    QCOMPARE(vhead.info("v_head.summary.weight").shape, (std::vector<int64_t>{1, kHidden}));
    QCOMPARE(vhead.info("v_head.summary.bias").dtype, torch::kFloat);
    QCOMPARE(vhead.info("v_head.summary.bias").shape, (std::vector<int64_t>{1}));

    // LLaMA-Factory on the folders: [the model folder,] checkpoint-1 .. checkpoint-(kSteps-1),
    // the output folder.
    QStringList folders;
    if (head) folders << model;
    for (int k = 1; k < kSteps; ++k) folders << out + QStringLiteral("/checkpoint-%1").arg(k);
    folders << out;
    json request = {{"args", lf_args()}, {"models", json::array()}};
    for (const auto& f : folders) request["models"].push_back(f.toStdString());
    const Proc lf =
        run(QStringLiteral(STUDIO_LLAMAFACTORY_PYTHON), {kSource + "/tests/reference/lf_rm.py"},
            QByteArray::fromStdString(request.dump()));
    QVERIFY2(lf.code == 0,
             qPrintable("lf_rm.py with " STUDIO_LLAMAFACTORY_PYTHON
                        " failed (scripts/setup.sh installs LLaMA-Factory's environment): " +
                        lf.err.right(3000)));
    const json answers = json::parse(lf.out.toStdString());
    QCOMPARE(answers.size(), std::size_t(folders.size()));
    for (std::size_t i = 0; i < answers.size(); ++i) {
      const json& a = answers[i];
      // Each folder's head was LF's to read, and TRL's dropout is off (config.json).
      QVERIFY2(a.at("value_head_loaded").get<bool>(), qPrintable(folders[int(i)]));
      QCOMPARE(a.at("dropout").get<std::string>(), std::string("Identity()"));
      QCOMPARE(a.at("chosen_scores").size(), std::size_t(kPairs));
    }
    // LF's answer for the weights before step k (k = 1..kSteps; none before step 1 when the head
    // was initialised) and after it.
    auto before = [&](int k) -> const json* {
      const int i = head ? k - 1 : k - 2;
      return i >= 0 ? &answers[std::size_t(i)] : nullptr;
    };
    auto after = [&](int k) -> const json& { return answers[std::size_t(head ? k : k - 1)]; };

    // The pairs, token for token.
    const auto loaded = studio::load_config_file(yaml_path.toStdString());
    QVERIFY(loaded.ok());
    studio::data::DatasetOptions opt;
    opt.use_cache = false;
    const auto pairs = studio::data::load_pair_data(
        loaded.config, studio::data::Tokenizer::load(model.toStdString()), opt);
    QCOMPARE(pairs.eval.size(), std::size_t(kPairs));
    const json& lf_ids = answers.back();
    bool truncated = false;
    for (int i = 0; i < kPairs; ++i) {
      const auto& p = pairs.eval[std::size_t(i)];
      const auto chosen = lf_ids.at("chosen_ids")[std::size_t(i)].get<std::vector<int64_t>>();
      const auto rejected = lf_ids.at("rejected_ids")[std::size_t(i)].get<std::vector<int64_t>>();
      QVERIFY2(p.chosen.input_ids == chosen,
               qPrintable(QStringLiteral("pair %1 chosen: ours %2, LF %3")
                              .arg(i)
                              .arg(ids_text(p.chosen.input_ids), ids_text(chosen))));
      QVERIFY2(p.rejected.input_ids == rejected,
               qPrintable(QStringLiteral("pair %1 rejected: ours %2, LF %3")
                              .arg(i)
                              .arg(ids_text(p.rejected.input_ids), ids_text(rejected))));
      truncated = truncated || chosen.size() == 64 || rejected.size() == 64;
    }
    QVERIFY2(truncated, "no pair reaches cutoff_len: the truncation is not compared");

    // Each step against LF on the weights it started from, each eval against the weights after.
    std::vector<json> steps, evals, eval_logs;
    for (const json& e : events(out)) {
      const std::string kind = e.value("event", "");
      if (kind == "step") steps.push_back(e);
      if (kind == "eval") evals.push_back(e);
      if (kind == "log" && e.value("message", "").rfind("eval: reward accuracy", 0) == 0)
        eval_logs.push_back(e);
    }
    QCOMPARE(int(steps.size()), kSteps);
    QCOMPARE(int(evals.size()), kSteps);
    QCOMPARE(int(eval_logs.size()), kSteps);
    const QRegularExpression eval_line(
        "^eval: reward accuracy (\\S+) over (\\d+) pairs \\(chosen scored higher\\), mean scores "
        "(\\S+) chosen, (\\S+) rejected$");
    for (int k = 1; k <= kSteps; ++k) {
      const json& step = steps[std::size_t(k - 1)];
      QCOMPARE(step.at("step").get<int>(), k);
      if (const json* lf0 = before(k)) {
        const double ours = step.at("loss").get<double>(),
                     ref = lf0->at("train_loss").get<double>();
        qInfo("step %d loss: studio-train %.9g, LLaMA-Factory %.9g", k, ours, ref);
        QVERIFY2(close(ours, ref, 1e-5), qPrintable(QStringLiteral("step %1 loss %2, LF %3")
                                                        .arg(k)
                                                        .arg(ours, 0, 'g', 9)
                                                        .arg(ref, 0, 'g', 9)));
        const auto c = lf0->at("chosen_scores").get<std::vector<double>>();
        const auto r = lf0->at("rejected_scores").get<std::vector<double>>();
        std::vector<double> margins;
        for (int i = 0; i < kPairs; ++i) margins.push_back(c[std::size_t(i)] - r[std::size_t(i)]);
        for (const auto& [key, ref_value] : {std::pair{"rewards/chosen", mean(c)},
                                             {"rewards/rejected", mean(r)},
                                             {"rewards/margins", mean(margins)}}) {
          const double v = step.at(key).get<double>();
          QVERIFY2(close(v, ref_value, 1e-5, true),
                   qPrintable(QStringLiteral("step %1 %2 %3, LF %4")
                                  .arg(k)
                                  .arg(QString::fromLatin1(key))
                                  .arg(v, 0, 'g', 9)
                                  .arg(ref_value, 0, 'g', 9)));
        }
        // ComputeAccuracy on the scores of the weights before the step.
        const double acc = step.at("rewards/accuracies").get<double>();
        QVERIFY2(std::abs(acc - lf0->at("eval_accuracy").get<double>()) < 1e-9,
                 qPrintable(QStringLiteral("step %1 accuracy %2, LF %3")
                                .arg(k)
                                .arg(acc)
                                .arg(lf0->at("eval_accuracy").get<double>())));
      }
      const json& ev = evals[std::size_t(k - 1)];
      QCOMPARE(ev.at("step").get<int>(), k);
      const json& lf1 = after(k);
      const double ours = ev.at("loss").get<double>(), ref = lf1.at("eval_loss").get<double>();
      qInfo("eval after step %d: loss studio-train %.9g, LLaMA-Factory %.9g; accuracy LF %g", k,
            ours, ref, lf1.at("eval_accuracy").get<double>());
      QVERIFY2(close(ours, ref, 1e-5),
               qPrintable(QStringLiteral("eval after step %1: loss %2, LF %3")
                              .arg(k)
                              .arg(ours, 0, 'g', 9)
                              .arg(ref, 0, 'g', 9)));
      // The log line: accuracy, pairs and mean scores, printed with 6 significant digits.
      const QString message = QString::fromStdString(eval_logs[std::size_t(k - 1)].at("message"));
      const auto m = eval_line.match(message);
      QVERIFY2(m.hasMatch(), qPrintable(message));
      QCOMPARE(m.captured(2).toInt(), kPairs);
      QVERIFY2(std::abs(m.captured(1).toDouble() - lf1.at("eval_accuracy").get<double>()) < 1e-5,
               qPrintable(message));
      QVERIFY2(
          close(m.captured(3).toDouble(), mean(lf1.at("chosen_scores").get<std::vector<double>>()),
                1e-5, true),
          qPrintable(message + QStringLiteral(", LF chosen %1")
                                   .arg(mean(lf1.at("chosen_scores").get<std::vector<double>>()), 0,
                                        'g', 9)));
      QVERIFY2(
          close(m.captured(4).toDouble(),
                mean(lf1.at("rejected_scores").get<std::vector<double>>()), 1e-5, true),
          qPrintable(message + QStringLiteral(", LF rejected %1")
                                   .arg(mean(lf1.at("rejected_scores").get<std::vector<double>>()),
                                        0, 'g', 9)));
    }
  }
};

QTEST_GUILESS_MAIN(TestRmReference)
#include "tst_rm_reference.moc"
