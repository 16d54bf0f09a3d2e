// The tokenizer against Hugging Face tokenizers itself (tests/reference, run through node) on the
// fixtures in tests/fixtures/tokenizers: ids and decoded text for ~50 chosen texts per fixture with
// and without special tokens, a few thousand random strings per fixture, invalid UTF-8, arbitrary
// id sequences to decode, vocabulary sizes, tokenizer_config.json and concurrent encoding.
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <map>
#include <thread>

#include "hf_reference.h"
#include "studio/data/tokenizer.h"

using studio::data::Tokenizer;
using namespace studio::test;

namespace {

const QStringList kFixtures = {
    "qwen2-style",           "llama3-style",       "llama2-style",      "mistral-metaspace-style",
    "tiny-merge-priority",   "tiny-byte-fallback", "tiny-added-tokens", "tiny-digits-individual",
    "tiny-digits-contiguous"};

struct Text {
  const char* name;
  std::string text;
};

const std::vector<Text>& texts() {
  static const std::vector<Text> list = {
      {"empty", ""},
      {"one space", " "},
      {"only spaces", "    "},
      {"english", "The quick brown fox jumps over the lazy dog."},
      {"contractions", "It's, they're, we've, I'm, you'll, he'd - DON'T SHOUT'S"},
      {"leading spaces", "   indented text with  double  spaces"},
      {"trailing whitespace", "ends with spaces and a newline   \n"},
      {"tabs and newlines", "col1\tcol2\t\tcol3\nrow2\r\nrow3\n\n\nend"},
      {"whitespace runs", "a     b\t\t\tc\n \n \nd          "},
      {"python", "def f(x):\n    return {'a': [1, 2, 3]}  # comment\n"},
      {"c++", "for (int i = 0; i < n; ++i) { sum += v[i] * 2; }"},
      {"json", "{\"model\": \"qwen\", \"lr\": 5.0e-6, \"ok\": true}"},
      {"chinese", "大型语言模型通过在海量文本上进行预训练。"},
      {"japanese", "トークナイザーは日本語の文章を分割します。"},
      {"korean", "인공지능 모델은 언어를 이해합니다"},
      {"cjk mixed", "中文，English混合；日本語「テスト」！"},
      {"emoji", "I love it 😍🔥👍"},
      {"emoji zwj", "👨‍👩‍👧‍👦 and 👩🏽‍💻 and 🏳️‍🌈"},
      {"emoji flags keycaps", "🇯🇵🇺🇸 1️⃣#️⃣"},
      {"emoji glued", "great👍done✅ok"},
      {"combining marks", "cafe\xCC\x81 nai\xCC\x88ve A\xCC\x8Angstro\xCC\x88m"},
      {"nfc changes",
       "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8 e\xCC\x81\xCC\x81 \xE2\x84\xAB \xE2\x84\xA6"},
      {"stacked marks", "Z̤̮ q̣̇ ẹ̄ t̷e̸x̵t̶"},
      {"vietnamese", "Tiếng Việt có dấu"},
      {"arabic", "مرحبا بالعالم! كيف حالك؟"},
      {"hebrew niqqud", "שָׁלוֹם עוֹלָם"},
      {"rtl mixed", "the word שלום means peace, 123 אבג 456 \xE2\x80\x8Fمرحبا\xE2\x80\x8E"},
      {"digits", "0123456789 12 345 6789 1234567"},
      {"number formats", "3.14159 1,000,000 -273.15 1e-5 2024-01-15 0x1F"},
      {"other digits", "٠١٢٣ ١٢٣ ①②③ ½ ² ＡＢＣ１２３"},
      {"cyrillic greek", "Съешь же ещё этих мягких булок. Ξεσκεπάζω"},
      {"hindi thai", "हिन्दी भाषा ภาษาไทย"},
      {"url email", "https://example.com/a?b=c&d=e#f someone@example.com"},
      {"chat template", "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"},
      {"specials glued", "word<|endoftext|>word<|im_end|>end"},
      {"llama3 header",
       "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"},
      {"sp specials", "<s>Hello</s><unk> world</s>"},
      {"partial specials", "<|im_start <|endoftext| <s <0x41>"},
      {"word marks", "▁already▁marked ▁ text▁"},
      {"zero width and nbsp",
       "zero\xE2\x80\x8Bwidth non\xC2\xA0"
       "breaking ideographic\xE3\x80\x80space"},
      {"control characters", std::string("a\0b\x01"
                                         "c\x7f\xC2\x85"
                                         "d",
                                         9)},
      {"long words",
       "Pneumonoultramicroscopicsilicovolcanoconiosis supercalifragilisticexpialidocious"},
      {"repeats", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa bbbbbbbbbbbbbbbbbbbbbbbb"},
      {"math", "∀x ∈ ℝ: x² ≥ 0 ⇒ √x ∈ ℝ≥0 ∑ ∫"},
      {"compatibility forms", "ﬁ ﬂ ㎏ ™ Ⅻ ℃"},
      {"added tokens glued", "<a><b><a><b [MASK]  x  [MASK]hello hellox fix ﬁx ﬂow<r>   y  <l>z"},
      {"merge priority", "abc aaaa aaaaa abcabc bcab xyz ccc"},
      {"byte fallback", "中é 中éa中中b é中"},
      {"bom", "\xEF\xBB\xBFstarts with a byte order mark"},
  };
  return list;
}

QString fixture_json(const QString& fixture) {
  return fixtures_dir() + "/" + fixture + "/tokenizer.json";
}

std::vector<std::string> text_list() {
  std::vector<std::string> out;
  for (const Text& t : texts()) out.push_back(t.text);
  return out;
}

// Compares one encoding and its decodings with HF's; an empty string when they agree.
QString difference(const Tokenizer& tokenizer, const std::string& text, bool special,
                   const HfAnswer& hf) {
  const std::vector<int32_t> ids = tokenizer.encode(text, special);
  if (ids != hf.ids) {
    return QString::fromStdString("ids " + ids_text(ids) + " but HF " + ids_text(hf.ids));
  }
  const std::string decoded = tokenizer.decode(ids, false),
                    decoded_skip = tokenizer.decode(ids, true);
  if (decoded != hf.decoded)
    return QString::fromStdString("decoded '" + decoded + "' but HF '" + hf.decoded + "'");
  if (decoded_skip != hf.decoded_skip) {
    return QString::fromStdString("decoded (skipping specials) '" + decoded_skip + "' but HF '" +
                                  hf.decoded_skip + "'");
  }
  return {};
}

}  // namespace

class TestTokenizer : public QObject {
  Q_OBJECT

