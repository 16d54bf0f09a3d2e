// Datasets from dataset_info.json: alpaca / sharegpt / OpenAI rows and preference pairs, file
// forms and edge cases, errors with their locations, max_samples, val_size, eval_dataset, the
// cache, streaming memory, determinism across worker counts, the demo data and the preview.
#include <QtTest>

#include <fstream>

#include <nlohmann/json.hpp>

#include "studio/data/chat_template.h"
#include "studio/data/dataset.h"
#include "studio/data/preview.h"

using namespace studio;
using namespace studio::data;

namespace {

const std::string kFixtures = std::string(STUDIO_TEST_FIXTURES_DIR) + "/datasets";
const std::string kDemo = std::string(STUDIO_SOURCE_DIR) + "/resources/demo/data";

RunConfig config(const std::string& dir, std::vector<std::string> names, int64_t cutoff = 1024) {
  RunConfig cfg;
  cfg.dataset_dir = dir;
  cfg.dataset = std::move(names);
  cfg.template_name = "qwen";
  cfg.cutoff_len = cutoff;
  return cfg;
}

DatasetOptions no_cache() {
  DatasetOptions o;
  o.use_cache = false;
  o.num_workers = 2;
  return o;
}

Conversation conv(std::vector<Message> prompt, std::vector<std::string> answers, std::string system = {}) {
  Conversation c;
  c.prompt = std::move(prompt);
  for (auto& a : answers) c.response.push_back({Role::Assistant, std::move(a)});
  c.system = std::move(system);
  return c;
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A temporary dataset_dir holding dataset_info.json with one entry "d" for `file`.
std::string temp_dataset(const QTemporaryDir& dir, const std::string& file, const std::string& content,
                         const std::string& extra = "") {
  const std::string root = dir.path().toStdString();
  write(root + "/dataset_info.json",
        "{\"d\": {\"file_name\": \"" + file + "\"" + extra + "}}");
  write(root + "/" + file, content);
  return root;
}

template <class F>
QString error_of(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return QString::fromStdString(e.what());
  }
  return "(no error)";
}

// One alpaca row; `meta` is a column no mapping reads.
std::string row_json(const std::string& instruction, const std::string& output, const std::string& meta = {}) {
  nlohmann::json row = {{"instruction", instruction}, {"output", output}};
  if (!meta.empty()) row["meta"] = meta;
  return row.dump();
}

int64_t status_kb(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(std::strlen(key) + 1));
  return -1;
}

}  // namespace

class TestDataset : public QObject {
  Q_OBJECT

 private:
  std::optional<Tokenizer> tok_;
  const Tokenizer& tok() { return *tok_; }
  TokenizedSample expected(const Conversation& c, int64_t cutoff = 1024) {
    EncodeOptions opt;
    opt.cutoff_len = cutoff;
    return TemplateEncoder(find_template("qwen"), tok()).encode_supervised(c, opt).sample;
  }
  PairSample expected_pair(const Conversation& c) {
    return TemplateEncoder(find_template("qwen"), tok()).encode_pairwise(c, {}).pair;
  }

 private slots:
  void initTestCase() {
    tok_ = Tokenizer::load(std::string(STUDIO_TEST_FIXTURES_DIR) + "/tokenizers/qwen2-style");
  }

  void alpacaColumns() {
    const SftData d = load_sft_data(config(kFixtures, {"alpaca_demo"}), tok(), no_cache());
    QCOMPARE(d.train.size(), std::size_t(3));
    QVERIFY(d.train[0].input_ids == expected(conv({{Role::User, "Reverse the word.\nplant"}}, {"tnalp"})).input_ids);
    const auto history = conv({{Role::User, "What is 1+1?"}, {Role::Assistant, "2"}, {Role::User, "Say hi."}},
                              {"hi"}, "Be brief.");
    QVERIFY(d.train[1].labels == expected(history).labels);
    QVERIFY(d.train[1].input_ids == expected(history).input_ids);
    QVERIFY(d.train[2].input_ids == expected(conv({{Role::User, "Ünïcödé ✓ 漢字"}}, {"ok 🙂"})).input_ids);
    QCOMPARE(d.stats.samples, int64_t(3));
    QVERIFY(d.eval.empty());
  }

