// Stage kto against LLaMA-Factory's own kto stage, end to end: `studio-train train` trains a tiny
// Llama-shaped model (fp32, the demo tokenizer with template qwen) with stage kto for a few steps
// on 12 alpaca rows in LF's kto_tag form (desirable and undesirable; one prompt longer than
// cutoff_len, one response longer than it, so both an example and a KL sequence are truncated;
// preprocessing_batch_size 5, so the KL responses wrap around within each map batch), evaluating
// on 7 other rows after every step and saving a checkpoint at each; tests/reference/lf_kto.py then
// runs LLaMA-Factory 0.9.5's run_kto pieces (get_train_args, its tokenizer and template,
// get_dataset(stage="kto") with FeedbackDatasetProcessor, load_model, create_ref_model on the
// initial model folder, KTODataCollatorWithPadding, CustomKTOTrainer over TRL 0.24's KTOTrainer)
// on the model folder, each checkpoint and the output folder, loaded LF's way. Compared:
//  - every example token for token: studio_data's load_feedback_data against LF's
//    FeedbackDatasetProcessor (input_ids, labels, kl_input_ids, kl_labels, the kto tag), train
//    and eval;
//  - step k's loss (the weights before step k: the model folder, then checkpoint k-1) against
//    LF's CustomKTOTrainer.get_batch_loss_metrics on exactly the examples of step k's
//    micro-batch, rel 1e-5, and the step event's kl, rewards/chosen, rewards/rejected,
//    rewards/margins, logps/chosen and logps/rejected against LF's metrics of that batch (as
//    CustomKTOTrainer.log averages them; absent where the micro-batch has no example of a kind);
//  - the eval after step k against LF's evaluate() on checkpoint k (the last: the output
//    folder), rel 1e-5.
// Which examples a step trained on: one row puts all 12 in one micro-batch (the step's examples
// do not depend on the shuffle); the other uses micro-batches of 4, and the test asks the
// engine's own sampler (EpochPlanner, the options train_loop gives it for one process) for each
// step's micro-batch; LF's losses on those examples then match only if the engine trained on
// them (the KL estimate is a micro-batch mean). lf_kto.py runs with LF's own environment
// (scripts/setup.sh installs it): the test fails, never skips, without it.
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>

#include <algorithm>
#include <cmath>
#include <vector>

#include <nlohmann/json.hpp>

#include "lf_stage_reference.h"
#include "studio/config/config_io.h"
#include "studio/data/dataset.h"
#include "studio/trainer/batching/sampler.h"
#include "studio/trainer/model_folder.h"

using nlohmann::json;

using namespace lf_stage_reference;

namespace {

const QString kSource = QStringLiteral(STUDIO_SOURCE_DIR);
constexpr int kTrain = 12;
constexpr int kEval = 7;
constexpr int kCutoff = 64;
constexpr int kEvalBatch = 4;  // 7 eval examples: batches of 4 and 3, weighted by their size
constexpr int kSeed = 3;


// |ours - lf| <= rel * |lf| (losses), or <= rel * (1 + |lf|) with `floor` (values near 0: the
// rewards and the KL, exactly 0 at step 1).
bool close(double ours, double lf, double rel, bool floor = false) {
  return std::abs(ours - lf) <= rel * ((floor ? 1.0 : 0.0) + std::abs(lf));
}

QString ids_text(const std::vector<int64_t>& ids) {
  QStringList s;
  for (auto id : ids) s << QString::number(id);
  return "[" + s.join(", ") + "]";
}

// The first difference between studio_data's sequence and LF's, or an empty string.
QString compare_ids(const char* what, int i, const std::vector<int64_t>& ours, const json& lf) {
  const auto theirs = lf.get<std::vector<int64_t>>();
  if (ours == theirs) return {};
  return QStringLiteral("example %1 %2: ours %3, LF %4")
      .arg(i)
      .arg(QString::fromLatin1(what), ids_text(ours), ids_text(theirs));
}

}  // namespace

