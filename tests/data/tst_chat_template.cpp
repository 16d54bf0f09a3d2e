// Chat templates against literal LLaMA-Factory renderings (docs/templates.md), token boundaries
// of separately encoded elements, masking, mask_history, truncation, thoughts and pairs.
#include <QtTest>

#include <map>

#include "chat_tokenizers.h"
#include "studio/config/run_config.h"
#include "studio/data/chat_template.h"

using namespace studio::data;

namespace {

const std::string kTokDir = std::string(STUDIO_TEST_FIXTURES_DIR) + "/tokenizers/";

std::vector<Message> two_turns() {
  return {{Role::User, "Hi"}, {Role::Assistant, "Hello!"}, {Role::User, "Sum 2+2"}, {Role::Assistant, "4"}};
}

Conversation conversation(std::vector<Message> messages, std::string system = {}) {
  Conversation c;
  c.response = {messages.back()};
  messages.pop_back();
  c.prompt = std::move(messages);
  c.system = std::move(system);
  return c;
}

std::vector<int64_t> wide(const std::vector<int32_t>& ids) { return {ids.begin(), ids.end()}; }

std::vector<int64_t> cat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int64_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

std::vector<int64_t> ignored(std::size_t n) { return std::vector<int64_t>(n, kIgnoreIndex); }

std::vector<int32_t> head(const std::vector<int32_t>& ids, int64_t n) {
  return {ids.begin(), ids.begin() + n};
}

QString q(const std::string& s) { return QString::fromStdString(s); }

}  // namespace

class TestChatTemplate : public QObject {
  Q_OBJECT

 private:
  std::map<std::string, Tokenizer> tok_;
  const Tokenizer& tok(const std::string& name) { return tok_.at(name); }
  TemplateEncoder encoder(const std::string& tmpl, const std::string& tokenizer) {
    return TemplateEncoder(find_template(tmpl), tok(tokenizer));
  }

 private slots:
  void initTestCase() {
    for (const char* name : {"qwen2-style", "llama3-style", "mistral-metaspace-style", "llama2-style"})
      tok_.emplace(name, Tokenizer::load(kTokDir + name));
    // With the template tokens real Gemma, Phi and GLM tokenizers have (chat_tokenizers.h).
    for (const char* name : {"qwen2-style", "llama2-style"}) {
      const studio::test::TokenizerFiles f = studio::test::with_chat_tokens(name);
      tok_.emplace(std::string(name) + "+chat", Tokenizer::from_json(f.tokenizer_json, f.origin, f.config_json));
    }
  }

  void knowsTheTemplates() {
    const std::vector<std::string> names = {
        "qwen",  "qwen3",  "qwen3_nothink", "llama3", "mistral",   "default",    "alpaca",
        "empty", "llama2", "chatml",        "gemma",  "gemma2",    "gemma3",     "phi",
        "phi4",  "glm4",   "deepseek3",     "deepseekr1", "qwen3_5", "mistral_small", "ministral",
        "vicuna", "yi", "qwen3_5_nothink", "qwen3_6"};
    QCOMPARE(template_names(), names);
    // studio_config's copy (validation, the wizard's choices) is the same list.
    QCOMPARE(studio::known_templates(), names);
    for (const std::string& name : names) QCOMPARE(find_template(name).name, name);
  }