  // Content decides the form: this .json file holds JSON lines (with a blank line).
  void jsonLinesInJsonFile() {
    const SftData d = load_sft_data(config(kFixtures, {"alpaca_lines"}), tok(), no_cache());
    QCOMPARE(d.train.size(), std::size_t(3));
    QVERIFY(d.train[1].input_ids == expected(conv({{Role::User, "Add the numbers.\n12 + 30"}}, {"42"})).input_ids);
  }

  void sharegptAndOpenAI() {
    const SftData chat = load_sft_data(config(kFixtures, {"chat_demo"}), tok(), no_cache());
    QCOMPARE(chat.train.size(), std::size_t(2));
    const auto two = conv({{Role::User, "Hi"}, {Role::Assistant, "Hello!"}, {Role::User, "Sum 2+2"}}, {"4"}, "Be brief.");
    QVERIFY(chat.train[0].input_ids == expected(two).input_ids);
    QVERIFY(chat.train[0].labels == expected(two).labels);
    QCOMPARE(chat.stats.skipped_invalid, int64_t(2));  // LF drops these too
    QVERIFY(QString::fromStdString(chat.stats.warnings.at(0)).contains("row 2 skipped"));
    QVERIFY(QString::fromStdString(chat.stats.warnings.at(1)).contains("does not end with an answer"));

    const SftData openai = load_sft_data(config(kFixtures, {"openai_demo"}), tok(), no_cache());
    QCOMPARE(openai.train.size(), std::size_t(2));
    QVERIFY(openai.train[0].input_ids == expected(conv({{Role::User, "Hi"}}, {"Hello!"}, "Be brief.")).input_ids);
    const SftData tagged = load_sft_data(config(kFixtures, {"openai_formatting"}), tok(), no_cache());
    QVERIFY(tagged.train[1].input_ids == openai.train[1].input_ids);
  }

  // LLaMA-Factory's enable_thinking is not a typed key: it is read from the YAML as written.
  void enableThinkingFromYaml() {
    RunConfig cfg = config(kFixtures, {"alpaca_lines"});
    cfg.template_name = "qwen3";
    cfg.extra_keys.push_back({"enable_thinking", {"false"}, 30});
    const SftData d = load_sft_data(cfg, tok(), no_cache());
    EncodeOptions opt;
    opt.enable_thinking = false;
    const auto want = TemplateEncoder(find_template("qwen3"), tok())
                          .encode_supervised(conv({{Role::User, "Uppercase the word.\nriver"}}, {"RIVER"}), opt);
    QVERIFY(d.train[0].input_ids == want.sample.input_ids);
    QVERIFY(d.train[0].labels == want.sample.labels);
  }

  void rankingBothFormats() {
    RunConfig cfg = config(kFixtures, {"dpo_alpaca", "dpo_sharegpt"});
    cfg.stage = Stage::Dpo;
    const PairData d = load_pair_data(cfg, tok(), no_cache());
    QCOMPARE(d.train.size(), std::size_t(3));
    const PairSample a = expected_pair(conv({{Role::User, "Add the numbers.\n12 + 30"}}, {"42", "43"}));
    QVERIFY(d.train[0].chosen.input_ids == a.chosen.input_ids);
    QVERIFY(d.train[0].rejected.labels == a.rejected.labels);
    QCOMPARE(d.train[0].prompt_len, a.prompt_len);
    const PairSample s = expected_pair(
        conv({{Role::User, "Hi"}, {Role::Assistant, "Hello!"}, {Role::User, "Sum 2+2"}}, {"4", "5"}));
    QVERIFY(d.train[2].chosen.input_ids == s.chosen.input_ids);
    QVERIFY(d.train[2].rejected.input_ids == s.rejected.input_ids);
    QCOMPARE(error_of([&] { load_sft_data(config(kFixtures, {"dpo_alpaca"}), tok(), no_cache()); }),
             QString("dataset 'dpo_alpaca' holds preference pairs (\"ranking\": true); stage sft needs plain answers"));
    QVERIFY(error_of([&] { load_pair_data(config(kFixtures, {"alpaca_demo"}), tok(), no_cache()); })
                .contains("dataset 'alpaca_demo' has no preference pairs"));
  }

