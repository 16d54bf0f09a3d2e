// The studio's side of `studio-train chat --json` without the engine: event lines read field by
// field (an odd field costs that field only), the stdout stream cut anywhere into chunks, the
// request lines and the command line.
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>

#include "studio/ui/chat/chat_protocol.h"

using studio::ui::ChatAnswer;
using studio::ui::ChatEvent;
using studio::ui::ChatEventReader;
using studio::ui::ChatMessage;
using studio::ui::ChatOptions;
using studio::ui::ChatSampling;

namespace {

// Lines as the engine writes them (docs/CHAT.md).
const QByteArray kReady =
    R"({"architecture":"Qwen2ForCausalLM","device":"cpu","dtype":"float32","event":"ready",)"
    R"("load_seconds":0.4,"model":"/abs/out/checkpoint-4","parameters":623168,"stop_ids":[4258],)"
    R"("stop_words":[],"template":"qwen","template_source":"config.yaml"})";
const QByteArray kDone =
    R"({"event":"done","ids":[327,163,4131],"new_tokens":3,"prefill_seconds":0.002,)"
    R"("prompt_ids":[4257,82],"prompt_tokens":2,"seconds":0.25,"stop":"length",)"
    R"("text":"Sequence parallelism","tokens_per_sec":8.5})";

// kDone with one field replaced.
QByteArray doneWith(const char* key, const QJsonValue& value) {
  QJsonObject o = QJsonDocument::fromJson(kDone).object();
  o.insert(QLatin1String(key), value);
  return QJsonDocument(o).toJson(QJsonDocument::Compact);
}

}  // namespace

class TestChatProtocol : public QObject {
  Q_OBJECT

 private slots:
  void readsEveryEvent();
  void kinds_data();
  void kinds();
  void oddFieldCostsThatFieldOnly_data();
  void oddFieldCostsThatFieldOnly();
  void linesCutAnywhere_data();
  void linesCutAnywhere();
  void requestLine_data();
  void requestLine();
  void arguments_data();
  void arguments();
};

void TestChatProtocol::readsEveryEvent() {
  const ChatEvent ready = studio::ui::parseChatEvent(kReady);
  QCOMPARE(ready.kind, ChatEvent::Kind::Ready);
  QCOMPARE(ready.info.model, QStringLiteral("/abs/out/checkpoint-4"));
  QCOMPARE(ready.info.architecture, QStringLiteral("Qwen2ForCausalLM"));
  QCOMPARE(ready.info.templateName, QStringLiteral("qwen"));
  QCOMPARE(ready.info.templateSource, QStringLiteral("config.yaml"));
  QCOMPARE(ready.info.device, QStringLiteral("cpu"));
  QCOMPARE(ready.info.dtype, QStringLiteral("float32"));
  QCOMPARE(ready.info.parameters, 623168);
  QCOMPARE(ready.info.loadSeconds, 0.4);
  QVERIFY(ready.problems.isEmpty());

  const ChatEvent done = studio::ui::parseChatEvent(kDone);
  QCOMPARE(done.kind, ChatEvent::Kind::Done);
  const ChatAnswer& a = done.answer;
  QCOMPARE(a.text, QStringLiteral("Sequence parallelism"));
  QCOMPARE(a.ids, (QList<qint64>{327, 163, 4131}));
  QCOMPARE(a.promptTokens, 2);
  QCOMPARE(a.newTokens, 3);
  QCOMPARE(a.stop, QStringLiteral("length"));
  QCOMPARE(a.seconds, 0.25);
  QCOMPARE(a.tokensPerSec, 8.5);
  QVERIFY(done.problems.isEmpty());
}

void TestChatProtocol::kinds_data() {
  QTest::addColumn<QByteArray>("line");
  QTest::addColumn<ChatEvent::Kind>("kind");
  QTest::addColumn<QString>("text");
  QTest::newRow("token") << QByteArray(R"({"event":"token","text":"Hé \"x\"\n"})")
                         << ChatEvent::Kind::Token << QStringLiteral("Hé \"x\"\n");
  QTest::newRow("empty token") << QByteArray(R"({"event":"token","text":""})")
                               << ChatEvent::Kind::Token << QString();
  QTest::newRow("error") << QByteArray(R"({"event":"error","message":"top_p must be in (0, 1]"})")
                         << ChatEvent::Kind::Error << QStringLiteral("top_p must be in (0, 1]");
  QTest::newRow("unknown event") << QByteArray(R"({"event":"progress","n":1})")
                                 << ChatEvent::Kind::Unknown
                                 << QStringLiteral(R"({"event":"progress","n":1})");
  QTest::newRow("no event") << QByteArray(R"({"text":"x"})") << ChatEvent::Kind::Unknown
                            << QStringLiteral(R"({"text":"x"})");
  QTest::newRow("not JSON") << QByteArray("Loading weights...") << ChatEvent::Kind::NotJson
                            << QStringLiteral("Loading weights...");
  QTest::newRow("JSON, not an object")
      << QByteArray("[1,2]") << ChatEvent::Kind::NotJson << QStringLiteral("[1,2]");
}