  void rendersTwoTurnsWithSystem_data() {
    QTest::addColumn<QString>("tmpl");
    QTest::addColumn<QString>("tokenizer");
    QTest::addColumn<QStringList>("turns");  // prompt 1, answer 1, prompt 2, answer 2
    const QString im = "<|im_start|>";
    const QString end = "<|im_end|>\n";
    const QStringList chatml = {im + "system\nBe brief." + end + im + "user\nHi" + end + im + "assistant\n",
                                "Hello!" + end, im + "user\nSum 2+2" + end + im + "assistant\n", "4" + end};
    QTest::newRow("qwen") << "qwen" << "qwen2-style" << chatml;
    QTest::newRow("qwen3_nothink") << "qwen3_nothink" << "qwen2-style" << chatml;
    QTest::newRow("qwen3") << "qwen3" << "qwen2-style"
                           << QStringList{chatml[0], "<think>\n\n</think>\n\nHello!" + end, chatml[2],
                                          "<think>\n\n</think>\n\n4" + end};
    QTest::newRow("llama3")
        << "llama3" << "llama3-style"
        << QStringList{"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
                       "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                       "<|start_header_id|>assistant<|end_header_id|>\n\n",
                       "Hello!<|eot_id|>",
                       "<|start_header_id|>user<|end_header_id|>\n\nSum 2+2<|eot_id|>"
                       "<|start_header_id|>assistant<|end_header_id|>\n\n",
                       "4<|eot_id|>"};
    QTest::newRow("mistral") << "mistral" << "mistral-metaspace-style"
                             << QStringList{"<s>[INST] Be brief.\n\nHi[/INST]", " Hello!</s>",
                                            "[INST] Sum 2+2[/INST]", " 4</s>"};
    QTest::newRow("default") << "default" << "llama2-style"
                             << QStringList{"System: Be brief.</s>\nHuman: Hi</s>\nAssistant:", "Hello!</s>\n",
                                            "Human: Sum 2+2</s>\nAssistant:", "4</s>\n"};
    QTest::newRow("alpaca") << "alpaca" << "llama2-style"
                            << QStringList{"Be brief.### Instruction:\nHi\n\n### Response:\n", "Hello!</s>\n\n",
                                           "### Instruction:\nSum 2+2\n\n### Response:\n", "4</s>\n\n"};
    QTest::newRow("empty") << "empty" << "qwen2-style" << QStringList{"Be brief.Hi", "Hello!", "Sum 2+2", "4"};

    // LLaMA-Factory 0.9.5's renderings of the same conversation (tst_chat_template_lf compares the
    // token ids with LF's own code). "+chat" tokenizers have the templates' special tokens; their
    // bos is <s>, eos </s> (llama2-style) or none, <|im_end|> (qwen2-style).
    QTest::newRow("chatml") << "chatml" << "qwen2-style" << chatml;
    QTest::newRow("yi") << "yi" << "qwen2-style" << chatml;
    QTest::newRow("qwen3_5") << "qwen3_5" << "qwen2-style"
                             << QStringList{chatml[0], "<think>\n\n</think>\n\nHello!" + end, chatml[2],
                                            "<think>\n\n</think>\n\n4" + end};
    QTest::newRow("qwen3_6") << "qwen3_6" << "qwen2-style"
                             << QStringList{chatml[0], "<think>\n\n</think>\n\nHello!" + end, chatml[2],
                                            "<think>\n\n</think>\n\n4" + end};
    QTest::newRow("qwen3_5_nothink") << "qwen3_5_nothink" << "qwen2-style" << chatml;
    QTest::newRow("llama2") << "llama2" << "llama2-style"
                            << QStringList{"<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]", "Hello!</s>",
                                           "<s>[INST] Sum 2+2 [/INST]", "4</s>"};
    const QStringList gemma = {"<s><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n",
                               "Hello!<end_of_turn>\n",
                               "<start_of_turn>user\nSum 2+2<end_of_turn>\n<start_of_turn>model\n",
                               "4<end_of_turn>\n"};
    QTest::newRow("gemma") << "gemma" << "llama2-style+chat" << gemma;
    QTest::newRow("gemma2") << "gemma2" << "llama2-style+chat" << gemma;  // + one eos at the end
    QTest::newRow("gemma3") << "gemma3" << "llama2-style+chat" << gemma;
    QTest::newRow("phi") << "phi" << "llama2-style+chat"
                         << QStringList{"<|system|>\nBe brief.<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n",
                                        "Hello!<|end|>\n", "<|user|>\nSum 2+2<|end|>\n<|assistant|>\n",
                                        "4<|end|>\n"};
    QTest::newRow("phi4") << "phi4" << "qwen2-style"
                          << QStringList{"<|im_start|>system<|im_sep|>Be brief.<|im_end|><|im_start|>user<|im_sep|>Hi"
                                         "<|im_end|><|im_start|>assistant<|im_sep|>",
                                         "Hello!<|im_end|>",
                                         "<|im_start|>user<|im_sep|>Sum 2+2<|im_end|><|im_start|>assistant<|im_sep|>",
                                         "4<|im_end|>"};
    QTest::newRow("glm4") << "glm4" << "qwen2-style+chat"  // + one eos at the end
                          << QStringList{"[gMASK]<sop><|system|>\nBe brief.<|user|>\nHi<|assistant|>", "\nHello!",
                                         "<|user|>\nSum 2+2<|assistant|>", "\n4"};
    const QString user1 = "<\uff5cUser\uff5c>Hi<\uff5cAssistant\uff5c>";
    const QString user2 = "<\uff5cUser\uff5c>Sum 2+2<\uff5cAssistant\uff5c>";
    QTest::newRow("deepseek3") << "deepseek3" << "llama2-style"
                               << QStringList{"<s>Be brief." + user1, "Hello!</s>", user2, "4</s>"};
    QTest::newRow("deepseekr1") << "deepseekr1" << "llama2-style"
                                << QStringList{"<s>Be brief." + user1, "<think>\n\n</think>\n\nHello!</s>", user2,
                                               "<think>\n\n</think>\n\n4</s>"};
    QTest::newRow("mistral_small") << "mistral_small" << "llama2-style"
                                   << QStringList{"<s>[SYSTEM_PROMPT]Be brief.[/SYSTEM_PROMPT][INST]Hi[/INST]",
                                                  "Hello!</s>", "[INST]Sum 2+2[/INST]", "4</s>"};
    QTest::newRow("ministral") << "ministral" << "llama2-style"
                               << QStringList{"<s>[INST]Be brief.\n\nHi[/INST]", "Hello!</s>", "[INST]Sum 2+2[/INST]",
                                              "4</s>"};
    QTest::newRow("vicuna") << "vicuna" << "llama2-style"
                            << QStringList{"Be brief.USER: Hi ASSISTANT:", "Hello!</s>", "USER: Sum 2+2 ASSISTANT:",
                                           "4</s>"};
  }

