#include "hf_reference.h"

#include <QDir>
#include <QProcess>

#include <random>

namespace studio::test {

namespace {

QString reference_dir() {
  return QStringLiteral(STUDIO_SOURCE_DIR "/tests/reference");
}

bool is_utf8(const std::string& text) {
  const QByteArray bytes = QByteArray::fromStdString(text);
  return QString::fromUtf8(bytes).toUtf8() == bytes;
}

// Runs hf_tokenize.py with `arguments`, feeding `input`; the parsed stdout, or nullopt + error.
std::optional<nlohmann::json> run_script(const QStringList& arguments, const QByteArray& input,
                                         QString& error) {
  if (const QString problem = hf_reference_problem(); !problem.isEmpty()) {
    error = problem;
    return std::nullopt;
  }
  QProcess python;
  python.start(QStringLiteral(STUDIO_PYTHON),
               QStringList{reference_dir() + "/hf_tokenize.py"} + arguments);
  if (!python.waitForStarted(30000)) {
    error = QStringLiteral(STUDIO_PYTHON " did not start: ") + python.errorString();
    return std::nullopt;
  }
  python.write(input);
  python.closeWriteChannel();
  if (!python.waitForFinished(300000) || python.exitStatus() != QProcess::NormalExit ||
      python.exitCode() != 0) {
    error = "hf_tokenize.py " + arguments.join(' ') +
            " failed: " + QString::fromUtf8(python.readAllStandardError());
    return std::nullopt;
  }
  try {
    return nlohmann::json::parse(python.readAllStandardOutput().toStdString());
  } catch (const nlohmann::json::exception& e) {
    error = QStringLiteral("hf_tokenize.py printed no JSON: %1").arg(e.what());
    return std::nullopt;
  }
}

}  // namespace

QString hf_reference_problem() {
  static const QString problem = [] {
    QProcess probe;
    probe.start(QStringLiteral(STUDIO_PYTHON), {QStringLiteral("-c"), QStringLiteral("import tokenizers")});
    if (!probe.waitForFinished(60000) || probe.exitStatus() != QProcess::NormalExit ||
        probe.exitCode() != 0) {
      return QStringLiteral("the Hugging Face tokenizers reference cannot run: '" STUDIO_PYTHON
                            " -c \"import tokenizers\"' failed (%1): run scripts/setup.sh, which "
                            "installs it into the project's Python environment")
          .arg(QString::fromUtf8(probe.readAllStandardError()).trimmed());
    }
    return QString();
  }();
  return problem;
}

nlohmann::json encode_requests(const std::vector<std::string>& texts, bool add_special_tokens) {
  nlohmann::json requests = nlohmann::json::array();
  for (const std::string& text : texts) {
    nlohmann::json request = {{"add_special_tokens", add_special_tokens}};
    if (is_utf8(text)) {
      request["text"] = text;
    } else {
      request["base64"] = QByteArray::fromStdString(text).toBase64().toStdString();
    }
    requests.push_back(std::move(request));
  }
  return requests;
}

std::optional<std::vector<HfAnswer>> hf_answers(const QString& tokenizer_json,
                                                const nlohmann::json& requests, QString& error) {
  const auto output =
      run_script({tokenizer_json}, QByteArray::fromStdString(requests.dump()), error);
  if (!output) return std::nullopt;
  if (!output->is_array() || output->size() != requests.size()) {
    error = QStringLiteral("hf_tokenize.py answered %1 requests of %2")
                .arg(output->size())
                .arg(requests.size());
    return std::nullopt;
  }
  std::vector<HfAnswer> answers;
  for (const auto& a : *output) {
    answers.push_back({a.at("ids").get<std::vector<int32_t>>(), a.at("decoded").get<std::string>(),
                       a.at("decoded_skip").get<std::string>()});
  }
  return answers;
}

std::optional<nlohmann::json> hf_info(const QString& tokenizer_json, QString& error) {
  return run_script({tokenizer_json, QStringLiteral("--info")}, {}, error);
}

std::vector<std::string> random_texts(std::size_t count, uint32_t seed) {
  static const std::vector<std::string> atoms = {"a",
                                                 "b",
                                                 "c",
                                                 "x",
                                                 "y",
                                                 "z",
                                                 "A",
                                                 "B",
                                                 "Z",
                                                 "0",
                                                 "1",
                                                 "2",
                                                 "5",
                                                 "9",
                                                 " ",
                                                 " ",
                                                 " ",
                                                 "  ",
                                                 "\t",
                                                 "\n",
                                                 "\r\n",
                                                 "\r",
                                                 "\v",
                                                 "\f",
                                                 "\xC2\x85",
                                                 "\xC2\xA0",
                                                 "\xE1\xA0\x8E",
                                                 "\xE2\x80\xA8",
                                                 "\xE3\x80\x80",
                                                 "\xE2\x80\x8B",
                                                 "\xE2\x80\x8D",
                                                 "\xEF\xB8\x8F",
                                                 "\xEF\xBB\xBF",
                                                 "'s",
                                                 "'S",
                                                 "'t",
                                                 "'re",
                                                 "'ve",
                                                 "'m",
                                                 "'ll",
                                                 "'d",
                                                 "'\xC5\xBF",
                                                 "'",
                                                 "\xCC\x81",
                                                 "\xCC\x88",
                                                 "e\xCC\x81",
                                                 "\xC3\xA9",
                                                 "A\xCC\x8A",
                                                 "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8",
                                                 "\xED\x95\x9C",
                                                 "\xEF\xAC\x81",
                                                 "\xE2\x91\xA0",
                                                 "\xC2\xBD",
                                                 "\xC2\xB2",
                                                 "\xD9\xA3",
                                                 "\xEF\xBC\x91",
                                                 "\xE2\x85\xAB",
                                                 "\xE4\xB8\xAD",
                                                 "\xE6\x96\x87",
                                                 "\xE6\x97\xA5\xE6\x9C\xAC",
                                                 "\xE3\x81\xAE",
                                                 "\xE3\x82\xAB",
                                                 "\xD8\xA7",
                                                 "\xD9\x84",
                                                 "\xD7\xA9",
                                                 "\xD6\xB8",
                                                 "\xD0\x96",
                                                 "\xCF\x89",
                                                 "\xC3\x9F",
                                                 "\xC4\xB0",
                                                 "\xC4\xB1",
                                                 "\xF0\x9F\x98\x80",
                                                 "\xF0\x9F\x91\x8D",
                                                 "\xF0\x9F\x8F\xBD",
                                                 "\xF0\x9F\x91\xA8",
                                                 "\xF0\x9F\x91\xA9",
                                                 "\xE2\x9D\xA4",
                                                 "\xF0\x9F\x87\xAF",
                                                 "\xF0\x9F\x87\xB5",
                                                 "\xF0\x9D\x94\x98",
                                                 ".",
                                                 ",",
                                                 "!",
                                                 "?",
                                                 "-",
                                                 "_",
                                                 "(",
                                                 ")",
                                                 "[",
                                                 "]",
                                                 "{",
                                                 "}",
                                                 "<",
                                                 ">",
                                                 "|",
                                                 "/",
                                                 "\\",
                                                 "\"",
                                                 "#",
                                                 "$",
                                                 "%",
                                                 "&",
                                                 "*",
                                                 "+",
                                                 "=",
                                                 "@",
                                                 "^",
                                                 "~",
                                                 "`",
                                                 ";",
                                                 ":",
                                                 "\xE2\x80\xA6",
                                                 "\xE2\x96\x81",
                                                 "\xE2\x96\x81\xE2\x96\x81",
                                                 "<|im_start|>",
                                                 "<|im_end|>",
                                                 "<|endoftext|>",
                                                 "<|begin_of_text|>",
                                                 "<|eot_id|>",
                                                 "<s>",
                                                 "</s>",
                                                 "<unk>",
                                                 "<a>",
                                                 "<a><b>",
                                                 "<a><",
                                                 "[MASK]",
                                                 "hello",
                                                 "Hello",
                                                 "fix",
                                                 "\xEF\xAC\x81x",
                                                 "\xEF\xAC\x82ow",
                                                 "<r>",
                                                 "<l>",
                                                 "<|sp|>",
                                                 "<0x41>",
                                                 "the",
                                                 "The",
                                                 "ing",
                                                 "tokenizers",
                                                 " tokenizers",
                                                 "sequence",
                                                 "12",
                                                 "123",
                                                 "1234",
                                                 "0x1F",
                                                 "3.14"};
  std::mt19937 rng(seed);
  std::vector<std::string> texts;
  for (std::size_t i = 0; i < count; ++i) {
    std::string text;
    const unsigned length = rng() % 15;
    for (unsigned k = 0; k < length; ++k) text += atoms[rng() % atoms.size()];
    texts.push_back(std::move(text));
  }
  return texts;
}

QString fixtures_dir() {
  return QStringLiteral(STUDIO_TEST_FIXTURES_DIR "/tokenizers");
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) out += (i > 0 ? ", " : "") + std::to_string(ids[i]);
  return out + "]";
}

}  // namespace studio::test