class TestKtoReference : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  QString model_;

  // Alpaca rows in LF's kto_tag form: prompts of 3-11 words (every third with an input), answers
  // of 1-6 words. Train: row 5's prompt has 90 words and row 8's answer 70 (cut by cutoff_len:
  // row 8's example and row 9's KL sequence, which takes row 8's answer), two thirds desirable.
  // Eval: row 2's prompt has 80 words, every other row desirable.
  static QJsonArray rows(int n, bool train) {
    QJsonArray out;
    for (int i = 0; i < n; ++i) {
      const int j = train ? i : i + 20;  // other words for eval
      const int prompt = (train && i == 5) || (!train && i == 2) ? 90 : 3 + (j * 5) % 9;
      const int answer = train && i == 8 ? 70 : 1 + (j * 3) % 6;
      out.append(QJsonObject{{"instruction", words(j, prompt, 1)},
                             {"input", j % 3 == 0 ? word_list()[(j + 2) % word_list().size()] : ""},
                             {"output", words(j + 4, answer, 5)},
                             {"label", train ? i % 3 != 1 : i % 2 == 0}});
    }
    return out;
  }

  bool write_data() {
    const QString data = dir_.filePath("data");
    QDir().mkpath(data);
    const QJsonObject columns{{"prompt", "instruction"},
                              {"query", "input"},
                              {"response", "output"},
                              {"kto_tag", "label"}};
    const QJsonObject info{
        {"fb_train", QJsonObject{{"file_name", "fb_train.json"}, {"columns", columns}}},
        {"fb_eval", QJsonObject{{"file_name", "fb_eval.json"}, {"columns", columns}}}};
    bool ok = true;
    for (const auto& [file, doc] :
         {std::pair{"fb_train.json", QJsonDocument(rows(kTrain, true))},
          {"fb_eval.json", QJsonDocument(rows(kEval, false))},
          {"dataset_info.json", QJsonDocument(info)}}) {
      QFile f(data + "/" + file);
      ok = ok && f.open(QIODevice::WriteOnly) && f.write(doc.toJson()) > 0;
    }
    return ok;
  }

  // A tiny Llama-shaped model with the demo tokenizer.
  QString make_model() {
    const QString src = dir_.filePath("model-src"), out = dir_.filePath("model");
    QDir().mkpath(src);
    for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
      if (!QFile::copy(kSource + "/resources/demo/model/" + f, src + "/" + f)) return {};
    const json config = {{"architectures", {"LlamaForCausalLM"}},
                         {"model_type", "llama"},
                         {"hidden_act", "silu"},
                         {"hidden_size", 32},
                         {"intermediate_size", 64},
                         {"num_hidden_layers", 2},
                         {"num_attention_heads", 4},
                         {"num_key_value_heads", 2},
                         {"vocab_size", 4288},
                         {"max_position_embeddings", 512},
                         {"rms_norm_eps", 1e-6},
                         {"rope_theta", 10000.0},
                         {"tie_word_embeddings", false},
                         {"initializer_range", 0.1},
                         {"bos_token_id", 4256},
                         {"eos_token_id", 4258},
                         {"torch_dtype", "float32"}};
    QFile cfg(src + "/config.json");
    if (!cfg.open(QIODevice::WriteOnly)) return {};
    cfg.write(QByteArray::fromStdString(config.dump(2)));
    cfg.close();
    studio::trainer::init_model_folder((src + "/config.json").toStdString(), out.toStdString(), 5);
    return out;
  }

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    QVERIFY(write_data());
    model_ = make_model();
    QVERIFY(!model_.isEmpty());
  }

  void matchesLlamaFactory_data() {
    QTest::addColumn<int>("batch");  // per_device_train_batch_size
    QTest::addColumn<int>("steps");
    QTest::addColumn<double>("beta");
    QTest::addColumn<double>("ftx");
    QTest::addColumn<double>("chosen_weight");
    QTest::addColumn<double>("rejected_weight");
    QTest::newRow("all 12 in one micro-batch, beta 0.1") << kTrain << 3 << 0.1 << 0.0 << 1.0 << 1.0;
    // 3 steps an epoch: step 4 is the second epoch's first, reshuffled.
    QTest::newRow("micro-batches of 4, beta 0.3, pref_ftx 0.5, weights 1 and 1.3")
        << 4 << 4 << 0.3 << 0.5 << 1.0 << 1.3;
  }

  void matchesLlamaFactory() {
    QFETCH(int, batch);
    QFETCH(int, steps);
    QFETCH(double, beta);
    QFETCH(double, ftx);
    QFETCH(double, chosen_weight);
    QFETCH(double, rejected_weight);
    const QString name = QStringLiteral("b%1").arg(batch);
    const QString out = dir_.filePath(name + "-out");
    const QString data = dir_.filePath("data");
    QStringList yaml{
        "model_name_or_path: " + model_, "stage: kto", "do_train: true", "finetuning_type: full",
        "dataset: fb_train", "eval_dataset: fb_eval", "dataset_dir: " + data, "template: qwen",
        QStringLiteral("cutoff_len: %1").arg(kCutoff), "preprocessing_batch_size: 5",
        "output_dir: " + out, "overwrite_output_dir: true",
        QStringLiteral("per_device_train_batch_size: %1").arg(batch),
        QStringLiteral("per_device_eval_batch_size: %1").arg(kEvalBatch),
        "gradient_accumulation_steps: 1", "learning_rate: 1.0e-3", "lr_scheduler_type: constant",
        QStringLiteral("pref_beta: %1").arg(beta), QStringLiteral("pref_ftx: %1").arg(ftx),
        QStringLiteral("kto_chosen_weight: %1").arg(chosen_weight),
        QStringLiteral("kto_rejected_weight: %1").arg(rejected_weight),
        QStringLiteral("max_steps: %1").arg(steps), "logging_steps: 1", "eval_strategy: steps",
        "eval_steps: 1", "save_steps: 1", QStringLiteral("seed: %1").arg(kSeed),
        "report_to: none"};
    const QString yaml_path = dir_.filePath(name + ".yaml");
    {
      QFile f(yaml_path);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write((yaml.join('\n') + '\n').toUtf8());
    }
    const Proc train = run(QStringLiteral(STUDIO_TRAIN_EXE), {"train", yaml_path});
    QVERIFY2(train.code == 0, qPrintable(train.err.right(3000)));

    // Each step's micro-batch, as the engine's sampler deals them to one process.
    studio::trainer::SamplerOptions s;
    s.seed = kSeed;
    s.micro_batch = batch;
    s.accumulation = 1;
    const studio::trainer::EpochPlanner planner(kTrain, s);
    std::vector<std::vector<size_t>> micro;
    for (int64_t epoch = 0; int(micro.size()) < steps; ++epoch)
      for (const auto& step : planner.plan(epoch)) {
        QCOMPARE(step.size(), std::size_t(1));  // gradient_accumulation_steps 1
        if (int(micro.size()) < steps) micro.push_back(step.front());
      }
    for (const auto& m : micro) QCOMPARE(int(m.size()), batch);

    // LLaMA-Factory on the folders: the model folder, checkpoint-1 .. checkpoint-(steps-1), the
    // output folder. Folder k holds the weights after step k, so step k + 1's micro-batch is
    // evaluated on it.
    QStringList folders{model_};
    for (int k = 1; k < steps; ++k) folders << out + QStringLiteral("/checkpoint-%1").arg(k);
    folders << out;
    json request = {{"args",
                     {{"template", "qwen"},
                      {"dataset_dir", data.toStdString()},
                      {"dataset", "fb_train"},
                      {"eval_dataset", "fb_eval"},
                      {"cutoff_len", kCutoff},
                      {"preprocessing_batch_size", 5},
                      {"pref_beta", beta},
                      {"pref_ftx", ftx},
                      {"kto_chosen_weight", chosen_weight},
                      {"kto_rejected_weight", rejected_weight},
                      {"per_device_eval_batch_size", kEvalBatch},
                      {"seed", kSeed}}},
                    {"reference", model_.toStdString()},
                    {"models", json::array()}};
    for (int k = 0; k <= steps; ++k) {
      json m = {{"folder", folders[k].toStdString()}, {"batches", json::array()}};
      if (k < steps) m["batches"].push_back(micro[std::size_t(k)]);
      request["models"].push_back(m);
    }
    const Proc lf =
        run(QStringLiteral(STUDIO_LLAMAFACTORY_PYTHON), {kSource + "/tests/reference/lf_kto.py"},
            QByteArray::fromStdString(request.dump()));
    QVERIFY2(lf.code == 0,
             qPrintable("lf_kto.py with " STUDIO_LLAMAFACTORY_PYTHON
                        " failed (scripts/setup.sh installs LLaMA-Factory's environment): " +
                        lf.err.right(3000)));
    const json answer = json::parse(lf.out.toStdString());
    QCOMPARE(answer.at("models").size(), std::size_t(steps + 1));

    // The examples, token for token: targets, KL sequences and tags.
    const auto loaded = studio::load_config_file(yaml_path.toStdString());
    QVERIFY(loaded.ok());
    studio::data::DatasetOptions opt;
    opt.use_cache = false;
    const auto feedback = studio::data::load_feedback_data(
        loaded.config, studio::data::Tokenizer::load(model_.toStdString()), opt);
    QCOMPARE(feedback.train.size(), std::size_t(kTrain));
    QCOMPARE(feedback.eval.size(), std::size_t(kEval));
    int truncated = 0, truncated_kl = 0, desirable = 0;
    for (const auto& [ours, theirs] : {std::pair{&feedback.train, &answer.at("train")},
                                       {&feedback.eval, &answer.at("eval")}}) {
      QCOMPARE(theirs->size(), ours->size());
      for (std::size_t i = 0; i < ours->size(); ++i) {
        const auto& e = (*ours)[i];
        const json& t = (*theirs)[i];
        for (const QString& diff :
             {compare_ids("input_ids", int(i), e.target.input_ids, t.at("input_ids")),
              compare_ids("labels", int(i), e.target.labels, t.at("labels")),
              compare_ids("kl_input_ids", int(i), e.kl.input_ids, t.at("kl_input_ids")),
              compare_ids("kl_labels", int(i), e.kl.labels, t.at("kl_labels"))})
          QVERIFY2(diff.isEmpty(), qPrintable(diff));
        QVERIFY2(e.desirable == t.at("kto_tags").get<bool>(),
                 qPrintable(QStringLiteral("example %1: desirable %2, LF's kto_tag %3")
                                .arg(i)
                                .arg(e.desirable)
                                .arg(t.at("kto_tags").get<bool>())));
        truncated += e.target.input_ids.size() == std::size_t(kCutoff);
        truncated_kl += e.kl.input_ids.size() == std::size_t(kCutoff);
        desirable += e.desirable;
      }
    }
    QVERIFY2(truncated >= 2 && truncated_kl >= 2,
             "the examples do not reach cutoff_len: the truncation is not compared");
    QVERIFY(desirable > 0 && desirable < kTrain + kEval);

    // Each step against LF on the weights it started from, each eval against the weights after.
    std::vector<json> step_events, evals;
    for (const json& e : events(out)) {
      const std::string kind = e.value("event", "");
      if (kind == "step") step_events.push_back(e);
      if (kind == "eval") evals.push_back(e);
    }
    QCOMPARE(int(step_events.size()), steps);
    QCOMPARE(int(evals.size()), steps);
    double worst = 0, worst_eval = 0;
    bool kl_positive = false;
    for (int k = 1; k <= steps; ++k) {
      const json& step = step_events[std::size_t(k - 1)];
      QCOMPARE(step.at("step").get<int>(), k);
      const json& ref = answer.at("models")[std::size_t(k - 1)].at("batches").at(0);
      const double loss = step.at("loss").get<double>(), ref_loss = ref.at("loss").get<double>();
      worst = std::max(worst, std::abs(loss - ref_loss) / std::abs(ref_loss));
      QStringList members;
      for (size_t i : micro[std::size_t(k - 1)]) members << QString::number(i);
      qInfo("step %d (examples %s; %g desirable, %g not) loss: studio-train %.9g, LLaMA-Factory "
            "%.9g; kl %s, LF %.9g",
            k, qPrintable(members.join(',')), ref.at("count/chosen").get<double>(),
            ref.at("count/rejected").get<double>(), loss, ref_loss,
            step.contains("kl") ? step.at("kl").dump().c_str() : "absent",
            ref.at("kl").get<double>());
      QVERIFY2(close(loss, ref_loss, 1e-5), qPrintable(QStringLiteral("step %1 loss %2, LF %3")
                                                           .arg(k)
                                                           .arg(loss, 0, 'g', 9)
                                                           .arg(ref_loss, 0, 'g', 9)));
      kl_positive = kl_positive || ref.at("kl").get<double>() > 0;
      json lf_metrics = ref;
      if (ref.at("rewards/chosen").is_number() && ref.at("rewards/rejected").is_number())
        lf_metrics["rewards/margins"] =  // as CustomKTOTrainer.log forms it
            ref.at("rewards/chosen").get<double>() - ref.at("rewards/rejected").get<double>();
      else
        lf_metrics["rewards/margins"] = nullptr;
      for (const char* key : {"kl", "rewards/chosen", "rewards/rejected", "rewards/margins",
                              "logps/chosen", "logps/rejected"}) {
        const json& want = lf_metrics.at(key);
        const bool have = step.contains(key) && step.at(key).is_number();
        if (want.is_null()) {  // no example of that kind in the micro-batch: LF logs none
          QVERIFY2(!have, qPrintable(QStringLiteral("step %1 %2: %3, LF has no value")
                                         .arg(k)
                                         .arg(QString::fromLatin1(key))
                                         .arg(QString::fromStdString(step.value(key, json()).dump()))));
          continue;
        }
        QVERIFY2(have, qPrintable(QStringLiteral("step %1 has no %2").arg(k).arg(QString::fromLatin1(key))));
        const double v = step.at(key).get<double>(), w = want.get<double>();
        QVERIFY2(close(v, w, 1e-5, true), qPrintable(QStringLiteral("step %1 %2 %3, LF %4")
                                                         .arg(k)
                                                         .arg(QString::fromLatin1(key))
                                                         .arg(v, 0, 'g', 9)
                                                         .arg(w, 0, 'g', 9)));
      }

      const json& ev = evals[std::size_t(k - 1)];
      QCOMPARE(ev.at("step").get<int>(), k);
      const double ours = ev.at("loss").get<double>(),
                   theirs = answer.at("models")[std::size_t(k)].at("eval_loss").get<double>();
      qInfo("eval after step %d: loss studio-train %.9g, LLaMA-Factory %.9g", k, ours, theirs);
      worst_eval = std::max(worst_eval, std::abs(ours - theirs) / std::abs(theirs));
      QVERIFY2(close(ours, theirs, 1e-5),
               qPrintable(QStringLiteral("eval after step %1: loss %2, LF %3")
                              .arg(k)
                              .arg(ours, 0, 'g', 9)
                              .arg(theirs, 0, 'g', 9)));
    }
    qInfo("worst relative difference: step losses %.3g, eval losses %.3g", worst, worst_eval);
    // Without a positive KL estimate the KL sequences would not reach the loss.
    QVERIFY2(kl_positive, "the KL estimate is 0 at every step: the KL sequences are not compared");
  }
};

QTEST_GUILESS_MAIN(TestKtoReference)
#include "tst_kto_reference.moc"