  void rendersTwoTurnsWithSystem() {
    QFETCH(QString, tmpl);
    QFETCH(QString, tokenizer);
    QFETCH(QStringList, turns);
    const TemplateEncoder enc = encoder(tmpl.toStdString(), tokenizer.toStdString());
    const auto rendered = enc.render_turns(two_turns(), "Be brief.", {});
    QCOMPARE(rendered.size(), std::size_t(2));
    QCOMPARE(q(rendered[0].prompt), turns[0]);
    QCOMPARE(q(rendered[0].response), turns[1]);
    QCOMPARE(q(rendered[1].prompt), turns[2]);
    QCOMPARE(q(rendered[1].response), turns[3]);
    QCOMPARE(q(enc.render(two_turns(), "Be brief.")), turns.join(""));
  }

  void defaultSystemPrompts_data() {
    QTest::addColumn<QString>("tmpl");
    QTest::addColumn<QString>("tokenizer");
    QTest::addColumn<QString>("prompt");
    QTest::newRow("qwen") << "qwen" << "qwen2-style"
                          << "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
                             "assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
    QTest::newRow("qwen3") << "qwen3" << "qwen2-style" << "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
    QTest::newRow("llama3") << "llama3" << "llama3-style"
                            << "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                               "<|start_header_id|>assistant<|end_header_id|>\n\n";
    QTest::newRow("mistral") << "mistral" << "mistral-metaspace-style" << "<s>[INST] Hi[/INST]";
    QTest::newRow("default") << "default" << "llama2-style" << "Human: Hi</s>\nAssistant:";
    QTest::newRow("alpaca") << "alpaca" << "llama2-style"
                            << "Below is an instruction that describes a task. Write a response that "
                               "appropriately completes the request.\n\n### Instruction:\nHi\n\n### Response:\n";
    QTest::newRow("vicuna") << "vicuna" << "llama2-style"
                            << "A chat between a curious user and an artificial intelligence assistant. The "
                               "assistant gives helpful, detailed, and polite answers to the user's questions."
                               "USER: Hi ASSISTANT:";
    QTest::newRow("llama2") << "llama2" << "llama2-style" << "<s>[INST] Hi [/INST]";
    QTest::newRow("gemma") << "gemma" << "llama2-style+chat"
                           << "<s><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n";
    QTest::newRow("glm4") << "glm4" << "qwen2-style+chat" << "[gMASK]<sop><|user|>\nHi<|assistant|>";
  }