 private:
  // HF's answers for texts(), by fixture and add_special_tokens.
  std::map<std::pair<QString, bool>, std::vector<HfAnswer>> answers_;
  std::map<QString, Tokenizer> tokenizers_;
  int rows_matched_ = 0;

  const Tokenizer& tokenizer(const QString& fixture) { return tokenizers_.at(fixture); }

 private slots:
  void initTestCase() {
    const QString problem = hf_reference_problem();
    if (!problem.isEmpty()) QFAIL(qPrintable(problem));
    nlohmann::json requests = encode_requests(text_list(), false);
    const nlohmann::json special_requests = encode_requests(text_list(), true);
    requests.insert(requests.end(), special_requests.begin(), special_requests.end());
    const std::size_t count = texts().size();
    for (const QString& fixture : kFixtures) {
      tokenizers_.emplace(fixture, Tokenizer::load((fixtures_dir() + "/" + fixture).toStdString()));
      QString error;
      auto answers = hf_answers(fixture_json(fixture), requests, error);
      if (!answers) QFAIL(qPrintable(error));
      answers_[{fixture, false}].assign(answers->begin(), answers->begin() + count);
      answers_[{fixture, true}].assign(answers->begin() + count, answers->end());
    }
  }

  void cleanupTestCase() {
    qInfo("%d fixture x text x add_special_tokens rows matched HF exactly (%d fixtures, %d texts)",
          rows_matched_, static_cast<int>(kFixtures.size()), static_cast<int>(texts().size()));
  }

  void matches_hf_data() {
    QTest::addColumn<QString>("fixture");
    QTest::addColumn<bool>("special");
    QTest::addColumn<int>("index");
    for (const QString& fixture : kFixtures) {
      for (const bool special : {false, true}) {
        for (std::size_t i = 0; i < texts().size(); ++i) {
          QTest::addRow("%s/%s/%s", qPrintable(fixture), special ? "special" : "plain",
                        texts()[i].name)
              << fixture << special << static_cast<int>(i);
        }
      }
    }
  }

  // Same ids and the same decoded text as HF; where HF round-trips, so do we.
  void matches_hf() {
    QFETCH(QString, fixture);
    QFETCH(bool, special);
    QFETCH(int, index);
    const std::string& text = texts()[index].text;
    const HfAnswer& hf = answers_.at({fixture, special})[index];
    const QString problem = difference(tokenizer(fixture), text, special, hf);
    QVERIFY2(problem.isEmpty(), qPrintable(problem));
    if (!special && hf.decoded == text) QCOMPARE(tokenizer(fixture).decode(hf.ids), text);
    ++rows_matched_;
  }

