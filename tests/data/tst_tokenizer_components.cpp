// Each supported tokenizer.json component and option against Hugging Face tokenizers: variants
// of the fixtures with one component swapped (every Split behavior, inverted or not; Metaspace
// schemes; ByteLevel flags; each normalizer and decoder; BPE prefixes, suffixes, unk fusing;
// added-token flags) are written to a temporary folder and encoded by both on the same texts.
// Then the errors: an unsupported component is named with its JSON path, malformed JSON with
// the file and line.
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <functional>

#include "hf_reference.h"
#include "studio/data/tokenizer.h"

using nlohmann::json;
using studio::data::Tokenizer;
using studio::data::TokenizerError;
using namespace studio::test;

namespace {

json fixture(const char* name) {
  QFile file(fixtures_dir() + "/" + name + "/tokenizer.json");
  if (!file.open(QIODevice::ReadOnly))
    throw std::runtime_error("missing fixture " + std::string(name));
  return json::parse(file.readAll().toStdString());
}

json byte_level(bool add_prefix_space = false, bool use_regex = false) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", add_prefix_space},
          {"trim_offsets", false},
          {"use_regex", use_regex}};
}

json split(json pattern, const char* behavior, bool invert) {
  return {{"type", "Split"},
          {"pattern", std::move(pattern)},
          {"behavior", behavior},
          {"invert", invert}};
}

json sequence(const char* key, json steps) {
  return {{"type", "Sequence"}, {key, std::move(steps)}};
}

json metaspace(const char* scheme, bool split_words) {
  return {{"type", "Metaspace"},
          {"replacement", "▁"},
          {"prepend_scheme", scheme},
          {"split", split_words}};
}

json with(json base, const std::function<void(json&)>& change) {
  change(base);
  return base;
}

// A tiny BPE over a, b, c with WordPiece-style "##" continuations or "</w>" word ends.
json affix_model(bool prefix) {
  const std::string p = prefix ? "##" : "", s = prefix ? "" : "</w>";
  json vocab = {{"<unk>", 0}};
  for (const std::string c : {"a", "b", "c"}) {
    vocab[c] = vocab.size();
    vocab[prefix ? p + c : c + s] = vocab.size();
  }
  json merges = prefix ? json::array({{"a", "##b"}, {"ab", "##c"}, {"##b", "##c"}})
                       : json::array({{"a", "b"}, {"ab", "c</w>"}, {"b", "c</w>"}});
  for (const auto& m : merges) {
    const std::string right = m[1].get<std::string>();
    vocab[m[0].get<std::string>() + right.substr(p.size())] = vocab.size();
  }
  return {{"version", "1.0"},
          {"added_tokens", json::array()},
          {"normalizer", nullptr},
          {"pre_tokenizer", split({{"Regex", "\\s+"}}, "Removed", false)},
          {"post_processor", nullptr},
          {"decoder", nullptr},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", "<unk>"},
            {"continuing_subword_prefix", prefix ? json(p) : json(nullptr)},
            {"end_of_word_suffix", prefix ? json(nullptr) : json(s)},
            {"fuse_unk", !prefix},
            {"byte_fallback", false},
            {"vocab", vocab},
            {"merges", merges}}}};
}