  void defaultSystemPrompts() {
    QFETCH(QString, tmpl);
    QFETCH(QString, tokenizer);
    QFETCH(QString, prompt);
    const auto turns = encoder(tmpl.toStdString(), tokenizer.toStdString())
                           .render_turns({{Role::User, "Hi"}, {Role::Assistant, "Yo"}}, "", {});
    QCOMPARE(q(turns[0].prompt), prompt);
  }

  // Each element is tokenized on its own, as LF does: system, then user, then answer and eos.
  void encodesElementsSeparately() {
    const Tokenizer& t = tok("qwen2-style");
    const TemplateEncoder enc = encoder("alpaca", "qwen2-style");
    const auto turns = enc.encode_turns({{Role::User, "Hi"}, {Role::Assistant, "Hello!"}}, "Be brief.", {});
    const auto system = t.encode("Be brief.");
    const auto user = t.encode("### Instruction:\nHi\n\n### Response:\n");
    QCOMPARE(wide(turns[0].prompt), cat({system, user}));
    // Where a boundary splits a word the tokens differ from the joined text's: "The ans" +
    // "wer is" is not "The answer is".
    const auto split = encoder("empty", "qwen2-style").encode_turns({{Role::User, "wer is"}, {Role::Assistant, "x"}}, "The ans", {});
    QCOMPARE(wide(split[0].prompt), cat({t.encode("The ans"), t.encode("wer is")}));
    QVERIFY(split[0].prompt != t.encode("The answer is"));
    QCOMPARE(wide(turns[0].response), cat({t.encode("Hello!"), {*t.token_to_id("<|im_end|>")}, t.encode("\n\n")}));

    const TemplateEncoder m = encoder("mistral", "mistral-metaspace-style");
    const Tokenizer& mt = tok("mistral-metaspace-style");
    const auto mturns = m.encode_turns({{Role::User, "Hi"}, {Role::Assistant, "Hello!"}}, "", {});
    QCOMPARE(wide(mturns[0].prompt), cat({{1}, mt.encode("[INST] Hi[/INST]")}));
    QCOMPARE(wide(mturns[0].response), cat({mt.encode(" Hello!"), {2}}));

    const Tokenizer& lt = tok("llama3-style");
    const auto lturns = encoder("llama3", "llama3-style").encode_turns({{Role::User, "Hi"}, {Role::Assistant, "Yo"}}, "S", {});
    QCOMPARE(wide(lturns[0].prompt),
             cat({{*lt.bos_id()}, lt.encode("<|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"),
                  lt.encode("<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")}));
    QCOMPARE(wide(lturns[0].response), wide(lt.encode("Yo<|eot_id|>")));
  }

  void masksPromptsAndHistory_data() {
    QTest::addColumn<bool>("trainOnPrompt");
    QTest::addColumn<bool>("maskHistory");
    QTest::newRow("default") << false << false;
    QTest::newRow("train_on_prompt") << true << false;
    QTest::newRow("mask_history") << false << true;
    QTest::newRow("both") << true << true;
  }

  void masksPromptsAndHistory() {
    QFETCH(bool, trainOnPrompt);
    QFETCH(bool, maskHistory);
    const TemplateEncoder enc = encoder("qwen", "qwen2-style");
    EncodeOptions opt;
    opt.train_on_prompt = trainOnPrompt;
    opt.mask_history = maskHistory;
    const auto t = enc.encode_turns(two_turns(), "Be brief.", opt);
    const EncodedSft e = enc.encode_supervised(conversation(two_turns(), "Be brief."), opt);
    QCOMPARE(e.sample.input_ids, cat({t[0].prompt, t[0].response, t[1].prompt, t[1].response}));
    auto prompt_labels = [&](const std::vector<int32_t>& p) { return trainOnPrompt ? wide(p) : ignored(p.size()); };
    std::vector<int64_t> labels = prompt_labels(t[0].prompt);
    const auto first = maskHistory ? ignored(t[0].response.size()) : wide(t[0].response);
    labels.insert(labels.end(), first.begin(), first.end());
    const auto p2 = prompt_labels(t[1].prompt);
    labels.insert(labels.end(), p2.begin(), p2.end());
    labels.insert(labels.end(), t[1].response.begin(), t[1].response.end());
    QCOMPARE(e.sample.labels, labels);
    QCOMPARE(e.full_length, int64_t(e.sample.input_ids.size()));
  }