void TestChatProtocol::kinds() {
  QFETCH(QByteArray, line);
  QFETCH(ChatEvent::Kind, kind);
  QFETCH(QString, text);
  const ChatEvent e = studio::ui::parseChatEvent(line);
  QCOMPARE(e.kind, kind);
  QCOMPARE(e.text, text);
  QVERIFY(e.problems.isEmpty());
}

// One field of an unexpected type: that field reads as empty and is reported by name; the other
// fields of the event are all there.
void TestChatProtocol::oddFieldCostsThatFieldOnly_data() {
  QTest::addColumn<QByteArray>("line");
  QTest::addColumn<QString>("problem");
  QTest::newRow("new_tokens a string") << doneWith("new_tokens", QStringLiteral("3"))
                                       << QStringLiteral("done: new_tokens: not an integer");
  QTest::newRow("new_tokens a fraction")
      << doneWith("new_tokens", 2.5) << QStringLiteral("done: new_tokens: not an integer");
  QTest::newRow("ids with a string") << doneWith("ids", QJsonArray{1, QStringLiteral("2")})
                                     << QStringLiteral("done: ids: not a list of integers");
  QTest::newRow("ids an object") << doneWith("ids", QJsonObject{})
                                 << QStringLiteral("done: ids: not a list of integers");
  QTest::newRow("seconds null") << doneWith("seconds", QJsonValue::Null)
                                << QStringLiteral("done: seconds: not a number");
  QTest::newRow("stop a number") << doneWith("stop", 1)
                                 << QStringLiteral("done: stop: not a string");
}

void TestChatProtocol::oddFieldCostsThatFieldOnly() {
  QFETCH(QByteArray, line);
  QFETCH(QString, problem);
  const ChatEvent e = studio::ui::parseChatEvent(line);
  QCOMPARE(e.kind, ChatEvent::Kind::Done);
  QCOMPARE(e.problems.size(), 1);
  QVERIFY2(e.problems.front().startsWith(problem), qPrintable(e.problems.front()));
  const ChatAnswer& a = e.answer;
  const QString odd = problem.section(QLatin1String(": "), 1, 1);
  QCOMPARE(a.text, QStringLiteral("Sequence parallelism"));
  QCOMPARE(a.promptTokens, 2);
  QCOMPARE(a.newTokens, odd == QLatin1String("new_tokens") ? 0 : 3);
  QCOMPARE(a.ids, odd == QLatin1String("ids") ? QList<qint64>{} : (QList<qint64>{327, 163, 4131}));
  QCOMPARE(a.seconds, odd == QLatin1String("seconds") ? 0 : 0.25);
  QCOMPARE(a.stop, odd == QLatin1String("stop") ? QString() : QStringLiteral("length"));
  QCOMPARE(a.tokensPerSec, 8.5);
}

// The same stream, fed whole, byte by byte, or cut at every position into two chunks, gives the
// same events; a partial last line waits for its newline.
void TestChatProtocol::linesCutAnywhere_data() {
  QTest::addColumn<QByteArray>("stream");
  QTest::addColumn<int>("events");
  const QByteArray token = R"({"event":"token","text":"naïve ✓"})";
  QTest::newRow("LF") << kReady + '\n' + token + '\n' + kDone + '\n' << 3;
  QTest::newRow("CRLF") << kReady + "\r\n" + token + "\r\n" + kDone + "\r\n" << 3;
  QTest::newRow("blank lines") << "\n" + kReady + "\n\n  \n" + token + '\n' << 2;
  QTest::newRow("no final newline") << kReady + '\n' + token << 1;
}