  // A few thousand random strings per fixture, all sent to HF in one batch.
  void random_strings_match_hf_data() {
    QTest::addColumn<QString>("fixture");
    for (const QString& fixture : kFixtures) QTest::newRow(qPrintable(fixture)) << fixture;
  }

  void random_strings_match_hf() {
    QFETCH(QString, fixture);
    const std::vector<std::string> strings = random_texts(3000, 20240615);
    QString error;
    const auto hf = hf_answers(fixture_json(fixture), encode_requests(strings, false), error);
    QVERIFY2(hf, qPrintable(error));
    int mismatches = 0;
    QString first;
    for (std::size_t i = 0; i < strings.size(); ++i) {
      const QString problem = difference(tokenizer(fixture), strings[i], false, (*hf)[i]);
      if (problem.isEmpty()) continue;
      if (mismatches++ == 0) first = "'" + QString::fromStdString(strings[i]) + "': " + problem;
    }
    QVERIFY2(mismatches == 0, qPrintable(QStringLiteral("%1 of %2 differ; first: %3")
                                             .arg(mismatches)
                                             .arg(strings.size())
                                             .arg(first)));
  }

  // Invalid UTF-8 is read with U+FFFD per maximal invalid subsequence, as HF's callers decode it.
  void invalid_utf8_matches_hf() {
    const std::vector<std::string> inputs = {"\xFF",
                                             "a\x80"
                                             "b",
                                             "caf\xC3",
                                             "\xC3\x28",
                                             "\xE2\x82",
                                             "\xE2\x82\x28",
                                             "\xED\xA0\x80",
                                             "\xF0\x9F\x98",
                                             "\xF4\x90\x80\x80",
                                             "\xC0\xAF",
                                             "ok \xF0\x9F\x98\x80 \xF0\x9F bad \xE4\xB8 end",
                                             "<|im_end|>\xFE<s>\x80"};
    for (const QString& fixture : kFixtures) {
      QString error;
      const auto hf = hf_answers(fixture_json(fixture), encode_requests(inputs, false), error);
      QVERIFY2(hf, qPrintable(error));
      for (std::size_t i = 0; i < inputs.size(); ++i) {
        const QString problem = difference(tokenizer(fixture), inputs[i], false, (*hf)[i]);
        QVERIFY2(problem.isEmpty(),
                 qPrintable(fixture + QStringLiteral(" input %1: ").arg(i) + problem));
      }
    }
  }

  // Ids no encoder would produce: lone or broken byte-fallback tokens, specials mid-word,
  // unknown ids (skipped by HF), ids past the vocabulary.
  void decode_matches_hf_data() {
    QTest::addColumn<QString>("fixture");
    for (const QString& fixture : kFixtures) QTest::newRow(qPrintable(fixture)) << fixture;
  }

  void decode_matches_hf() {
    QFETCH(QString, fixture);
    const Tokenizer& t = tokenizer(fixture);
    const auto n = static_cast<int32_t>(t.vocab_size());
    std::vector<std::vector<int32_t>> sequences = {
        {}, {0}, {1, 2, 3}, {n - 1, 0, n - 2}, {n, n + 5, 1}, {3, 3, 3, 3}, {n - 3, 40, n - 3}};
    for (const char* token :
         {"<0xE4>", "<0xB8>", "<0xAD>", "<0x41>", "<s>", "</s>", "▁", "Ġ", "Ċ"}) {
      if (const auto id = t.token_to_id(token)) sequences.push_back({*id, *id, 5, *id});
    }
    for (const int32_t stride : {7, 13, 101}) {
      std::vector<int32_t> walk;
      for (int32_t id = 0; id < n; id += stride) walk.push_back(id);
      sequences.push_back(walk);
    }
    nlohmann::json requests = nlohmann::json::array();
    for (const auto& ids : sequences) requests.push_back({{"ids", ids}});
    QString error;
    const auto hf = hf_answers(fixture_json(fixture), requests, error);
    QVERIFY2(hf, qPrintable(error));
    for (std::size_t i = 0; i < sequences.size(); ++i) {
      QCOMPARE(QString::fromStdString(t.decode(sequences[i], false)),
               QString::fromStdString((*hf)[i].decoded));
      QCOMPARE(QString::fromStdString(t.decode(sequences[i], true)),
               QString::fromStdString((*hf)[i].decoded_skip));
    }
    QCOMPARE(t.decode({-1, -7}),
             std::string());  // HF's ids are unsigned; negative ones are unknown
  }