  void infersSequenceLengths_data() {
    QTest::addColumn<qint64>("source");
    QTest::addColumn<qint64>("target");
    QTest::addColumn<qint64>("cutoff");
    QTest::addColumn<qint64>("keptSource");
    QTest::addColumn<qint64>("keptTarget");
    QTest::newRow("fits") << qint64(3) << qint64(3) << qint64(10) << qint64(3) << qint64(3);
    QTest::newRow("short target, long prompt") << qint64(100) << qint64(5) << qint64(50) << qint64(45) << qint64(5);
    QTest::newRow("short prompt, long target") << qint64(10) << qint64(100) << qint64(50) << qint64(10) << qint64(40);
    QTest::newRow("both long, proportional") << qint64(60) << qint64(40) << qint64(50) << qint64(30) << qint64(20);
    QTest::newRow("int() truncates") << qint64(70) << qint64(30) << qint64(50) << qint64(35) << qint64(15);
    QTest::newRow("odd sizes") << qint64(7) << qint64(13) << qint64(9) << qint64(4) << qint64(5);
  }

  void infersSequenceLengths() {
    QFETCH(qint64, source);
    QFETCH(qint64, target);
    QFETCH(qint64, cutoff);
    QFETCH(qint64, keptSource);
    QFETCH(qint64, keptTarget);
    const auto [s, t] = infer_seqlen(source, target, cutoff);
    QCOMPARE(qint64(s), keptSource);
    QCOMPARE(qint64(t), keptTarget);
  }

  // The second turn gets what the first left over; a turn that finds no budget is dropped.
  void truncatesTurnByTurn() {
    const TemplateEncoder enc = encoder("qwen", "qwen2-style");
    std::vector<Message> msgs = {{Role::User, "Hi"}, {Role::Assistant, "Hello!"},
                                 {Role::User, "Please repeat the following words many times over"},
                                 {Role::Assistant, "words many times over and over and over again, endlessly"}};
    const auto t = enc.encode_turns(msgs, "", {});
    const auto first = static_cast<int64_t>(t[0].prompt.size() + t[0].response.size());
    EncodeOptions opt;
    opt.cutoff_len = first + 12;
    const auto [ks, kt] = infer_seqlen(int64_t(t[1].prompt.size()), int64_t(t[1].response.size()), 12);
    const EncodedSft e = enc.encode_supervised(conversation(msgs), opt);
    QCOMPARE(e.sample.input_ids, cat({t[0].prompt, t[0].response, {t[1].prompt.begin(), t[1].prompt.begin() + ks},
                                      {t[1].response.begin(), t[1].response.begin() + kt}}));
    QCOMPARE(int64_t(e.sample.input_ids.size()), opt.cutoff_len);
    QVERIFY(e.full_length > opt.cutoff_len);

    opt.cutoff_len = first;  // nothing left for turn 2
    const EncodedSft cut = enc.encode_supervised(conversation(msgs), opt);
    QCOMPARE(cut.sample.input_ids, cat({t[0].prompt, t[0].response}));

    opt.mask_history = true;  // the last turn goes first and keeps the budget
    opt.cutoff_len = 10;
    const auto [ls, lt] = infer_seqlen(int64_t(t[1].prompt.size()), int64_t(t[1].response.size()), 10);
    const EncodedSft last = enc.encode_supervised(conversation(msgs), opt);
    QCOMPARE(last.sample.input_ids, cat({{t[1].prompt.begin(), t[1].prompt.begin() + ls},
                                         {t[1].response.begin(), t[1].response.begin() + lt}}));
    QCOMPARE(last.sample.labels.back(), int64_t(t[1].response[static_cast<std::size_t>(lt - 1)]));
  }

