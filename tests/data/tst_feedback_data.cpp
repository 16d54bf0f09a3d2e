// Stage kto's data (load_feedback_data) on tests/fixtures/datasets_kto, against LLaMA-Factory's
// own kto pipeline (tests/reference/lf_feedback.py: its parser, converters and
// FeedbackDatasetProcessor through datasets' Dataset.map, run with the interpreter of LF's
// environment; the test fails, never skips, without it). All LF requests go to one Python
// process in initTestCase. Compared token for token: each example's input_ids, labels,
// kl_input_ids, kl_labels and kto tag, with the map batches and shards (preprocessing_batch_size,
// preprocessing_num_workers) that decide each row's KL response, rows LF drops after their
// response served as a KL response, truncation, eval_dataset, max_samples, an efficient_eos, a
// replace_eos and a reasoning template. Then the errors (each also an error in LF), skip_bad_rows,
// stats and warnings, the stage checks, val_size, the cache, thread counts and the preview.
#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "chat_tokenizers.h"
#include "reference_run.h"
#include "studio/data/chat_template.h"
#include "studio/data/dataset.h"
#include "studio/data/preview.h"

using namespace studio;
using namespace studio::data;
using nlohmann::json;
using studio::test::error_of;

namespace {

const std::string kKto = std::string(STUDIO_TEST_FIXTURES_DIR) + "/datasets_kto";
const std::string kTokenizers = std::string(STUDIO_TEST_FIXTURES_DIR) + "/tokenizers";

// One comparison with LF: a run config's data settings and the tokenizer fixture it uses
// ("+chat": with the template tokens real models have, tests/data/chat_tokenizers.h).
struct Case {
  const char* name;
  const char* tokenizer;
  const char* tmpl;
  std::vector<std::string> dataset;
  std::vector<std::string> eval_dataset;
  int64_t cutoff_len;
  int64_t batch;
  std::optional<int64_t> workers;
  std::optional<int64_t> max_samples;
  bool enable_thinking;
};

// clang-format off
const Case kCases[] = {
    // name, tokenizer, template, dataset, eval_dataset, cutoff_len, batch, workers, max_samples,
    // enable_thinking
    {"alpaca, batch 3 in 2 shards", "qwen2-style", "qwen", {"kto_alpaca"}, {}, 80, 3, 2, {}, true},
    {"sharegpt, batch 2", "qwen2-style", "qwen", {"kto_sharegpt"}, {}, 80, 2, {}, {}, true},
    {"both and eval_dataset, batch 4 in 2 shards", "qwen2-style", "qwen",
     {"kto_alpaca", "kto_sharegpt"}, {"kto_eval"}, 80, 4, 2, {}, true},
    {"both, cutoff 32, batch 5 in 3 shards", "qwen2-style", "qwen",
     {"kto_sharegpt", "kto_alpaca"}, {}, 32, 5, 3, {}, true},
    {"one batch, max_samples 7", "qwen2-style", "qwen",
     {"kto_alpaca", "kto_sharegpt"}, {}, 80, 1000, {}, 7, true},
    {"batch 1: each row its own KL", "qwen2-style", "qwen",
     {"kto_alpaca", "kto_sharegpt"}, {}, 80, 1, {}, {}, true},
    {"gemma2 (efficient_eos)", "llama2-style+chat", "gemma2",
     {"kto_alpaca", "kto_sharegpt"}, {"kto_eval"}, 48, 4, {}, {}, true},
    {"llama3 (replace_eos)", "llama3-style+chat", "llama3",
     {"kto_alpaca", "kto_sharegpt"}, {}, 64, 3, 2, {}, true},
    {"qwen3, enable_thinking false", "qwen2-style", "qwen3",
     {"kto_alpaca"}, {"kto_eval"}, 80, 4, {}, {}, false},
};
// clang-format on

// An error in studio_data (`ours`, with where it is) that LF also stops on (`lf`).
struct ErrorCase {
  const char* name;
  const char* dataset;
  const char* ours;
  const char* where;
  const char* lf;
};

const ErrorCase kErrors[] = {
    {"kto_tag neither bool nor null", "kto_bad_tag",
     "row 2 column 'label' is a string, expected true (desirable) or false (undesirable)",
     "kto_bad_tag.jsonl:2", "ArrowInvalid"},
    {"KL response from a broken row", "kto_kl_from_broken",
     "row 3 has no KL response: LLaMA-Factory takes it from the row before it",
     "kto_kl_from_broken.jsonl:2): row 2, which it drops", "IndexError"},
    {"no kto_tag column", "kto_untagged", "dataset 'kto_untagged' has no kto_tag column", "",
     "Cannot find valid samples"},
    {"ranking dataset", "kto_ranking",
     "dataset 'kto_ranking' holds preference pairs (\"ranking\": true); stage kto", "",
     "not applicable in the current training stage"},
};

RunConfig kto_config(std::vector<std::string> names, int64_t cutoff = 80, int64_t batch = 1000) {
  RunConfig cfg;
  cfg.stage = Stage::Kto;
  cfg.dataset_dir = kKto;
  cfg.dataset = std::move(names);
  cfg.template_name = "qwen";
  cfg.cutoff_len = cutoff;
  cfg.preprocessing_batch_size = batch;
  return cfg;
}

RunConfig case_config(const Case& c) {
  RunConfig cfg = kto_config(c.dataset, c.cutoff_len, c.batch);
  cfg.template_name = c.tmpl;
  cfg.eval_dataset = c.eval_dataset;
  cfg.preprocessing_num_workers = c.workers;
  cfg.max_samples = c.max_samples;
  return cfg;
}

DatasetOptions no_cache(int workers = 2) {
  DatasetOptions o;
  o.use_cache = false;
  o.num_workers = workers;
  return o;
}

json lf_request(const RunConfig& cfg, const std::string& tokenizer, bool enable_thinking) {
  return {{"tokenizer", tokenizer},
          {"template", cfg.template_name},
          {"dataset_dir", cfg.dataset_dir},
          {"dataset", cfg.dataset},
          {"eval_dataset", cfg.eval_dataset},
          {"cutoff_len", cfg.cutoff_len},
          {"preprocessing_batch_size", cfg.preprocessing_batch_size},
          {"preprocessing_num_workers",
           cfg.preprocessing_num_workers ? json(*cfg.preprocessing_num_workers) : json()},
          {"max_samples", cfg.max_samples ? json(*cfg.max_samples) : json()},
          {"enable_thinking", enable_thinking}};
}

QString ids_text(const std::vector<int64_t>& ids) {
  QStringList out;
  for (int64_t id : ids) out << QString::number(id);
  return "[" + out.join(", ") + "]";
}

// "" when `got` holds LF's examples `want` token for token.
QString mismatch(const std::vector<FeedbackSample>& got, const json& want) {
  if (got.size() != want.size())
    return QString("%1 examples, LLaMA-Factory has %2").arg(got.size()).arg(want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const json& w = want[i];
    const std::pair<const char*, const std::vector<int64_t>*> seqs[] = {
        {"input_ids", &got[i].target.input_ids},
        {"labels", &got[i].target.labels},
        {"kl_input_ids", &got[i].kl.input_ids},
        {"kl_labels", &got[i].kl.labels}};
    for (const auto& [key, ours] : seqs) {
      const auto theirs = w.at(key).get<std::vector<int64_t>>();
      if (*ours != theirs)
        return QString("example %1 %2: %3\nLLaMA-Factory: %4")
            .arg(i)
            .arg(key, ids_text(*ours), ids_text(theirs));
    }
    if (got[i].desirable != w.at("kto_tags").get<bool>())
      return QString("example %1: desirable %2, LLaMA-Factory's kto_tag %3")
          .arg(i)
          .arg(got[i].desirable)
          .arg(w.at("kto_tags").get<bool>());
  }
  return {};
}

bool same(const std::vector<FeedbackSample>& a, const std::vector<FeedbackSample>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].target.input_ids != b[i].target.input_ids ||
        a[i].target.labels != b[i].target.labels || a[i].kl.input_ids != b[i].kl.input_ids ||
        a[i].kl.labels != b[i].kl.labels || a[i].desirable != b[i].desirable)
      return false;
  return true;
}

}  // namespace

