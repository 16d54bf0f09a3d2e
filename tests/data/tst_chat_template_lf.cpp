// Every chat template against LLaMA-Factory itself: the token ids of each (prompt, response) turn
// that LF's Template.encode_multiturn produces after get_template_and_fix_tokenizer, from
// tests/reference/lf_template.py run with LF's own environment (scripts/setup.sh installs it; the
// test fails, never skips, without it). All requests go to one Python process in initTestCase.
//
// The tokenizers are the fixtures plus the template tokens real models have (chat_tokenizers.h).
// Where a tokenizer still lacks a token the template needs, LF's fix_special_tokens adds it as a
// new id and studio_data refuses the pairing: such a row checks that LF did add a token, and every
// template must match LF on at least two tokenizers. lf_template.py says why it loads the
// tokenizer.json as written rather than through transformers' model classes.
#include <QTemporaryDir>
#include <QtTest>

#include <map>

#include <nlohmann/json.hpp>

#include "chat_tokenizers.h"
#include "reference_run.h"
#include "studio/data/chat_template.h"

using namespace studio::data;
using nlohmann::json;

namespace {

// "+chat": with the template tokens; the plain fixture shows the refusals.
const char* const kTokenizers[] = {"llama2-style+chat", "qwen2-style+chat", "llama3-style+chat",
                                   "qwen2-style"};

struct Case {
  const char* name;
  const char* system;
  bool thought;  // the first answer carries a <think> block
  bool enable_thinking;
  bool mask_history;
};
const Case kCases[] = {{"system", "Be brief.", false, true, false},
                       {"default system", "", false, true, false},
                       {"thought", "Be brief.", true, true, false},
                       {"not thinking", "", true, false, false},
                       {"mask_history", "", true, true, true}};

std::vector<Message> messages(const Case& c) {
  return {{Role::User, "Hi"},
          {Role::Assistant, c.thought ? "<think>\nadd them\n</think>\n\nHello!" : "Hello!"},
          {Role::User, "Sum 2+2"},
          {Role::Assistant, "4"}};
}

std::string key(const std::string& tmpl, const std::string& tokenizer, const std::string& c) {
  return tmpl + " | " + tokenizer + " | " + c;
}

QString ids_text(const std::vector<int32_t>& ids) {
  QStringList parts;
  for (int32_t id : ids) parts << QString::number(id);
  return "[" + parts.join(", ") + "]";
}

}  // namespace

class TestChatTemplateLf : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  std::map<std::string, Tokenizer> tok_;
  std::map<std::string, json> answers_;    // by key()
  std::map<std::string, int> matched_on_;  // template -> tokenizers it matched LF on
  int refused_ = 0;

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    json requests = json::array();
    std::vector<std::string> keys;
    for (const char* fixture : kTokenizers) {
      const QString name(fixture);
      const studio::test::TokenizerFiles files = studio::test::with_chat_tokens(
          name.section('+', 0, 0).toStdString(), name.endsWith("+chat"));
      const QString folder = dir_.filePath(name);
      QVERIFY(studio::test::write_tokenizer(files, folder));
      tok_.emplace(fixture,
                   Tokenizer::from_json(files.tokenizer_json, files.origin, files.config_json));
      for (const std::string& tmpl : template_names()) {
        for (const Case& c : kCases) {
          json msgs = json::array();
          for (const Message& m : messages(c))
            msgs.push_back(
                {{"role", m.role == Role::User ? "user" : "assistant"}, {"content", m.content}});
          requests.push_back({{"template", tmpl},
                              {"tokenizer", folder.toStdString()},
                              {"system", c.system},
                              {"messages", msgs},
                              {"enable_thinking", c.enable_thinking},
                              {"mask_history", c.mask_history}});
          keys.push_back(key(tmpl, fixture, c.name));
        }
      }
    }

    QString error;
    const auto reply = studio::test::run_reference(QStringLiteral(STUDIO_LLAMAFACTORY_PYTHON),
                                                   "lf_template.py", requests.dump(), error);
    QVERIFY2(reply, qPrintable(error));
    const json& answers = *reply;
    QCOMPARE(answers.size(), keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) answers_[keys[i]] = answers[i];
  }

  void matchesLlamaFactory_data() {
    QTest::addColumn<QString>("tmpl");
    QTest::addColumn<QString>("tokenizer");
    QTest::addColumn<int>("caseIndex");
    for (const std::string& tmpl : template_names())
      for (const char* fixture : kTokenizers)
        for (int i = 0; i < int(std::size(kCases)); ++i)
          QTest::addRow("%s, %s, %s", tmpl.c_str(), fixture, kCases[i].name)
              << QString::fromStdString(tmpl) << QString(fixture) << i;
  }

  void matchesLlamaFactory() {
    QFETCH(QString, tmpl);
    QFETCH(QString, tokenizer);
    QFETCH(int, caseIndex);
    const Case& c = kCases[caseIndex];
    const json& lf = answers_.at(key(tmpl.toStdString(), tokenizer.toStdString(), c.name));
    std::optional<TemplateEncoder> enc;
    try {
      enc.emplace(find_template(tmpl.toStdString()), tok_.at(tokenizer.toStdString()));
    } catch (const TemplateError& e) {
      // Refused: LF must have needed a token this tokenizer lacks (a new embedding row).
      QVERIFY2(!lf.at("added_tokens").empty(),
               qPrintable(QString("studio_data refuses (%1) but LF added no token").arg(e.what())));
      ++refused_;
      return;
    }
    EncodeOptions opt;
    opt.enable_thinking = c.enable_thinking;
    opt.mask_history = c.mask_history;
    const auto ours = enc->encode_turns(messages(c), c.system, opt);
    const json& turns = lf.at("turns");
    QCOMPARE(ours.size(), turns.size());
    for (std::size_t t = 0; t < ours.size(); ++t) {
      const auto prompt = turns[t].at("prompt").get<std::vector<int32_t>>();
      const auto response = turns[t].at("response").get<std::vector<int32_t>>();
      QVERIFY2(ours[t].prompt == prompt,
               qPrintable(QString("turn %1 prompt: ours %2, LF %3")
                              .arg(t + 1)
                              .arg(ids_text(ours[t].prompt), ids_text(prompt))));
      QVERIFY2(ours[t].response == response,
               qPrintable(QString("turn %1 response: ours %2, LF %3")
                              .arg(t + 1)
                              .arg(ids_text(ours[t].response), ids_text(response))));
    }
    if (caseIndex == 0) ++matched_on_[tmpl.toStdString()];
  }

  void everyTemplateOnTwoTokenizers() {
    QVERIFY(refused_ > 0);  // the plain fixture lacks Gemma's, Phi's, GLM's and Llama 3's tokens
    for (const std::string& tmpl : template_names())
      QVERIFY2(matched_on_[tmpl] >= 2, qPrintable(QString("%1 matched LF on %2 tokenizers")
                                                      .arg(QString::fromStdString(tmpl))
                                                      .arg(matched_on_[tmpl])));
  }
};

QTEST_MAIN(TestChatTemplateLf)
#include "tst_chat_template_lf.moc"