  void promptLongerThanCutoff() {
    const TemplateEncoder enc = encoder("qwen", "qwen2-style");
    std::string long_prompt;
    for (int i = 0; i < 50; ++i) long_prompt += "word" + std::to_string(i) + " ";
    const std::vector<Message> msgs = {{Role::User, long_prompt}, {Role::Assistant, "ok"}};
    const auto t = enc.encode_turns(msgs, "", {});
    EncodeOptions opt;
    opt.cutoff_len = 16;
    const EncodedSft e = enc.encode_supervised(conversation(msgs), opt);
    const int64_t answer = int64_t(t[0].response.size());
    QCOMPARE(e.sample.input_ids, cat({{t[0].prompt.begin(), t[0].prompt.begin() + 16 - answer}, t[0].response}));
    std::vector<int64_t> labels = ignored(static_cast<std::size_t>(16 - answer));
    labels.insert(labels.end(), t[0].response.begin(), t[0].response.end());
    QCOMPARE(e.sample.labels, labels);
    QCOMPARE(e.full_length, int64_t(t[0].prompt.size()) + answer);
  }

  void reasoningThoughts_data() {
    QTest::addColumn<bool>("enableThinking");
    QTest::addColumn<bool>("maskHistory");
    QTest::addColumn<QStringList>("turns");
    const QString p1 = "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\n";
    const QString p2 = "<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n";
    const QString empty = "<think>\n\n</think>\n\n";
    const QString thought = "<think>\nplan\n</think>\n\n";
    QTest::newRow("thinking") << true << false
                              << QStringList{p1, thought + "A1<|im_end|>\n", p2, empty + "A2<|im_end|>\n"};
    QTest::newRow("thinking, mask_history drops history thoughts")
        << true << true << QStringList{p1, "A1<|im_end|>\n", p2, empty + "A2<|im_end|>\n"};
    QTest::newRow("not thinking") << false << false
                                  << QStringList{p1 + empty, "A1<|im_end|>\n", p2 + empty, "A2<|im_end|>\n"};
    QTest::newRow("not thinking, mask_history")
        << false << true << QStringList{p1, "A1<|im_end|>\n", p2 + empty, "A2<|im_end|>\n"};
  }

  void reasoningThoughts() {
    QFETCH(bool, enableThinking);
    QFETCH(bool, maskHistory);
    QFETCH(QStringList, turns);
    EncodeOptions opt;
    opt.enable_thinking = enableThinking;
    opt.mask_history = maskHistory;
    const std::vector<Message> msgs = {{Role::User, "Q1"}, {Role::Assistant, "<think>\nplan\n</think>\n\nA1"},
                                       {Role::User, "Q2"}, {Role::Assistant, "A2"}};
    const auto r = encoder("qwen3", "qwen2-style").render_turns(msgs, "", opt);
    QCOMPARE(q(r[0].prompt), turns[0]);
    QCOMPARE(q(r[0].response), turns[1]);
    QCOMPARE(q(r[1].prompt), turns[2]);
    QCOMPARE(q(r[1].response), turns[3]);
  }

  // The empty thought is its own element: encoded alone and put before the answer (learned).
  void reasoningEncodesThoughtSeparately() {
    const Tokenizer& t = tok("qwen2-style");
    const auto turns = encoder("qwen3", "qwen2-style").encode_turns({{Role::User, "Q"}, {Role::Assistant, "A"}}, "", {});
    QCOMPARE(wide(turns[0].response), cat({t.encode("<think>\n\n</think>\n\n"), t.encode("A<|im_end|>\n")}));
  }