void TestChatProtocol::linesCutAnywhere() {
  QFETCH(QByteArray, stream);
  QFETCH(int, events);
  auto kinds = [](const QList<ChatEvent>& list) {
    QList<ChatEvent::Kind> out;
    for (const ChatEvent& e : list) out << e.kind;
    return out;
  };
  ChatEventReader whole;
  const QList<ChatEvent> expected = whole.feed(stream);
  QCOMPARE(expected.size(), events);
  for (const ChatEvent& e : expected) QVERIFY(e.problems.isEmpty());
  QCOMPARE(whole.pendingBytes(), stream.size() - (stream.lastIndexOf('\n') + 1));

  ChatEventReader bytes;
  QList<ChatEvent> got;
  for (char c : stream) got += bytes.feed(QByteArray(1, c));
  QCOMPARE(kinds(got), kinds(expected));
  for (qsizetype cut = 0; cut <= stream.size(); ++cut) {
    ChatEventReader two;
    QList<ChatEvent> parts = two.feed(stream.left(cut));
    parts += two.feed(stream.mid(cut));
    QCOMPARE(kinds(parts), kinds(expected));
    for (qsizetype i = 0; i < parts.size(); ++i) {
      QCOMPARE(parts[i].text, expected[i].text);
      QCOMPARE(parts[i].info.parameters, expected[i].info.parameters);
      QCOMPARE(parts[i].answer.text, expected[i].answer.text);
    }
  }
}

void TestChatProtocol::requestLine_data() {
  QTest::addColumn<QString>("system");
  QTest::addColumn<ChatSampling>("sampling");
  QTest::addColumn<QByteArray>("expected");
  const QByteArray messages =
      R"("messages":[{"content":"Hi","role":"user"},{"content":"Hello!","role":"assistant"},)"
      R"({"content":"What is SP?\nIn one line.","role":"user"}])";
  QTest::newRow("the engine's defaults") << QString() << ChatSampling{} << "{" + messages + "}";
  ChatSampling all;
  all.maxNewTokens = 64;
  all.temperature = 0.7;
  all.topP = 0.9;
  all.topK = 50;
  all.repetitionPenalty = 1.1;
  all.seed = 1234567890123;
  QTest::newRow("every option")
      << QStringLiteral("Be brief.") << all
      << R"({"max_new_tokens":64,)" + messages +
             R"(,"repetition_penalty":1.1,"seed":1234567890123,"system":"Be brief.",)"
             R"("temperature":0.7,"top_k":50,"top_p":0.9})";
  ChatSampling greedy;
  greedy.temperature = 0;
  QTest::newRow("greedy") << QString() << greedy << "{" + messages + R"(,"temperature":0})";
}

void TestChatProtocol::requestLine() {
  QFETCH(QString, system);
  QFETCH(ChatSampling, sampling);
  QFETCH(QByteArray, expected);
  const QList<ChatMessage> conversation{
      {QStringLiteral("user"), QStringLiteral("Hi")},
      {QStringLiteral("assistant"), QStringLiteral("Hello!")},
      {QStringLiteral("user"), QStringLiteral("What is SP?\nIn one line.")}};
  const QByteArray line = studio::ui::chatRequestLine(conversation, system, sampling);
  QVERIFY(line.endsWith('\n'));
  QCOMPARE(line.count('\n'), 1);  // one line, whatever the messages hold
  QCOMPARE(line.chopped(1), expected);
  QCOMPARE(studio::ui::chatCancelLine(), QByteArray("{\"cancel\":true}\n"));
}

void TestChatProtocol::arguments_data() {
  QTest::addColumn<ChatOptions>("options");
  QTest::addColumn<QStringList>("expected");
  const QStringList base{"chat", "--model", "/runs/a b/checkpoint-10", "--json"};
  QTest::newRow("defaults") << ChatOptions{} << base;
  QTest::newRow("template") << ChatOptions{QStringLiteral("llama3"), {}}
                            << base + QStringList{"--template", "llama3"};
  QTest::newRow("device") << ChatOptions{{}, QStringLiteral("cpu")}
                          << base + QStringList{"--device", "cpu"};
}

void TestChatProtocol::arguments() {
  QFETCH(ChatOptions, options);
  QFETCH(QStringList, expected);
  QCOMPARE(studio::ui::chatArguments(QStringLiteral("/runs/a b/checkpoint-10"), options), expected);
}

QTEST_MAIN(TestChatProtocol)
#include "tst_chat_protocol.moc"