  void missingColumnNamesTheMapping() {
    QCOMPARE(error_of([&] { load_sft_data(config(kFixtures, {"missing_output"}), tok(), no_cache()); }),
             QString::fromStdString("dataset 'missing_output' (" + kFixtures +
                                    "/missing_output.json:4): row 3 has no column 'output' (columns mapping: "
                                    "response -> output (default); the row has: input, instruction) (fix the "
                                    "row, or set skip_bad_rows to leave such rows out)"));
  }

  void infoErrors_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<QString>("error");
    QTest::newRow("unknown formatting") << "bad_formatting" << "formatting 'parquet' is unknown (allowed: alpaca, sharegpt, openai)";
    QTest::newRow("hub dataset") << "hub_only" << "'hf_hub_url' datasets are not downloaded here";
    QTest::newRow("unknown name") << "nope" << "dataset 'nope' is not in";
  }

  void infoErrors() {
    QFETCH(QString, name);
    QFETCH(QString, error);
    const QString got = error_of([&] { load_sft_data(config(kFixtures, {name.toStdString()}), tok(), no_cache()); });
    QVERIFY2(got.contains(error), qPrintable(got));
  }

  void fileEdgeCases_data() {
    QTest::addColumn<QByteArray>("content");
    QTest::addColumn<int>("samples");
    QTest::addColumn<QString>("error");  // expected in the message when samples < 0
    const QByteArray row = R"({"instruction": "Say hi.", "output": "hi"})";
    QTest::newRow("empty file") << QByteArray() << -1 << "gave no training samples (the files have no rows)";
    QTest::newRow("only whitespace lines") << QByteArray("\n  \n\t\r\n") << -1 << "the files have no rows";
    QTest::newRow("BOM and CRLF lines") << "\xEF\xBB\xBF" + row + "\r\n\r\n" + row + "\r\n" << 2 << "";
    QTest::newRow("BOM and a JSON array") << "\xEF\xBB\xBF [\r\n" + row + "\r\n]" << 1 << "";
    QTest::newRow("malformed line") << row + "\n{\"instruction\": \"x\", \"output\": }\n" << -1
                                    << "data.json:2:32: malformed JSON: found '}' where a value "
                                       "should be (a value missing, or a comma too many before it?)";
    QTest::newRow("malformed array") << "[" + row + ",\n{oops}]" << -1
                                     << "data.json:2:2: malformed JSON: found 'o', which is not a "
                                        "JSON value";
    // Python's json writes a float column's NaN and infinities as bare words: rows, not errors.
    QTest::newRow("NaN and Infinity in a column, JSON lines")
        << row + "\n" + R"({"instruction": "x", "output": "y", "score": NaN, "w": [-Infinity, Infinity]})"
        << 2 << "";
    QTest::newRow("NaN and Infinity in a column, JSON array")
        << "[" + row + ",\n" + R"({"instruction": "x", "output": "y", "score": NaN, "w": [-Infinity, Infinity]}])"
        << 2 << "";
    QTest::newRow("NaN spelt in a string, JSON array")
        << "[" + row + ",\n" + "{\"instruction\": \"NaN -Infinity \\\"NaN\\\"\", \"output\": \"Infinity\"}]" << 2 << "";
    QTest::newRow("NaN as a key, JSON array")
        << "[" + row + ",\n{NaN: 1}]" << -1
        << "data.json:2: malformed JSON: found the word for a non-finite number where a key";
    QTest::newRow("nan in lower case, JSON array")
        << "[" + row + ",\n" + R"({"instruction": "x", "output": "y", "score": nan}])" << -1
        << "data.json:2:47: malformed JSON: found 'na', which is not a JSON value";
    QTest::newRow("wrong type") << QByteArray(R"({"instruction": "x", "output": 5})") << -1
                                << "row 1 column 'output' is a number, expected a string";
    QTest::newRow("row not an object") << QByteArray("[1]") << -1 << "row 1 is a number, expected a JSON object";
    QTest::newRow("history not pairs") << QByteArray(R"({"instruction": "x", "output": "y", "history": ["q"]})")
                                       << -1 << "column 'history' must be a list of [query, answer] pairs";
    QTest::newRow("not JSON") << QByteArray("instruction,output\nx,y\n") << -1 << "data.json:1: not JSON rows";
    QTest::newRow("tools") << QByteArray(R"({"instruction": "x", "output": "y", "tools": "[{}]"})") << -1
                           << "holds tool definitions, which are not supported";
  }

  void fileEdgeCases() {
    QFETCH(QByteArray, content);
    QFETCH(int, samples);
    QFETCH(QString, error);
    QTemporaryDir dir;
    const std::string root = temp_dataset(dir, "data.json", content.toStdString(),
                                          R"(, "columns": {"history": "history", "tools": "tools"})");
    if (samples < 0) {
      const QString got = error_of([&] { load_sft_data(config(root, {"d"}), tok(), no_cache()); });
      QVERIFY2(got.contains(error), qPrintable(got));
      return;
    }
    const SftData d = load_sft_data(config(root, {"d"}), tok(), no_cache());
    QCOMPARE(int(d.train.size()), samples);
    QVERIFY(d.train[0].input_ids == expected(conv({{Role::User, "Say hi."}}, {"hi"})).input_ids);
  }

  void skipBadRows() {
    QTemporaryDir dir;
    const std::string rows = "{\"instruction\": \"a\", \"output\": \"b\"}\n{broken\n"
                             "{\"instruction\": \"c\"}\n{\"instruction\": \"d\", \"output\": \"e\"}\n";
    const std::string root = temp_dataset(dir, "data.jsonl", rows);
    DatasetOptions opt = no_cache();
    opt.skip_bad_rows = true;
    std::vector<std::string> seen;
    opt.on_warning = [&](const std::string& w) { seen.push_back(w); };
    const SftData d = load_sft_data(config(root, {"d"}), tok(), opt);
    QCOMPARE(d.train.size(), std::size_t(2));
    QCOMPARE(d.stats.skipped_bad_rows, int64_t(2));
    QCOMPARE(seen.size(), std::size_t(2));
    QVERIFY(QString::fromStdString(seen[0]).startsWith(QString::fromStdString(root + "/data.jsonl:2:2: malformed JSON")));
  }

  void maxSamplesAndOrder() {
    RunConfig cfg = config(kFixtures, {"alpaca_demo", "alpaca_lines"});
    cfg.max_samples = 2;
    const SftData d = load_sft_data(cfg, tok(), no_cache());
    const SftData a = load_sft_data(config(kFixtures, {"alpaca_demo"}), tok(), no_cache());
    const SftData b = load_sft_data(config(kFixtures, {"alpaca_lines"}), tok(), no_cache());
    QCOMPARE(d.train.size(), std::size_t(4));
    QVERIFY(d.train[0].input_ids == a.train[0].input_ids);
    QVERIFY(d.train[1].input_ids == a.train[1].input_ids);
    QVERIFY(d.train[2].input_ids == b.train[0].input_ids);
    QVERIFY(d.train[3].input_ids == b.train[1].input_ids);
  }

  void valSize_data() {
    QTest::addColumn<double>("valSize");
    QTest::addColumn<int>("evalCount");
    QTest::newRow("fraction rounds up") << 0.25 << 2;
    QTest::newRow("count") << 3.0 << 3;
  }

  void valSize() {
    QFETCH(double, valSize);
    QFETCH(int, evalCount);
    RunConfig cfg = config(kFixtures, {"alpaca_demo", "alpaca_lines"});
    const SftData all = load_sft_data(cfg, tok(), no_cache());
    cfg.val_size = valSize;
    const SftData d = load_sft_data(cfg, tok(), no_cache());
    QCOMPARE(int(d.eval.size()), evalCount);
    QCOMPARE(d.train.size() + d.eval.size(), all.train.size());
    // Both sets keep file order, and together they are the whole data.
    std::size_t ti = 0, ei = 0;
    for (const auto& s : all.train) {
      if (ti < d.train.size() && d.train[ti].input_ids == s.input_ids) ++ti;
      else if (ei < d.eval.size() && d.eval[ei].input_ids == s.input_ids) ++ei;
    }
    QCOMPARE(ti + ei, all.train.size());
    const SftData again = load_sft_data(cfg, tok(), no_cache());
    QVERIFY(again.eval.front().input_ids == d.eval.front().input_ids);  // seeded
  }

  void valSizeErrorsAndEvalDataset() {
    RunConfig cfg = config(kFixtures, {"alpaca_demo"});
    cfg.val_size = 3;
    QVERIFY(error_of([&] { load_sft_data(cfg, tok(), no_cache()); }).contains("leaving none to train on"));
    cfg.eval_dataset = {"alpaca_lines"};
    QVERIFY(error_of([&] { load_sft_data(cfg, tok(), no_cache()); }).contains("val_size and eval_dataset both set"));
    cfg.val_size = 0;
    const SftData d = load_sft_data(cfg, tok(), no_cache());
    QCOMPARE(d.train.size(), std::size_t(3));
    QCOMPARE(d.eval.size(), std::size_t(3));
    QCOMPARE(d.stats.samples, int64_t(6));
  }

  void promptBeyondCutoff() {
    QTemporaryDir dir;
    std::string words;
    for (int i = 0; i < 60; ++i) words += "word" + std::to_string(i) + " ";
    const std::string root = temp_dataset(dir, "data.jsonl", row_json(words, "ok"));
    const SftData d = load_sft_data(config(root, {"d"}, 16), tok(), no_cache());
    QCOMPARE(d.train[0].input_ids.size(), std::size_t(16));
    QVERIFY(d.train[0].labels == expected(conv({{Role::User, words}}, {"ok"}), 16).labels);
    QCOMPARE(d.train[0].labels.back(), d.train[0].input_ids.back());  // the answer is kept whole
    QCOMPARE(d.stats.truncated, int64_t(1));
    QCOMPARE(d.stats.lengths.above_cutoff(), int64_t(1));
  }

  void cacheHitsAndInvalidates() {
    QTemporaryDir dir;
    std::string rows;
    for (int i = 0; i < 40; ++i)
      rows += row_json("Reverse " + std::to_string(i), "done") + "\n";
    const std::string root = temp_dataset(dir, "data.jsonl", rows);
    RunConfig cfg = config(root, {"d"});
    DatasetOptions opt;  // default cache folder: <dataset_dir>/.studio_cache
    const SftData first = load_sft_data(cfg, tok(), opt);
    QCOMPARE(first.stats.datasets_from_cache, int64_t(0));
    QVERIFY(!QDir(QString::fromStdString(root + "/.studio_cache")).entryList({"d.sft.*.bin"}).isEmpty());
    const SftData second = load_sft_data(cfg, tok(), opt);
    QCOMPARE(second.stats.datasets_from_cache, int64_t(1));
    QVERIFY(second.train.size() == first.train.size());
    for (std::size_t i = 0; i < first.train.size(); ++i) {
      QVERIFY(second.train[i].input_ids == first.train[i].input_ids);
      QVERIFY(second.train[i].labels == first.train[i].labels);
    }
    QCOMPARE(second.stats.tokens, first.stats.tokens);
    QVERIFY(second.stats.lengths.counts == first.stats.lengths.counts);

    cfg.cutoff_len = 8;
    QCOMPARE(load_sft_data(cfg, tok(), opt).stats.datasets_from_cache, int64_t(0));
    QCOMPARE(load_sft_data(cfg, tok(), opt).stats.datasets_from_cache, int64_t(1));
    write(root + "/data.jsonl", rows + row_json("one more", "row") + "\n");
    const SftData edited = load_sft_data(cfg, tok(), opt);
    QCOMPARE(edited.stats.datasets_from_cache, int64_t(0));
    QCOMPARE(edited.train.size(), std::size_t(41));
    cfg.overwrite_cache = true;
    QCOMPARE(load_sft_data(cfg, tok(), opt).stats.datasets_from_cache, int64_t(0));
  }

  // 50 MB of rows (with a big unused column) stream through, as JSON lines and as one JSON
  // array: the peak RSS grows far less than the file, let alone its parsed DOM.
  void streamsLargeFileWithBoundedMemory_data() {
    QTest::addColumn<bool>("array");
    QTest::newRow("json lines") << false;
    QTest::newRow("json array") << true;
  }

  void streamsLargeFileWithBoundedMemory() {
#if defined(__SANITIZE_ADDRESS__)
    QSKIP("AddressSanitizer quarantines freed memory: RSS says nothing about streaming");
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    QSKIP("AddressSanitizer quarantines freed memory: RSS says nothing about streaming");
#endif
#endif
    QFETCH(bool, array);
    QTemporaryDir dir;
    const std::string root = dir.path().toStdString();
    write(root + "/dataset_info.json", R"({"d": {"file_name": "big.json"}})");
    const std::string filler(4000, 'x');
    int rows = 0;
    {
      std::ofstream out(root + "/big.json", std::ios::binary);
      out << (array ? "[\n" : "");
      for (std::size_t bytes = 0; bytes < 50u << 20; ++rows) {
        const std::string line = row_json("Echo " + std::to_string(rows % 97), "ok", filler);
        out << (array && rows > 0 ? ",\n" : "") << line << (array ? "" : "\n");
        bytes += line.size();
      }
      out << (array ? "\n]\n" : "");
    }
    std::ofstream("/proc/self/clear_refs") << "5";  // resets VmHWM to the current RSS
    const int64_t before = status_kb("VmHWM:");
    DatasetOptions opt;
    opt.cache_dir = root + "/cache";
    const SftData d = load_sft_data(config(root, {"d"}), tok(), opt);
    const int64_t growth_mb = (status_kb("VmHWM:") - before) / 1024;
    qInfo("50 MB file: peak RSS grew by %lld MB", static_cast<long long>(growth_mb));
    QCOMPARE(int(d.train.size()), rows);
    QVERIFY2(growth_mb < 40, qPrintable(QString("peak RSS grew by %1 MB").arg(growth_mb)));
  }

  void deterministicAcrossWorkers() {
    RunConfig cfg = config(kDemo, {"demo_sft_sharegpt", "demo_sft"});
    DatasetOptions one = no_cache();
    one.num_workers = 1;
    one.batch_rows = 7;
    DatasetOptions two = one;
    two.num_workers = 2;
    const SftData a = load_sft_data(cfg, tok(), one);
    const SftData b = load_sft_data(cfg, tok(), two);
    QCOMPARE(a.train.size(), std::size_t(3000));
    QCOMPARE(a.train.size(), b.train.size());
    for (std::size_t i = 0; i < a.train.size(); ++i) {
      QVERIFY(a.train[i].input_ids == b.train[i].input_ids);
      QVERIFY(a.train[i].labels == b.train[i].labels);
    }
  }

  void demoPreferenceData() {
    RunConfig cfg = config(kDemo, {"demo_dpo"});
    cfg.stage = Stage::Dpo;
    cfg.val_size = 0.1;
    const PairData d = load_pair_data(cfg, tok(), no_cache());
    QCOMPARE(d.train.size(), std::size_t(900));
    QCOMPARE(d.eval.size(), std::size_t(100));
    for (const PairSample& p : d.train) QVERIFY(p.chosen.input_ids != p.rejected.input_ids);
  }

  void previewMarksMaskedSpans() {
    RunConfig cfg = config(kFixtures, {"alpaca_demo"}, 24);
    const PreviewReport r = preview(cfg, tok(), 2, no_cache());
    QCOMPARE(r.samples.size(), std::size_t(2));
    QCOMPARE(r.train_samples, int64_t(3));
    const PreviewSequence& s = r.samples[0].sequence;
    QCOMPARE(s.spans.size(), std::size_t(2));
    QVERIFY(!s.spans[0].learned);
    QCOMPARE(QString::fromStdString(s.spans[1].text), QString("tnalp<|im_end|>\n"));
    QVERIFY(s.spans[1].learned);
    QVERIFY(r.samples[0].truncated);  // the default system prompt alone is long
    const QString text = QString::fromStdString(format_preview_text(r));
    QVERIFY2(text.contains("[[<|im_start|>system\nYou are Qwen"), qPrintable(text));
    QVERIFY(text.contains("--- alpaca_demo row 1:"));
    QVERIFY(text.contains("truncated to cutoff_len 24"));
    QVERIFY(text.contains("Lengths before truncation (cutoff_len 24):"));

    cfg = config(kFixtures, {"dpo_alpaca"});
    cfg.stage = Stage::Dpo;
    const QString pairs = QString::fromStdString(format_preview_text(preview(cfg, tok(), 1, no_cache())));
    QVERIFY2(pairs.contains("rejected:\n[[") && pairs.contains("]]43<|im_end|>"), qPrintable(pairs));
  }
};

QTEST_MAIN(TestDataset)
#include "tst_dataset.moc"