  void pairsShareThePrompt() {
    const TemplateEncoder enc = encoder("qwen3", "qwen2-style");
    Conversation c;
    c.prompt = {{Role::User, "Q1"}, {Role::Assistant, "<think>\nold\n</think>\n\nA1"}, {Role::User, "Q2"}};
    c.response = {{Role::Assistant, "right"}, {Role::Assistant, "wrong answer here"}};
    const auto one = enc.render_turns({c.prompt[0], c.prompt[1], c.prompt[2], c.response[0]}, "", {}, true);
    QCOMPARE(one.size(), std::size_t(1));  // history thoughts go in one-turn mode
    QCOMPARE(q(one[0].prompt), QString("<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
                                       "<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n"));
    QCOMPARE(q(one[0].response), QString("<think>\n\n</think>\n\nright<|im_end|>\n"));

    EncodeOptions opt;
    const EncodedPair e = enc.encode_pairwise(c, opt);
    const auto chosen = enc.encode_turns({c.prompt[0], c.prompt[1], c.prompt[2], c.response[0]}, "", opt, true)[0];
    const auto rejected = enc.encode_turns({c.prompt[0], c.prompt[1], c.prompt[2], c.response[1]}, "", opt, true)[0];
    QCOMPARE(e.pair.prompt_len, int64_t(chosen.prompt.size()));
    QCOMPARE(e.pair.chosen.input_ids, cat({chosen.prompt, chosen.response}));
    QCOMPARE(e.pair.rejected.input_ids, cat({chosen.prompt, rejected.response}));
    std::vector<int64_t> labels = ignored(chosen.prompt.size());
    labels.insert(labels.end(), rejected.response.begin(), rejected.response.end());
    QCOMPARE(e.pair.rejected.labels, labels);

    opt.cutoff_len = 12;  // the longer answer decides the target length of both
    const EncodedPair cut = enc.encode_pairwise(c, opt);
    const auto [ks, kt] = infer_seqlen(int64_t(chosen.prompt.size()), int64_t(rejected.response.size()), 12);
    QCOMPARE(cut.pair.prompt_len, ks);
    QCOMPARE(cut.pair.rejected.input_ids, cat({head(chosen.prompt, ks), head(rejected.response, kt)}));
    QCOMPARE(cut.pair.chosen.input_ids.size(), std::size_t(ks) + std::min(chosen.response.size(), std::size_t(kt)));
  }

  // A template with LF's efficient_eos: answers carry no eos; it is learned at the next prompt's
  // first token and appended once at the end.
  void efficientEos() {
    ChatTemplate t;
    t.name = "efficient";
    t.user = {{SlotElement::Kind::Text, "Q: {{content}}\nA:"}};
    t.assistant = {{SlotElement::Kind::Text, "{{content}}\n"}};
    t.system = {{SlotElement::Kind::Text, "{{content}}"}};
    t.observation = t.user;
    t.efficient_eos = true;
    const TemplateEncoder enc(t, tok("llama2-style"));
    const auto turns = enc.encode_turns(two_turns(), "", {});
    const EncodedSft e = enc.encode_supervised(conversation(two_turns()), {});
    std::vector<int64_t> labels = ignored(turns[0].prompt.size());
    labels.insert(labels.end(), turns[0].response.begin(), turns[0].response.end());
    labels.push_back(2);  // </s> at the first token of prompt 2
    const auto rest = ignored(turns[1].prompt.size() - 1);
    labels.insert(labels.end(), rest.begin(), rest.end());
    labels.insert(labels.end(), turns[1].response.begin(), turns[1].response.end());
    labels.push_back(2);
    QCOMPARE(e.sample.labels, labels);
    QCOMPARE(e.sample.input_ids.back(), int64_t(2));
    EncodeOptions train_prompt;
    train_prompt.train_on_prompt = true;
    QVERIFY_THROWS_EXCEPTION(TemplateError, enc.encode_supervised(conversation(two_turns()), train_prompt));
  }

  // gemma2 and glm4 (LF's efficient_eos): the answers carry no eos; the tokenizer's eos is learned
  // at the next prompt's first token and once at the end.
  void efficientEosTemplates_data() {
    QTest::addColumn<QString>("tmpl");
    QTest::addColumn<QString>("tokenizer");
    QTest::newRow("gemma2") << "gemma2" << "llama2-style+chat";
    QTest::newRow("glm4") << "glm4" << "qwen2-style+chat";
  }