  void vocabulary_matches_hf() {
    for (const QString& fixture : kFixtures) {
      QString error;
      const auto info = hf_info(fixture_json(fixture), error);
      QVERIFY2(info, qPrintable(error));
      const Tokenizer& t = tokenizer(fixture);
      QCOMPARE(t.vocab_size(), (*info)["vocab_size_with_added"].get<std::size_t>());
      for (int32_t id = 0; id < static_cast<int32_t>(t.vocab_size()); id += 17) {
        const auto token = t.id_to_token(id);
        QVERIFY(token);
        // A normalized added token shows its normalized form, so look up by what encodes to it.
        if (t.token_to_id(*token)) QCOMPARE(*t.token_to_id(*token), id);
      }
      QVERIFY(!t.id_to_token(static_cast<int32_t>(t.vocab_size()) + 100));
      QVERIFY(!t.token_to_id("no such token, surely"));
    }
  }

  void config_gives_special_ids() {
    const Tokenizer& qwen = tokenizer("qwen2-style");
    QVERIFY(!qwen.bos_id());
    QCOMPARE(qwen.eos_id(), qwen.token_to_id("<|im_end|>"));
    QCOMPARE(qwen.pad_id(), qwen.token_to_id("<|endoftext|>"));
    QVERIFY(qwen.is_special(*qwen.token_to_id("<|im_start|>")));
    QVERIFY(!qwen.is_special(*qwen.token_to_id("a")));
    const Tokenizer& llama2 = tokenizer("llama2-style");
    QCOMPARE(llama2.bos_id(), std::optional<int32_t>(1));
    QCOMPARE(llama2.eos_id(), std::optional<int32_t>(2));
    QVERIFY(!llama2.pad_id());
    const Tokenizer& llama3 = tokenizer("llama3-style");
    QCOMPARE(llama3.bos_id(), llama3.token_to_id("<|begin_of_text|>"));
    QCOMPARE(llama3.eos_id(), llama3.token_to_id("<|eot_id|>"));
    QVERIFY(!tokenizer("tiny-merge-priority").eos_id());  // no tokenizer_config.json
  }

  // add_bos_token / add_eos_token in tokenizer_config.json decide what add_special_tokens adds.
  void config_flags_override_template() {
    QTemporaryDir dir;
    QVERIFY(QFile::copy(fixture_json("llama2-style"), dir.filePath("tokenizer.json")));
    QFile config(dir.filePath("tokenizer_config.json"));
    QVERIFY(config.open(QIODevice::WriteOnly));
    config.write(
        R"({"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": false, "add_eos_token": true})");
    config.close();
    const Tokenizer t = Tokenizer::load(dir.path().toStdString());
    const std::vector<int32_t> plain = t.encode("Hello world");
    std::vector<int32_t> expected = plain;
    expected.push_back(2);
    QCOMPARE(t.encode("Hello world", true), expected);
  }

  void file_and_folder_load_alike() {
    const Tokenizer from_file = Tokenizer::load(fixture_json("qwen2-style").toStdString());
    QCOMPARE(from_file.source(), fixture_json("qwen2-style").toStdString());
    QCOMPARE(from_file.eos_id(), tokenizer("qwen2-style").eos_id());
    QCOMPARE(from_file.encode("Hello, 世界 👋"), tokenizer("qwen2-style").encode("Hello, 世界 👋"));
  }

  // Four threads share one tokenizer (and its word cache) and get what one thread gets.
  void concurrent_encoding_is_consistent() {
    const std::vector<std::string> strings = random_texts(2000, 7);
    for (const QString& fixture : {QStringLiteral("qwen2-style"), QStringLiteral("llama2-style")}) {
      const Tokenizer fresh = Tokenizer::load((fixtures_dir() + "/" + fixture).toStdString());
      std::vector<std::vector<int32_t>> expected;
      for (const std::string& s : strings) expected.push_back(tokenizer(fixture).encode(s));
      std::vector<int> failures(4, 0);
      std::vector<std::thread> threads;
      for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
          for (int round = 0; round < 3; ++round) {
            for (std::size_t i = t; i < strings.size(); i += 1 + t)
              failures[t] += fresh.encode(strings[i]) != expected[i];
          }
        });
      }
      for (std::thread& thread : threads) thread.join();
      QCOMPARE(failures, std::vector<int>(4, 0));
    }
  }
};

QTEST_MAIN(TestTokenizer)
#include "tst_tokenizer.moc"