void add_split_variants(std::vector<std::pair<QString, json>>& out, const json& base) {
  const std::vector<std::pair<const char*, json>> patterns = {
      {"spaces", {{"Regex", "\\s+"}}},        {"space", {{"String", " "}}},
      {"punctuation", {{"Regex", "\\p{P}"}}}, {"word", {{"Regex", "\\w+"}}},
      {"hex", {{"Regex", "\\h+"}}},           {"han", {{"Regex", "\\p{Han}+"}}},
      {"maybe-empty", {{"Regex", "x*"}}},     {"line-start", {{"Regex", "^."}}}};
  for (const char* behavior :
       {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"}) {
    for (const bool invert : {false, true}) {
      for (const auto& [name, pattern] : patterns) {
        out.emplace_back(
            QStringLiteral("split-%1-%2-%3").arg(behavior, invert ? "inverted" : "plain", name),
            with(base, [&](json& t) {
              t["pre_tokenizer"] =
                  sequence("pretokenizers", {split(pattern, behavior, invert), byte_level()});
            }));
      }
    }
  }
}

void add_metaspace_variants(std::vector<std::pair<QString, json>>& out, const json& sp) {
  for (const char* scheme : {"always", "first", "never"}) {
    for (const bool words : {false, true}) {
      const QString name = QStringLiteral("metaspace-%1-%2").arg(scheme, words ? "split" : "whole");
      out.emplace_back(name, with(sp, [&](json& t) {
                         t["normalizer"] = nullptr;
                         t["pre_tokenizer"] = metaspace(scheme, words);
                         t["decoder"] = sequence("decoders", {{{"type", "ByteFallback"}},
                                                              metaspace(scheme, words),
                                                              {{"type", "Fuse"}}});
                       }));
      out.emplace_back(name + "-decoder-alone", with(sp, [&](json& t) {
                         t["normalizer"] = nullptr;
                         t["pre_tokenizer"] = metaspace(scheme, words);
                         t["decoder"] = metaspace(scheme, words);
                       }));
    }
  }
  out.emplace_back(
      "metaspace-legacy-add-prefix-space", with(sp, [](json& t) {
        t["normalizer"] = nullptr;
        t["pre_tokenizer"] = {
            {"type", "Metaspace"}, {"replacement", "▁"}, {"add_prefix_space", true}};
        t["decoder"] = {{"type", "Metaspace"}, {"replacement", "▁"}, {"add_prefix_space", true}};
      }));
  out.emplace_back("metaspace-first-after-split", with(sp, [](json& t) {
                     t["normalizer"] = nullptr;
                     t["pre_tokenizer"] =
                         sequence("pretokenizers", {split({{"Regex", "\\p{P}"}}, "Isolated", false),
                                                    metaspace("first", true)});
                   }));
  out.emplace_back(
      "metaspace-first-after-strip", with(sp, [](json& t) {
        t["normalizer"] = {{"type", "Strip"}, {"strip_left", true}, {"strip_right", false}};
        t["pre_tokenizer"] = metaspace("first", false);
      }));
}

void add_normalizer_variants(std::vector<std::pair<QString, json>>& out, const json& qwen,
                             const json& sp) {
  for (const char* form : {"NFD", "NFKC", "NFKD", "Lowercase"}) {
    out.emplace_back(QStringLiteral("normalizer-%1").arg(form), with(qwen, [&](json& t) {
                       t["normalizer"] = {{"type", form}};
                     }));
  }
  out.emplace_back(
      "normalizer-strip", with(qwen, [](json& t) {
        t["normalizer"] = {{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}};
      }));
  out.emplace_back(
      "normalizer-strip-right", with(qwen, [](json& t) {
        t["normalizer"] = {{"type", "Strip"}, {"strip_left", false}, {"strip_right", true}};
      }));
  out.emplace_back("normalizer-replace-regex", with(qwen, [](json& t) {
                     t["normalizer"] = sequence(
                         "normalizers",
                         {{{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", " "}},
                          {{"type", "Replace"}, {"pattern", {{"Regex", "^ "}}}, {"content", ""}},
                          {{"type", "NFKC"}}});
                   }));
  out.emplace_back("normalizer-replace-deletes", with(sp, [](json& t) {
                     t["normalizer"] = sequence(
                         "normalizers",
                         {{{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", ""}},
                          {{"type", "Prepend"}, {"prepend", "▁"}},
                          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}});
                   }));
}

void add_model_and_decoder_variants(std::vector<std::pair<QString, json>>& out, const json& qwen,
                                    const json& sp, const json& tiny) {
  out.emplace_back(
      "digits-before-split", with(qwen, [](json& t) {
        json& steps = t["pre_tokenizer"]["pretokenizers"];
        steps.insert(steps.begin(), json{{"type", "Digits"}, {"individual_digits", false}});
      }));
  out.emplace_back("qwen-ignore-merges",
                   with(qwen, [](json& t) { t["model"]["ignore_merges"] = true; }));
  out.emplace_back("sentencepiece-unfused-unk",
                   with(sp, [](json& t) { t["model"]["fuse_unk"] = false; }));
  out.emplace_back("sentencepiece-no-byte-fallback",
                   with(sp, [](json& t) { t["model"]["byte_fallback"] = false; }));
  out.emplace_back("sentencepiece-mark-inside-token", with(sp, [](json& t) {
                     // "x▁" in the vocabulary: words may no longer be merged one at a time.
                     t["model"]["vocab"]["x▁"] = t["model"]["vocab"].size();
                     t["model"]["merges"].push_back("x ▁");
                   }));
  out.emplace_back("bpe-continuing-subword-prefix", affix_model(true));
  out.emplace_back("bpe-end-of-word-suffix", affix_model(false));
  out.emplace_back("decoder-replace-regex-strip", with(sp, [](json& t) {
                     t["decoder"] = sequence(
                         "decoders",
                         {{{"type", "Replace"}, {"pattern", {{"Regex", "▁+"}}}, {"content", " "}},
                          {{"type", "ByteFallback"}},
                          {{"type", "Strip"}, {"content", " "}, {"start", 2}, {"stop", 0}},
                          {{"type", "Fuse"}}});
                   }));
  out.emplace_back("no-decoder", with(tiny, [](json& t) { t["decoder"] = nullptr; }));
  for (const bool prefix : {false, true}) {
    for (const bool regex : {false, true}) {
      out.emplace_back(
          QStringLiteral("byte-level-prefix%1-regex%2").arg(int(prefix)).arg(int(regex)),
          with(tiny, [&](json& t) {
            t["pre_tokenizer"] = byte_level(prefix, regex);
            t["decoder"] = byte_level(prefix, regex);
          }));
    }
  }
}

void add_added_token_variants(std::vector<std::pair<QString, json>>& out, const json& added) {
  out.emplace_back("added-flags", with(added, [](json& t) {
                     for (json& token : t["added_tokens"]) {
                       const std::string content = token["content"];
                       if (content == "<|sp|>" || content == "<a>") {
                         token["lstrip"] = token["rstrip"] = token["single_word"] = true;
                       }
                       if (content == "[MASK]") token["normalized"] = true;
                     }
                   }));
  out.emplace_back("added-without-normalizer",
                   with(added, [](json& t) { t["normalizer"] = nullptr; }));
  out.emplace_back("added-prefix-space-per-piece",
                   with(added, [](json& t) { t["pre_tokenizer"] = byte_level(true, false); }));
  out.emplace_back("added-normalized-special-with-prepend",
                   with(fixture("llama2-style"), [](json& t) {
                     t["added_tokens"][2]["normalized"] = true;
                     t["added_tokens"].push_back({{"id", 99999},
                                                  {"content", "<extra>"},
                                                  {"single_word", false},
                                                  {"lstrip", false},
                                                  {"rstrip", false},
                                                  {"normalized", true},
                                                  {"special", false}});
                   }));
}

std::vector<std::pair<QString, json>> variants() {
  const json tiny = fixture("tiny-merge-priority"), sp = fixture("llama2-style"),
             qwen = fixture("qwen2-style");
  std::vector<std::pair<QString, json>> out;
  add_split_variants(out, tiny);
  add_metaspace_variants(out, sp);
  add_normalizer_variants(out, qwen, sp);
  add_model_and_decoder_variants(out, qwen, sp, tiny);
  add_added_token_variants(out, fixture("tiny-added-tokens"));
  return out;
}

QString write_file(const QTemporaryDir& dir, const QString& name, const std::string& content) {
  QDir().mkpath(QFileInfo(dir.filePath(name)).path());
  QFile file(dir.filePath(name));
  if (file.open(QIODevice::WriteOnly)) file.write(QByteArray::fromStdString(content));
  return file.fileName();
}

// The message load() throws for `content`, or "" when it loads.
QString load_error(const QTemporaryDir& dir, const std::string& content) {
  const QString path = write_file(dir, "broken/tokenizer.json", content);
  try {
    Tokenizer::load(path.toStdString());
    return {};
  } catch (const TokenizerError& e) {
    return QString::fromStdString(e.what());
  }
}

}  // namespace

class TestTokenizerComponents : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;

 private slots:
  void initTestCase() {
    const QString problem = hf_reference_problem();
    if (!problem.isEmpty()) QFAIL(qPrintable(problem));
    QVERIFY(dir_.isValid());
  }

  void variant_matches_hf_data() {
    QTest::addColumn<QString>("path");
    for (const auto& [name, tokenizer] : variants()) {
      QTest::newRow(qPrintable(name))
          << write_file(dir_, name + "/tokenizer.json", tokenizer.dump());
    }
  }

  void variant_matches_hf() {
    QFETCH(QString, path);
    std::vector<std::string> texts = random_texts(600, 99);
    for (const char* text :
         {"", " ", "  Hello  world ", "abc ab ca  bc", "中文 ① x\u00b2 ½ 12", "x▁y ▁▁z",
          "<a><b>[MASK]  ﬁx hello", "a\nb\n\nc", "\xe2\x80\x83tab\tend"}) {
      texts.push_back(text);
    }
    std::optional<Tokenizer> tokenizer;
    try {
      tokenizer = Tokenizer::load(path.toStdString());
    } catch (const TokenizerError& e) {
      QFAIL(e.what());
    }
    json requests = encode_requests(texts, false);
    const json special_requests = encode_requests(texts, true);
    requests.insert(requests.end(), special_requests.begin(), special_requests.end());
    QString error;
    const auto hf = hf_answers(path, requests, error);
    QVERIFY2(hf, qPrintable(error));
    for (std::size_t i = 0; i < requests.size(); ++i) {
      const std::string& text = texts[i % texts.size()];
      const std::vector<int32_t> ids = tokenizer->encode(text, i >= texts.size());
      const std::string context =
          "'" + text + "': ours " + ids_text(ids) + ", HF " + ids_text((*hf)[i].ids);
      QVERIFY2(ids == (*hf)[i].ids, context.c_str());
      QCOMPARE(QString::fromStdString(tokenizer->decode(ids)),
               QString::fromStdString((*hf)[i].decoded));
      QCOMPARE(QString::fromStdString(tokenizer->decode(ids, true)),
               QString::fromStdString((*hf)[i].decoded_skip));
    }
  }

  void unsupported_component_is_named_data() {
    QTest::addColumn<QByteArray>("content");
    QTest::addColumn<QString>("message");
    const json qwen = fixture("qwen2-style");
    const auto row = [&](const char* name, const std::function<void(json&)>& change,
                         const char* message) {
      QTest::newRow(name) << QByteArray::fromStdString(with(qwen, change).dump())
                          << QString::fromUtf8(message);
    };
    row(
        "pre-tokenizer in a sequence",
        [](json& t) {
          t["pre_tokenizer"]["pretokenizers"].push_back({{"type", "Whitespace"}});
        },
        "pre_tokenizer.pretokenizers[2].type 'Whitespace' is not supported (supported: ByteLevel, "
        "Split, "
        "Sequence, Metaspace, Digits)");
    row(
        "normalizer",
        [](json& t) {
          t["normalizer"] = {{"type", "BertNormalizer"}};
        },
        "normalizer.type 'BertNormalizer' is not supported (supported: NFC, NFD, NFKC, NFKD, "
        "Sequence, "
        "Prepend, Replace, Strip, Lowercase)");
    row(
        "model",
        [](json& t) {
          t["model"] = {{"type", "Unigram"}, {"vocab", json::array()}};
        },
        "model.type 'Unigram' is not supported (supported: BPE)");
    row(
        "decoder",
        [](json& t) {
          t["decoder"] = sequence("decoders", {{{"type", "WordPiece"}}});
        },
        "decoder.decoders[0].type 'WordPiece' is not supported");
    row(
        "post-processor",
        [](json& t) {
          t["post_processor"] = {{"type", "RobertaProcessing"}};
        },
        "post_processor.type 'RobertaProcessing' is not supported (supported: TemplateProcessing, "
        "ByteLevel, Sequence)");
    row(
        "missing type",
        [](json& t) {
          t["normalizer"] = {{"form", "NFC"}};
        },
        "normalizer.type is missing");
    row(
        "dropout", [](json& t) { t["model"]["dropout"] = 0.1; },
        "model.dropout '0.1' is not supported");
    row(
        "merge of unknown token", [](json& t) { t["model"]["merges"][3] = "Ġ zzzz"; },
        "model.merges[3]: token 'zzzz' is not in the vocabulary");
    row(
        "merge without space", [](json& t) { t["model"]["merges"][0] = "ab"; },
        "model.merges[0] 'ab' is not a merge");
    row(
        "negative id", [](json& t) { t["model"]["vocab"]["a"] = -3; },
        "model.vocab.a: expected a token id");
    // Issue 35: an id past int32 is refused, not cut to 32 bits (4294967299 would be id 3).
    row(
        "special token id past 32 bits",
        [](json& t) {
          t["post_processor"] = {
              {"type", "TemplateProcessing"},
              {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                      {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
              {"special_tokens",
               {{"<s>", {{"id", "<s>"}, {"ids", {4294967299ULL}}, {"tokens", {"<s>"}}}}}}};
        },
        "post_processor.special_tokens.<s>.ids[0]: 4294967299 is too large (at most "
        "2147483647)");
    row(
        "bad regex",
        [](json& t) { t["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(a"; },
        "pre_tokenizer.pretokenizers[0].pattern.Regex: invalid regular expression");
    row(
        "bad behavior",
        [](json& t) { t["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Merged"; },
        "pre_tokenizer.pretokenizers[0].behavior 'Merged' is not a split behavior");
    row(
        "wrong type", [](json& t) { t["model"]["ignore_merges"] = "yes"; },
        "model.ignore_merges: expected true or false, got string");
  }

  void unsupported_component_is_named() {
    QFETCH(QByteArray, content);
    QFETCH(QString, message);
    const QString error = load_error(dir_, content.toStdString());
    const QString expected = dir_.filePath("broken/tokenizer.json") + ": " + message;
    QVERIFY2(error.startsWith(expected),
             qPrintable("got: " + error + "\nexpected: " + expected + "..."));
  }

  void malformed_json_names_file_and_line() {
    const QString error =
        load_error(dir_, "{\n  \"version\": \"1.0\",\n  \"model\": {\"vocab\": {\"a\": 0,}}\n}");
    QVERIFY2(error.startsWith(dir_.filePath("broken/tokenizer.json") +
                              ":3:30: malformed JSON: found '}' where a key in double quotes should "
                              "be (a comma too many before it?)"),
             qPrintable(error));
  }

  void missing_file_is_named() {
    try {
      Tokenizer::load(dir_.filePath("nowhere").toStdString());
      QFAIL("loaded a folder that does not exist");
    } catch (const TokenizerError& e) {
      QVERIFY2(QString(e.what()).contains(dir_.filePath("nowhere")), e.what());
    }
  }

  void config_naming_unknown_token_is_an_error() {
    QTemporaryDir model;
    QVERIFY(QFile::copy(fixtures_dir() + "/qwen2-style/tokenizer.json",
                        model.filePath("tokenizer.json")));
    write_file(model, "tokenizer_config.json", R"({"eos_token": {"content": "<|no_such|>"}})");
    try {
      Tokenizer::load(model.path().toStdString());
      QFAIL("loaded a config naming a token the tokenizer lacks");
    } catch (const TokenizerError& e) {
      QCOMPARE(QString(e.what()), model.filePath("tokenizer_config.json") +
                                      ": eos_token '<|no_such|>' is not a token of " +
                                      model.filePath("tokenizer.json"));
    }
  }
};

QTEST_MAIN(TestTokenizerComponents)
#include "tst_tokenizer_components.moc"