  void efficientEosTemplates() {
    QFETCH(QString, tmpl);
    QFETCH(QString, tokenizer);
    const TemplateEncoder enc = encoder(tmpl.toStdString(), tokenizer.toStdString());
    QCOMPARE(std::optional<int32_t>(enc.eos_id()), tok(tokenizer.toStdString()).eos_id());
    const auto t = enc.encode_turns(two_turns(), "Be brief.", {});
    const EncodedSft e = enc.encode_supervised(conversation(two_turns(), "Be brief."), {});
    const int64_t eos = enc.eos_id();
    QCOMPARE(e.sample.input_ids, cat({t[0].prompt, t[0].response, t[1].prompt, t[1].response, {int32_t(eos)}}));
    QCOMPARE(e.sample.labels[t[0].prompt.size() + t[0].response.size()], eos);
    QCOMPARE(e.sample.labels.back(), eos);
    EncodeOptions train_prompt;
    train_prompt.train_on_prompt = true;
    QVERIFY_THROWS_EXCEPTION(TemplateError, enc.encode_supervised(conversation(two_turns()), train_prompt));
  }

  // LF makes stop words special tokens (and a replaced eos the eos): a tokenizer without them would
  // get new embedding rows there, so the pairing is refused, naming the token.
  void refusesMissingTemplateTokens_data() {
    QTest::addColumn<QString>("tmpl");
    QTest::addColumn<QString>("tokenizer");
    QTest::addColumn<QString>("token");
    QTest::newRow("gemma's eos") << "gemma" << "llama2-style" << "<end_of_turn>";
    QTest::newRow("gemma2's stop word") << "gemma2" << "llama2-style" << "<end_of_turn>";
    QTest::newRow("phi's eos") << "phi" << "qwen2-style" << "<|end|>";
    QTest::newRow("glm4's stop word") << "glm4" << "qwen2-style" << "<|user|>";
    QTest::newRow("chatml's stop word") << "chatml" << "llama2-style+chat" << "<|im_start|>";
    QTest::newRow("yi's stop word") << "yi" << "llama2-style" << "<|im_end|>";
  }

  void refusesMissingTemplateTokens() {
    QFETCH(QString, tmpl);
    QFETCH(QString, tokenizer);
    QFETCH(QString, token);
    if (tokenizer.endsWith("+chat")) {  // has every token: the stop word must encode whole
      QVERIFY(tok(tokenizer.toStdString()).encode(token.toStdString()).size() == 1);
      encoder(tmpl.toStdString(), tokenizer.toStdString());
      return;
    }
    try {
      encoder(tmpl.toStdString(), tokenizer.toStdString());
      QFAIL("no error");
    } catch (const TemplateError& e) {
      QVERIFY2(QString(e.what()).contains(token), e.what());
    }
  }

  void errors() {
    try {
      find_template("llama9");
      QFAIL("no error");
    } catch (const TemplateError& e) {
      QCOMPARE(QString(e.what()), QString("unknown template 'llama9' (allowed: qwen, qwen3, qwen3_nothink, llama3, "
                                          "mistral, default, alpaca, empty, llama2, chatml, gemma, gemma2, gemma3, "
                                          "phi, phi4, glm4, deepseek3, deepseekr1, qwen3_5, mistral_small, "
                                          "ministral, vicuna, yi, qwen3_5_nothink, qwen3_6)"));
    }
    try {
      encoder("qwen", "llama2-style");
      QFAIL("no error");
    } catch (const TemplateError& e) {
      QVERIFY2(QString(e.what()).contains("<|im_end|>"), e.what());
    }
    const TemplateEncoder enc = encoder("qwen", "qwen2-style");
    QVERIFY_THROWS_EXCEPTION(TemplateError, enc.render_turns({{Role::User, "only a query"}}, "", {}));
    QVERIFY_THROWS_EXCEPTION(TemplateError,
                             enc.render_turns({{Role::User, "q"}, {Role::Function, "{}"}}, "", {}));
  }
};

QTEST_MAIN(TestChatTemplate)
#include "tst_chat_template.moc"
