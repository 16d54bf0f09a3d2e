// Datasets from dataset_info.json: alpaca / sharegpt / OpenAI rows and preference pairs, file
// forms and edge cases, errors with their locations, max_samples, val_size, eval_dataset, the
// cache, streaming memory, determinism across worker counts, the demo data and the preview.
// Stage pt's texts and blocks against LLaMA-Factory's pre-training pipeline
// (tests/reference/lf_pretrain.py, run with STUDIO_PYTHON).
#include <QtTest>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "reference_run.h"
#include "studio/data/chat_template.h"
#include "studio/data/dataset.h"
#include "studio/data/preview.h"

using namespace studio;
using namespace studio::data;
using studio::test::error_of;

namespace {

const std::string kFixtures = std::string(STUDIO_TEST_FIXTURES_DIR) + "/datasets";
const std::string kDemo = std::string(STUDIO_SOURCE_DIR) + "/resources/demo/data";
const std::string kPt = std::string(STUDIO_TEST_FIXTURES_DIR) + "/datasets_pt";
const std::string kTokenizers = std::string(STUDIO_TEST_FIXTURES_DIR) + "/tokenizers";

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

// One alpaca row; `meta` is a column no mapping reads.
std::string row_json(const std::string& instruction, const std::string& output, const std::string& meta = {}) {
  nlohmann::json row = {{"instruction", instruction}, {"output", output}};
  if (!meta.empty()) row["meta"] = meta;
  return row.dump();
}

// Stage pt on the fixtures of tests/fixtures/datasets_pt. `packing` as a YAML file writes it:
// nullopt leaves it out (pt packs, in blocks of cutoff_len); true packs in blocks of
// cutoff_len - 1, as LLaMA-Factory.
RunConfig pt_config(std::vector<std::string> names, int64_t cutoff, std::optional<bool> packing,
                    std::string tmpl = {}) {
  RunConfig cfg;
  cfg.stage = Stage::Pt;
  cfg.dataset_dir = kPt;
  cfg.dataset = std::move(names);
  cfg.template_name = std::move(tmpl);
  cfg.cutoff_len = cutoff;
  if (packing) {
    cfg.packing = *packing;
    cfg.source.key_pos["packing"] = {};
  }
  return cfg;
}

std::optional<bool> packing_of(const QString& yaml) {
  if (yaml.isEmpty()) return std::nullopt;
  return yaml == "true";
}

// LLaMA-Factory's pre-training pipeline on `request` (tests/reference/lf_pretrain.py). The test
// fails, never skips, when the interpreter or its packages are missing: scripts/setup.sh
// installs them.
std::optional<nlohmann::json> lf_pretrain(const nlohmann::json& request, QString& error) {
  return studio::test::run_reference(QStringLiteral(STUDIO_PYTHON), "lf_pretrain.py",
                                     request.dump(), error);
}

std::vector<int64_t> ids_of(const nlohmann::json& ids) {
  return ids.get<std::vector<int64_t>>();
}

QString ids_text(const std::vector<int64_t>& ids) {
  QStringList out;
  for (int64_t id : ids) out << QString::number(id);
  return "[" + out.join(", ") + "]";
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
  // The fixture tokenizer `name`; "qwen2-base-style" is qwen2-style with <|endoftext|> as its
  // eos (as Qwen2.5's base models), written into `tmp`.
  static std::string tokenizer_folder(const QString& name, const QTemporaryDir& tmp) {
    if (name != "qwen2-base-style") return kTokenizers + "/" + name.toStdString();
    const std::string root = tmp.path().toStdString();
    QFile::copy(QString::fromStdString(kTokenizers + "/qwen2-style/tokenizer.json"),
                QString::fromStdString(root + "/tokenizer.json"));
    write(root + "/tokenizer_config.json",
          R"({"bos_token": null, "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>"})");
    return root;
  }
  // "" when `got` holds LLaMA-Factory's sequences `want` token for token, with the labels its pt
  // collator makes of them (`labels`: every token, but the pad token's occurrences -100).
  static QString mismatch(const std::vector<TokenizedSample>& got, const nlohmann::json& want,
                          const nlohmann::json& labels) {
    if (got.size() != want.size())
      return QString("%1 sequences, LLaMA-Factory has %2").arg(got.size()).arg(want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (got[i].input_ids != ids_of(want[i]))
        return QString("sequence %1: %2\nLLaMA-Factory: %3")
            .arg(i)
            .arg(ids_text(got[i].input_ids), ids_text(ids_of(want[i])));
      if (got[i].labels != ids_of(labels[i]))
        return QString("sequence %1 labels: %2\nLLaMA-Factory's collator: %3")
            .arg(i)
            .arg(ids_text(got[i].labels), ids_text(ids_of(labels[i])));
      if (!got[i].segment_lengths.empty()) return QString("sequence %1 has segments").arg(i);
    }
    return {};
  }
  // The texts of pt_texts.jsonl, as stage pt reads them.
  static std::vector<std::string> fixture_texts() {
    std::ifstream in(kPt + "/pt_texts.jsonl");
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);)
      out.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
    return out;
  }
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

  // Stage pt against LLaMA-Factory's own pipeline (its processor verbatim, datasets' batched map)
  // on the real tokenizer fixtures: the eos each text ends with, bos, packing per batch and
  // shard, truncation, max_samples, the alpaca and sharegpt texts, eval_dataset.
  void ptMatchesLlamaFactory_data() {
    QTest::addColumn<QString>("tokenizer");
    QTest::addColumn<QString>("tmpl");
    QTest::addColumn<QString>("packing");  // as the YAML writes it; "": not written (pt packs)
    QTest::addColumn<int>("cutoff");
    QTest::addColumn<int>("batch");        // preprocessing_batch_size
    QTest::addColumn<int>("workers");      // preprocessing_num_workers; 0: not set
    QTest::addColumn<int>("maxSamples");   // 0: not set
    QTest::addColumn<QStringList>("datasets");
    QTest::addColumn<QStringList>("evalDatasets");
    QTest::addColumn<QString>("eos");      // what ends every text
    QTest::addColumn<bool>("bos");         // the tokenizer adds a bos
    const QStringList texts = {"pt_texts", "pt_chat"};
    const QStringList none;
    QTest::newRow("qwen2, packed in one batch")
        << "qwen2-style" << "" << "" << 16 << 1000 << 0 << 0 << texts << none << "<|im_end|>" << false;
    QTest::newRow("qwen2, packed in batches of 3: each batch's remainder dropped")
        << "qwen2-style" << "" << "" << 16 << 3 << 0 << 0 << texts << none << "<|im_end|>" << false;
    // 18 rows in 4 shards of 5, 5, 4 and 4: batches of 3 start at rows 0, 3, 5, 8, 10, 13, 14, 17.
    QTest::newRow("qwen2, batches of 3 in 4 shards (preprocessing_num_workers)")
        << "qwen2-style" << "" << "" << 16 << 3 << 4 << 0 << texts << none << "<|im_end|>" << false;
    QTest::newRow("qwen2, packing: true written: blocks of cutoff_len - 1")
        << "qwen2-style" << "" << "true" << 16 << 3 << 0 << 0 << texts << none << "<|im_end|>" << false;
    QTest::newRow("qwen2, packing: false: long texts truncated")
        << "qwen2-style" << "" << "false" << 16 << 1000 << 0 << 0 << texts << none << "<|im_end|>" << false;
    QTest::newRow("llama2 add_bos_token, packed: bos over each block's first token")
        << "llama2-style" << "" << "" << 16 << 4 << 0 << 0 << texts << none << "</s>" << true;
    QTest::newRow("llama2 add_bos_token, unpacked: the bos text in front")
        << "llama2-style" << "" << "false" << 24 << 1000 << 0 << 0 << texts << none << "</s>" << true;
    QTest::newRow("mistral metaspace add_bos_token, unpacked")
        << "mistral-metaspace-style" << "" << "false" << 24 << 1000 << 0 << 0 << texts << none
        << "</s>" << true;
    QTest::newRow("template llama3: the literal <|end_of_text|>, packed")
        << "llama3-style" << "llama3" << "" << 16 << 5 << 0 << 0 << texts << none
        << "<|end_of_text|>" << false;
    QTest::newRow("template llama3 on qwen2: <|end_of_text|> as plain text")
        << "qwen2-style" << "llama3" << "false" << 32 << 1000 << 0 << 0 << texts << none
        << "<|end_of_text|>" << false;
    QTest::newRow("template qwen replaces the tokenizer's eos")
        << "qwen2-base-style" << "qwen" << "" << 16 << 1000 << 0 << 0 << texts << none
        << "<|im_end|>" << false;
    QTest::newRow("no template: the tokenizer's eos")
        << "qwen2-base-style" << "" << "" << 16 << 1000 << 0 << 0 << texts << none
        << "<|endoftext|>" << false;
    QTest::newRow("max_samples caps each dataset's rows before packing")
        << "qwen2-style" << "" << "" << 8 << 4 << 0 << 3
        << QStringList{"pt_texts", "pt_chat", "pt_alpaca"} << none << "<|im_end|>" << false;
    QTest::newRow("alpaca: prompt and query joined, the first history query; no answer needed")
        << "qwen2-style" << "" << "false" << 64 << 1000 << 0 << 0 << QStringList{"pt_alpaca"} << none
        << "<|im_end|>" << false;
    QTest::newRow("eval_dataset packed on its own")
        << "qwen2-style" << "" << "" << 8 << 3 << 0 << 0 << QStringList{"pt_texts"}
        << QStringList{"pt_chat", "pt_alpaca"} << "<|im_end|>" << false;
  }

  void ptMatchesLlamaFactory() {
    QFETCH(QString, tokenizer);
    QFETCH(QString, tmpl);
    QFETCH(QString, packing);
    QFETCH(int, cutoff);
    QFETCH(int, batch);
    QFETCH(int, workers);
    QFETCH(int, maxSamples);
    QFETCH(QStringList, datasets);
    QFETCH(QStringList, evalDatasets);
    QFETCH(QString, eos);
    QFETCH(bool, bos);
    QTemporaryDir tmp;
    const std::string folder = tokenizer_folder(tokenizer, tmp);
    std::vector<std::string> names, eval_names;
    for (const QString& n : datasets) names.push_back(n.toStdString());
    for (const QString& n : evalDatasets) eval_names.push_back(n.toStdString());
    RunConfig cfg = pt_config(names, cutoff, packing_of(packing), tmpl.toStdString());
    cfg.eval_dataset = eval_names;
    cfg.preprocessing_batch_size = batch;
    if (workers > 0) cfg.preprocessing_num_workers = workers;
    if (maxSamples > 0) cfg.max_samples = maxSamples;
    DatasetOptions opt = no_cache();
    opt.num_workers = 3;  // tokenizer threads and their batches never change the sequences
    opt.batch_rows = 2;
    const SftData d = load_pt_data(cfg, Tokenizer::load(folder), opt);

    const nlohmann::json request = {
        {"tokenizer", folder}, {"template", tmpl.toStdString()}, {"dataset_dir", kPt},
        {"dataset", names}, {"eval_dataset", eval_names}, {"cutoff_len", cutoff},
        {"packing", packing.isEmpty() ? nlohmann::json() : nlohmann::json(packing == "true")},
        {"preprocessing_batch_size", batch},
        {"preprocessing_num_workers", workers > 0 ? nlohmann::json(workers) : nlohmann::json()},
        {"max_samples", maxSamples > 0 ? nlohmann::json(maxSamples) : nlohmann::json()}};
    QString error;
    const auto lf = lf_pretrain(request, error);
    QVERIFY2(lf, qPrintable(error));
    QCOMPARE(QString::fromStdString(lf->at("eos_text").get<std::string>()), eos);
    QCOMPARE(lf->at("add_bos_token").get<bool>(), bos);
    QVERIFY(!d.train.empty());
    const QString train = mismatch(d.train, lf->at("train"), lf->at("train_labels"));
    QVERIFY2(train.isEmpty(), qPrintable("train: " + train));
    const QString eval = mismatch(d.eval, lf->at("eval"), lf->at("eval_labels"));
    QVERIFY2(eval.isEmpty(), qPrintable("eval: " + eval));
    if (packing != "false")
      for (const TokenizedSample& s : d.train)
        QCOMPARE(int(s.input_ids.size()), packing == "true" ? cutoff - 1 : cutoff);
    int64_t tokens = 0, learned = 0;
    for (const auto* set : {&d.train, &d.eval})
      for (const TokenizedSample& s : *set) {
        tokens += static_cast<int64_t>(s.input_ids.size());
        for (int64_t l : s.labels) learned += l != kIgnoreIndex;
      }
    QCOMPARE(d.stats.samples, int64_t(d.train.size() + d.eval.size()));
    QCOMPARE(d.stats.tokens, tokens);
    QCOMPARE(d.stats.learned_tokens, learned);
  }

  // Per text: the histogram of untruncated lengths; truncated counts the texts cut (unpacked).
  void ptStats_data() {
    QTest::addColumn<bool>("packing");
    QTest::newRow("packed") << true;
    QTest::newRow("unpacked") << false;
  }

  void ptStats() {
    QFETCH(bool, packing);
    const RunConfig cfg = pt_config({"pt_texts"}, 16, packing ? std::nullopt : std::optional(false));
    const SftData d = load_pt_data(cfg, tok(), no_cache());
    int64_t longer = 0, kept = 0, texts = 0;
    for (const std::string& t : fixture_texts()) {
      const auto n = static_cast<int64_t>(tok().encode(t + "<|im_end|>").size());
      longer += n > 16;
      kept += std::min<int64_t>(n, 16);
      ++texts;
    }
    QVERIFY(longer > 0);
    int64_t counted = 0;
    for (int64_t c : d.stats.lengths.counts) counted += c;
    QCOMPARE(counted, texts);
    QCOMPARE(d.stats.lengths.above_cutoff(), longer);
    QCOMPARE(d.stats.truncated, packing ? 0 : longer);
    QCOMPARE(d.stats.samples, packing ? int64_t(d.train.size()) : texts);
    QCOMPARE(d.stats.tokens, packing ? int64_t(d.train.size()) * 16 : kept);
    QCOMPARE(d.stats.learned_tokens, d.stats.tokens);
  }

  // LF splits after preprocessing: val_size holds out blocks, seeded, both sets in order.
  void ptValSizeSplitsBlocks() {
    RunConfig cfg = pt_config({"pt_texts", "pt_chat"}, 8, std::nullopt);
    const SftData all = load_pt_data(cfg, tok(), no_cache());
    cfg.val_size = 0.25;
    const SftData d = load_pt_data(cfg, tok(), no_cache());
    const std::size_t n = all.train.size();
    QVERIFY(n >= 8);
    QCOMPARE(d.eval.size(), static_cast<std::size_t>(std::ceil(0.25 * static_cast<double>(n))));
    QCOMPARE(d.train.size() + d.eval.size(), n);
    std::size_t ti = 0, ei = 0;
    for (const auto& s : all.train) {
      if (ti < d.train.size() && d.train[ti].input_ids == s.input_ids) ++ti;
      else if (ei < d.eval.size() && d.eval[ei].input_ids == s.input_ids) ++ei;
    }
    QCOMPARE(ti + ei, n);
    QCOMPARE(d.stats.samples, int64_t(n));
    const SftData again = load_pt_data(cfg, tok(), no_cache());
    for (std::size_t i = 0; i < d.eval.size(); ++i) QVERIFY(again.eval[i].input_ids == d.eval[i].input_ids);
    cfg.val_size = 3;
    QCOMPARE(load_pt_data(cfg, tok(), no_cache()).eval.size(), std::size_t(3));
    cfg.eval_dataset = {"pt_alpaca"};
    QVERIFY(error_of([&] { load_pt_data(cfg, tok(), no_cache()); })
                .contains("val_size and eval_dataset both set"));
  }

  // A row without an answer is a pt text; sft keeps refusing (alpaca) or skipping (sharegpt) it.
  void ptNeedsNoAnswerSftStillDoes() {
    const SftData alpaca = load_pt_data(pt_config({"pt_alpaca"}, 64, false), tok(), no_cache());
    QCOMPARE(alpaca.train.size(), std::size_t(4));
    auto text = [&](const std::string& t) {
      const auto ids = tok().encode(t + "<|im_end|>");
      return std::vector<int64_t>(ids.begin(), ids.end());
    };
    QVERIFY(alpaca.train[0].input_ids == text("Add the numbers.\n12 + 30"));
    QVERIFY(alpaca.train[1].input_ids == text("What is 1+1?"));  // LF: the first history query
    QVERIFY(alpaca.train[2].input_ids == text("Only an input here."));
    QVERIFY(alpaca.train[3].input_ids == text("No answer at all."));
    QVERIFY(error_of([&] { load_sft_data(config(kPt, {"pt_alpaca"}), tok(), no_cache()); })
                .contains("pt_alpaca.jsonl:3): row 3 has no column 'output'"));

    const SftData chat = load_pt_data(pt_config({"pt_chat"}, 64, false), tok(), no_cache());
    QCOMPARE(chat.train.size(), std::size_t(4));
    QVERIFY(chat.train[0].input_ids == text("First turn of a chat."));  // after the system message
    QVERIFY(chat.train[1].input_ids == text("A lone user message."));
    const SftData sft = load_sft_data(config(kPt, {"pt_chat"}), tok(), no_cache());
    QCOMPARE(sft.train.size(), std::size_t(3));
    QCOMPARE(sft.stats.skipped_invalid, int64_t(1));
  }

  void ptBadRows_data() {
    QTest::addColumn<QByteArray>("content");
    QTest::addColumn<QString>("entry");  // the dataset_info.json entry's other keys
    QTest::addColumn<QString>("error");  // after "dataset 'd' (<dir>/data.jsonl:"
    const QString text = R"(, "columns": {"prompt": "text"})";
    const QString chat = R"(, "formatting": "sharegpt")";
    QTest::newRow("no text column")
        << QByteArray("{\"text\": \"a\"}\n\n{\"body\": \"b\"}\n") << text
        << "3): row 2 has no column 'text' (columns mapping: prompt -> text; the row has: body)";
    QTest::newRow("text not a string") << QByteArray("{\"text\": 5}\n") << text
                                       << "1): row 1 column 'text' is a number, expected a string";
    QTest::newRow("row not an object") << QByteArray("{\"text\": \"a\"}\n[1]\n") << text
                                       << "2): row 2 is a array, expected a JSON object";
    QTest::newRow("sharegpt messages not a list")
        << QByteArray("{\"conversations\": \"hi\"}\n") << chat
        << "1): row 1 column 'conversations' is a string, expected a list of messages";
    QTest::newRow("sharegpt message without its text")
        << QByteArray("{\"conversations\": [{\"from\": \"human\"}]}\n") << chat
        << "1): row 1 message 1 has no 'value'";
  }

  void ptBadRows() {
    QFETCH(QByteArray, content);
    QFETCH(QString, entry);
    QFETCH(QString, error);
    QTemporaryDir dir;
    const std::string root = temp_dataset(dir, "data.jsonl", content.toStdString(), entry.toStdString());
    RunConfig cfg = pt_config({"d"}, 16, std::nullopt);
    cfg.dataset_dir = root;
    const QString got = error_of([&] { load_pt_data(cfg, tok(), no_cache()); });
    const QString where = QString::fromStdString("dataset 'd' (" + root + "/data.jsonl:");
    QVERIFY2(got.startsWith(where + error), qPrintable(got));
    QVERIFY2(got.endsWith("(fix the row, or set skip_bad_rows to leave such rows out)"), qPrintable(got));
  }

  void ptFixtureErrors() {
    QCOMPARE(error_of([&] { load_pt_data(pt_config({"pt_bad"}, 16, std::nullopt), tok(), no_cache()); }),
             QString::fromStdString("dataset 'pt_bad' (" + kPt + "/pt_bad.jsonl:3): row 3 has no column "
                                    "'text' (columns mapping: prompt -> text; the row has: content) (fix the "
                                    "row, or set skip_bad_rows to leave such rows out)"));
    DatasetOptions skip = no_cache();
    skip.skip_bad_rows = true;
    const SftData d = load_pt_data(pt_config({"pt_bad"}, 4, false), tok(), skip);
    QCOMPARE(d.train.size(), std::size_t(2));
    QCOMPARE(d.stats.skipped_bad_rows, int64_t(1));
    const RunConfig ranking = pt_config({"pt_texts", "pt_ranking"}, 16, std::nullopt);
    QCOMPARE(error_of([&] { load_pt_data(ranking, tok(), no_cache()); }),
             QString("dataset 'pt_ranking' holds preference pairs (\"ranking\": true); stage pt needs plain "
                     "texts (a prompt column, e.g. \"columns\": {\"prompt\": \"text\"})"));
    const RunConfig long_blocks = pt_config({"pt_chat"}, 4096, std::nullopt);
    const QString few = error_of([&] { load_pt_data(long_blocks, tok(), no_cache()); });
    QVERIFY2(few.startsWith("dataset 'pt_chat' gave no training blocks: its 4 texts hold ") &&
                 few.contains("Cannot find sufficient samples"),
             qPrintable(few));
    RunConfig sft = pt_config({"pt_texts"}, 16, std::nullopt);
    sft.stage = Stage::Sft;
    QVERIFY(error_of([&] { load_pt_data(sft, tok(), no_cache()); }).contains("this config's stage is sft"));
  }

  // pt's cache files sit beside sft's for the same dataset; every setting that changes a text's
  // tokens misses, while preprocessing_batch_size, applied after the cache, re-cuts the blocks.
  void ptCacheApartFromSft() {
    QTemporaryDir dir;
    std::string rows;
    for (int i = 0; i < 30; ++i) rows += row_json("Reverse " + std::to_string(i), "done") + "\n";
    const std::string root = temp_dataset(dir, "data.jsonl", rows);
    DatasetOptions opt;  // default cache folder: <dataset_dir>/.studio_cache
    const RunConfig sft = config(root, {"d"}, 64);
    QCOMPARE(load_sft_data(sft, tok(), opt).stats.datasets_from_cache, int64_t(0));
    RunConfig pt = pt_config({"d"}, 8, std::nullopt);
    pt.dataset_dir = root;
    const SftData first = load_pt_data(pt, tok(), opt);
    QCOMPARE(first.stats.datasets_from_cache, int64_t(0));
    const QDir cache(QString::fromStdString(root + "/.studio_cache"));
    QCOMPARE(cache.entryList({"d.pt.*.bin"}).size(), 1);
    QCOMPARE(cache.entryList({"d.sft.*.bin"}).size(), 1);
    const SftData second = load_pt_data(pt, tok(), opt);
    QCOMPARE(second.stats.datasets_from_cache, int64_t(1));
    QCOMPARE(second.train.size(), first.train.size());
    for (std::size_t i = 0; i < first.train.size(); ++i) {
      QVERIFY(second.train[i].input_ids == first.train[i].input_ids);
      QVERIFY(second.train[i].labels == first.train[i].labels);
    }
    QCOMPARE(second.stats.tokens, first.stats.tokens);
    QVERIFY(second.stats.lengths.counts == first.stats.lengths.counts);
    QCOMPARE(load_sft_data(sft, tok(), opt).stats.datasets_from_cache, int64_t(1));

    pt.preprocessing_batch_size = 3;
    const SftData rebatched = load_pt_data(pt, tok(), opt);
    QCOMPARE(rebatched.stats.datasets_from_cache, int64_t(1));
    const SftData fresh = load_pt_data(pt, tok(), no_cache());
    QVERIFY(rebatched.train.size() < first.train.size());  // each batch of 3 drops its remainder
    QCOMPARE(rebatched.train.size(), fresh.train.size());
    for (std::size_t i = 0; i < fresh.train.size(); ++i)
      QVERIFY(rebatched.train[i].input_ids == fresh.train[i].input_ids);

    pt.packing = true;  // written: blocks of cutoff_len - 1 from the same texts
    pt.source.key_pos["packing"] = {};
    const SftData written = load_pt_data(pt, tok(), opt);
    QCOMPARE(written.stats.datasets_from_cache, int64_t(1));
    QCOMPARE(written.train.front().input_ids.size(), std::size_t(7));
    pt.packing = false;
    const SftData unpacked = load_pt_data(pt, tok(), opt);
    QCOMPARE(unpacked.stats.datasets_from_cache, int64_t(0));
    QCOMPARE(load_pt_data(pt, tok(), opt).stats.datasets_from_cache, int64_t(1));
    pt.template_name = "llama3";  // another eos
    const SftData llama3 = load_pt_data(pt, tok(), opt);
    QCOMPARE(llama3.stats.datasets_from_cache, int64_t(0));
    QVERIFY(llama3.train[0].input_ids != unpacked.train[0].input_ids);
    QCOMPARE(load_sft_data(sft, tok(), opt).stats.datasets_from_cache, int64_t(1));
  }

  void ptDeterministicAcrossWorkers() {
    RunConfig cfg = pt_config({"demo_pt"}, 64, std::nullopt);
    cfg.dataset_dir = kDemo;
    cfg.preprocessing_batch_size = 37;
    DatasetOptions one = no_cache();
    one.num_workers = 1;
    one.batch_rows = 7;
    DatasetOptions four = no_cache();
    four.num_workers = 4;
    const SftData a = load_pt_data(cfg, tok(), one);
    const SftData b = load_pt_data(cfg, tok(), four);
    QVERIFY(a.train.size() > 100);
    QCOMPARE(a.train.size(), b.train.size());
    for (std::size_t i = 0; i < a.train.size(); ++i) QVERIFY(a.train[i].input_ids == b.train[i].input_ids);
  }

  void ptPreviewLearnsEveryToken() {
    const RunConfig packed = pt_config({"pt_texts"}, 16, std::nullopt);
    const PreviewReport r = preview(packed, tok(), 2, no_cache());
    QCOMPARE(r.stage, Stage::Pt);
    QCOMPARE(r.samples.size(), std::size_t(2));
    QCOMPARE(r.train_samples, int64_t(load_pt_data(packed, tok(), no_cache()).train.size()));
    const PreviewSequence& s = r.samples[0].sequence;
    QCOMPARE(s.spans.size(), std::size_t(1));
    QVERIFY(s.spans[0].learned);
    QCOMPARE(s.tokens, int64_t(16));
    QCOMPARE(s.learned_tokens, int64_t(16));
    QVERIFY(QString::fromStdString(s.spans[0].text).startsWith("The quick brown fox"));
    QCOMPARE(r.samples[0].row, int64_t(1));
    QVERIFY(!r.samples[0].truncated);
    const QString text = QString::fromStdString(format_preview_text(r));
    QVERIFY2(text.startsWith("no template, stage pt, cutoff_len 16\nEvery token is learned; the texts are "
                             "concatenated and cut into blocks of 16 tokens.\n") &&
                 text.contains("--- block 1 (from pt_texts row 1): 16 tokens, 16 learned\n") &&
                 text.contains(QString("\n%1 training blocks; ").arg(r.train_samples)) &&
                 text.contains("Text lengths (cutoff_len 16; packed, none truncated):") &&
                 !text.contains("[[") && !text.contains("(truncated)"),
             qPrintable(text));

    const PreviewReport unpacked = preview(pt_config({"pt_texts"}, 16, false), tok(), 14, no_cache());
    QCOMPARE(unpacked.samples.size(), std::size_t(14));
    QCOMPARE(unpacked.samples[7].row, int64_t(8));  // the long text
    QVERIFY(unpacked.samples[7].truncated);
    QVERIFY(unpacked.samples[7].full_length > 16);
    QCOMPARE(unpacked.samples[7].sequence.learned_tokens, int64_t(16));
    const QString unpacked_text = QString::fromStdString(format_preview_text(unpacked));
    QVERIFY2(unpacked_text.contains("\nEvery token is learned.\n") &&
                 unpacked_text.contains("--- pt_texts row 8: 16 tokens, 16 learned, truncated from ") &&
                 unpacked_text.contains("14 training samples; ") &&
                 unpacked_text.contains("Lengths before truncation (cutoff_len 16):") &&
                 unpacked_text.contains("(truncated)"),
             qPrintable(unpacked_text));
  }
};

QTEST_MAIN(TestDataset)
#include "tst_dataset.moc"