class TestFeedbackData : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  std::map<std::string, Tokenizer> tok_;       // by fixture name
  std::map<std::string, std::string> folder_;  // by fixture name, as LF loads it
  json answers_;                               // kCases, then kErrors
  const Tokenizer& qwen() { return tok_.at("qwen2-style"); }

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    for (const Case& c : kCases) {
      const QString name(c.tokenizer);
      if (tok_.count(c.tokenizer)) continue;
      const studio::test::TokenizerFiles files = studio::test::with_chat_tokens(
          name.section('+', 0, 0).toStdString(), name.endsWith("+chat"));
      const QString folder = dir_.filePath(name);
      QVERIFY(studio::test::write_tokenizer(files, folder));
      folder_[c.tokenizer] = folder.toStdString();
      tok_.emplace(c.tokenizer, Tokenizer::load(folder.toStdString()));
    }
    json requests = json::array();
    for (const Case& c : kCases)
      requests.push_back(lf_request(case_config(c), folder_.at(c.tokenizer), c.enable_thinking));
    for (const ErrorCase& e : kErrors)
      requests.push_back(lf_request(kto_config({e.dataset}), folder_.at("qwen2-style"), true));

    QString error;
    const auto answers = studio::test::run_reference(QStringLiteral(STUDIO_LLAMAFACTORY_PYTHON),
                                                     "lf_feedback.py", requests.dump(), error);
    QVERIFY2(answers, qPrintable(error));
    answers_ = *answers;
    QCOMPARE(answers_.size(), requests.size());
  }

  void matchesLlamaFactory_data() {
    QTest::addColumn<int>("index");
    for (int i = 0; i < int(std::size(kCases)); ++i) QTest::newRow(kCases[i].name) << i;
  }

  void matchesLlamaFactory() {
    QFETCH(int, index);
    const Case& c = kCases[index];
    const json& lf = answers_.at(static_cast<std::size_t>(index));
    QVERIFY2(!lf.contains("error"), qPrintable(QString::fromStdString(lf.value("error", ""))));
    DatasetOptions opt = no_cache();
    opt.enable_thinking = c.enable_thinking;
    const FeedbackData d = load_feedback_data(case_config(c), tok_.at(c.tokenizer), opt);
    QString why = mismatch(d.train, lf.at("train"));
    QVERIFY2(why.isEmpty(), qPrintable("train " + why));
    why = mismatch(d.eval, lf.at("eval"));
    QVERIFY2(why.isEmpty(), qPrintable("eval " + why));
    // Every case has both kinds; with batches of one row each KL sequence is the target itself.
    QVERIFY(d.stats.desirable > 0 && d.stats.desirable < d.stats.samples);
    const bool own_kl = std::all_of(d.train.begin(), d.train.end(), [](const FeedbackSample& s) {
      return s.kl.input_ids == s.target.input_ids;
    });
    QCOMPARE(own_kl, c.batch == 1);
  }

  // Each fixture case truncates some examples and keeps others whole (cutoff_len 80 and 32).
  void casesTruncateSome() {
    const FeedbackData d = load_feedback_data(case_config(kCases[2]), qwen(), no_cache());
    QVERIFY(d.stats.truncated > 0);
    QVERIFY(d.stats.truncated < d.stats.samples);
    QCOMPARE(d.stats.lengths.above_cutoff(), d.stats.truncated);
  }

  void errorsAsLlamaFactory_data() {
    QTest::addColumn<int>("index");
    for (int i = 0; i < int(std::size(kErrors)); ++i) QTest::newRow(kErrors[i].name) << i;
  }

  void errorsAsLlamaFactory() {
    QFETCH(int, index);
    const ErrorCase& e = kErrors[index];
    const json& lf = answers_.at(std::size(kCases) + static_cast<std::size_t>(index));
    QVERIFY2(QString::fromStdString(lf.value("error", "")).contains(e.lf),
             qPrintable("LLaMA-Factory: " + QString::fromStdString(lf.dump()).left(400)));
    const QString ours =
        error_of([&] { load_feedback_data(kto_config({e.dataset}), qwen(), no_cache()); });
    QVERIFY2(ours.contains(e.ours), qPrintable(ours));
    QVERIFY2(ours.contains(e.where), qPrintable(ours));
  }

  void skipBadRowsKeepsTheRest() {
    DatasetOptions opt = no_cache();
    opt.skip_bad_rows = true;
    std::vector<std::string> seen;
    opt.on_warning = [&](const std::string& w) { seen.push_back(w); };
    const FeedbackData tags = load_feedback_data(kto_config({"kto_bad_tag"}), qwen(), opt);
    QCOMPARE(tags.train.size(), std::size_t(2));
    QCOMPARE(tags.stats.skipped_bad_rows, int64_t(1));
    QCOMPARE(tags.stats.desirable, int64_t(1));
    QVERIFY(QString::fromStdString(seen.at(0)).contains("kto_bad_tag.jsonl:2): row 2 column"));

    const FeedbackData kl = load_feedback_data(kto_config({"kto_kl_from_broken"}), qwen(), opt);
    QCOMPARE(kl.train.size(), std::size_t(1));  // row 1; row 2 is LF's drop, row 3 a bad row
    QCOMPARE(kl.stats.skipped_invalid, int64_t(1));
    QCOMPARE(kl.stats.skipped_bad_rows, int64_t(1));
    QVERIFY(kl.train[0].desirable);
  }

  // stats: samples kept, desirable among them, target + KL tokens, the targets' learned tokens,
  // the longer sequence's length; LF's drops counted with their row.
  void statsAndWarnings() {
    std::vector<std::string> seen;
    DatasetOptions opt = no_cache();
    opt.on_warning = [&](const std::string& w) { seen.push_back(w); };
    const FeedbackData d = load_feedback_data(kto_config({"kto_alpaca"}, 80), qwen(), opt);
    QCOMPARE(d.stats.samples, int64_t(10));
    QCOMPARE(d.stats.skipped_invalid, int64_t(2));
    int64_t desirable = 0, tokens = 0, learned = 0;
    for (const FeedbackSample& s : d.train) {
      desirable += s.desirable;
      tokens += static_cast<int64_t>(s.target.input_ids.size() + s.kl.input_ids.size());
      for (int64_t l : s.target.labels) learned += l != kIgnoreIndex;
      QCOMPARE(s.target.labels.size(), s.target.input_ids.size());
      QCOMPARE(s.kl.labels.size(), s.kl.input_ids.size());
    }
    QCOMPARE(d.stats.desirable, desirable);
    QCOMPARE(d.stats.desirable, int64_t(5));  // row 6's empty answer reads as undesirable, as LF
    QCOMPARE(d.stats.tokens, tokens);
    QCOMPARE(d.stats.learned_tokens, learned);
    QVERIFY(d.stats.truncated > 0);
    QCOMPARE(d.stats.lengths.above_cutoff(), d.stats.truncated);
    QCOMPARE(seen.size(), std::size_t(2));
    QVERIFY2(QString::fromStdString(seen[0]).contains(
                 "kto_alpaca.jsonl:4): row 4 skipped, as LLaMA-Factory does: column 'label' is "
                 "null or missing"),
             qPrintable(QString::fromStdString(seen[0])));
    QVERIFY(QString::fromStdString(seen[1]).contains("kto_alpaca.jsonl:5): row 5 skipped"));

    seen.clear();
    const FeedbackData one = load_feedback_data(kto_config({"kto_desirable_only"}), qwen(), opt);
    QCOMPARE(one.stats.desirable, int64_t(3));
    QCOMPARE(seen.size(), std::size_t(1));
    QVERIFY(QString::fromStdString(seen[0]).contains("the training set has only desirable"));
    QVERIFY(QString::fromStdString(one.stats.warnings.at(0))
                .contains("Your dataset only has one preference type."));
  }

  // Stage sft reads a KTO dataset as LF does: its converters give tagged rows two responses,
  // which its sft processor drops; the untagged rows are plain examples. dpo refuses it; pt
  // reads its texts; load_feedback_data needs stage kto.
  void otherStagesOnKtoData() {
    RunConfig cfg = kto_config({"kto_alpaca"});
    cfg.stage = Stage::Sft;
    const SftData sft = load_sft_data(cfg, qwen(), no_cache());
    QCOMPARE(sft.train.size(), std::size_t(2));  // rows 4 and 5, whose label is null or missing
    QCOMPARE(sft.stats.skipped_invalid, int64_t(10));
    QVERIFY(QString::fromStdString(sft.stats.warnings.at(0))
                .contains("column 'label' is true: LLaMA-Factory gives a KTO row two responses"));
    cfg.stage = Stage::Dpo;
    QVERIFY(error_of([&] {
              load_pair_data(cfg, qwen(), no_cache());
            }).contains("has no preference pairs"));
    cfg.stage = Stage::Pt;
    QCOMPARE(load_pt_data(cfg, qwen(), no_cache()).stats.skipped_invalid, int64_t(0));
    cfg.stage = Stage::Sft;
    QVERIFY(error_of([&] {
              load_feedback_data(cfg, qwen(), no_cache());
            }).contains("load_feedback_data reads stage kto's data"));
  }

  void valSizeSplitsExamples() {
    RunConfig cfg = kto_config({"kto_alpaca", "kto_sharegpt"}, 80, 4);
    const FeedbackData all = load_feedback_data(cfg, qwen(), no_cache());
    cfg.val_size = 0.2;
    const FeedbackData d = load_feedback_data(cfg, qwen(), no_cache());
    QCOMPARE(d.eval.size(), std::size_t(3));  // ceil(0.2 * 15)
    QCOMPARE(d.train.size() + d.eval.size(), all.train.size());
    QCOMPARE(d.stats.samples, all.stats.samples);
    cfg.eval_dataset = {"kto_eval"};
    QVERIFY(error_of([&] {
              load_feedback_data(cfg, qwen(), no_cache());
            }).contains("val_size and eval_dataset both set"));
  }

  void sameForAnyThreadCount() {
    const RunConfig cfg = case_config(kCases[2]);
    const FeedbackData one = load_feedback_data(cfg, qwen(), no_cache(1));
    const FeedbackData four = load_feedback_data(cfg, qwen(), no_cache(4));
    QVERIFY(same(one.train, four.train));
    QVERIFY(same(one.eval, four.eval));
  }

  // Each dataset is cached on its own, under a key that covers its list and the map batches.
  void cacheCoversTheBatches() {
    QTemporaryDir cache;
    DatasetOptions opt = no_cache();
    opt.use_cache = true;
    opt.cache_dir = cache.path().toStdString();
    RunConfig cfg = case_config(kCases[2]);
    const FeedbackData first = load_feedback_data(cfg, qwen(), opt);
    QCOMPARE(first.stats.datasets_from_cache, int64_t(0));
    QCOMPARE(QDir(cache.path()).entryList({"*.kto.*.bin"}).size(), 3);
    const FeedbackData second = load_feedback_data(cfg, qwen(), opt);
    QCOMPARE(second.stats.datasets_from_cache, int64_t(3));
    QVERIFY(same(first.train, second.train));
    QVERIFY(same(first.eval, second.eval));
    QCOMPARE(second.stats.tokens, first.stats.tokens);
    QCOMPARE(second.stats.desirable, first.stats.desirable);
    QCOMPARE(second.stats.skipped_invalid, first.stats.skipped_invalid);

    cfg.preprocessing_batch_size = 6;
    const FeedbackData rebatched = load_feedback_data(cfg, qwen(), opt);
    QCOMPARE(rebatched.stats.datasets_from_cache, int64_t(0));
    QVERIFY(!same(rebatched.train, first.train));
    QVERIFY(same(rebatched.train, load_feedback_data(cfg, qwen(), no_cache()).train));
    QCOMPARE(load_feedback_data(cfg, qwen(), opt).stats.datasets_from_cache, int64_t(3));
    QCOMPARE(QDir(cache.path()).entryList({"*.kto.*.bin"}).size(), 3);  // the old ones removed
    cfg.preprocessing_num_workers = 3;
    QCOMPARE(load_feedback_data(cfg, qwen(), opt).stats.datasets_from_cache, int64_t(0));
    cfg.dataset = {"kto_alpaca"};  // kto_alpaca's examples depend on the list it is in
    QCOMPARE(load_feedback_data(cfg, qwen(), opt).stats.datasets_from_cache, int64_t(1));  // eval
  }

  void previewShowsTargetAndKl() {
    RunConfig cfg = kto_config({"kto_alpaca"}, 80, 3);
    const PreviewReport r = preview(cfg, qwen(), 3, no_cache());
    QCOMPARE(r.samples.size(), std::size_t(3));
    QCOMPARE(r.train_samples, int64_t(10));
    QVERIFY(r.samples[0].desirable);
    QVERIFY(!r.samples[1].desirable);
    QVERIFY(r.samples[0].kl.tokens > 0);
    const QString text = QString::fromStdString(format_preview_text(r));
    QVERIFY2(text.contains("--- kto_alpaca row 1: desirable, "), qPrintable(text));
    QVERIFY(text.contains("target (desirable):\n[["));
    QVERIFY(text.contains("target (undesirable):\n[["));
    // Row 1's KL response is row 3's, the last of its batch.
    QVERIFY2(text.contains("Name a primary colour.<|im_end|>\n<|im_start|>assistant\n]]Blue, "
                           "mostly.<|im_end|>\n"),
             qPrintable(text));
    QVERIFY(text.contains("KL:\n[["));
    QVERIFY(text.contains("5 desirable, 5 undesirable"));
    QVERIFY(text.contains("skipped: 2 invalid conversations"));
  }
};

QTEST_MAIN(TestFeedbackData)
#include "tst_feedback_data.moc"
