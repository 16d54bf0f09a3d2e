// Tests of the lines of `studio-train chat --json` (runs/chat_protocol.h), both directions:
// requests written and read back, byte for byte as the studio wrote them with QJsonDocument, and
// the engine's errors for each bad request; events written and read back, a field of an
// unexpected type costing that field only, unknown and non-JSON lines, and the stdout stream cut
// anywhere into chunks.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "studio/runs/chat_protocol.h"

using namespace studio;

Q_DECLARE_METATYPE(chat::Request)
Q_DECLARE_METATYPE(chat::RequestLine::Kind)
Q_DECLARE_METATYPE(chat::Event)
Q_DECLARE_METATYPE(chat::Event::Kind)

namespace {

QByteArray bytes(const std::string& s) {
  return QByteArray::fromStdString(s);
}

std::string_view view(const QByteArray& b) {
  return {b.constData(), static_cast<std::size_t>(b.size())};
}

QString opt(const std::optional<std::int64_t>& v) {
  return v ? QString::number(*v) : QStringLiteral("-");
}

QString opt(const std::optional<double>& v) {
  return v ? QString::number(*v, 'g', 17) : QStringLiteral("-");
}

template <typename T>
QString list(const std::vector<T>& v) {
  QStringList out;
  for (const auto& x : v) {
    if constexpr (std::is_same_v<T, std::string>)
      out << QString::fromStdString(x);
    else
      out << QString::number(x);
  }
  return QLatin1Char('[') + out.join(QLatin1Char('|')) + QLatin1Char(']');
}

// Every field, to compare what was written with what was read back.
QString describe(const chat::Request& r) {
  QStringList out;
  for (const chat::Message& m : r.messages) out << QString::fromStdString(m.role + ":" + m.content);
  out << (r.system ? QString::fromStdString("system:" + *r.system) : QStringLiteral("-"))
      << opt(r.max_new_tokens) << opt(r.temperature) << opt(r.top_p) << opt(r.top_k)
      << opt(r.repetition_penalty)
      << (r.seed ? QString::number(static_cast<qulonglong>(*r.seed)) : QStringLiteral("-"));
  return out.join(QLatin1Char(' '));
}

QString describe(const chat::Event& e) {
  const chat::ModelInfo& i = e.info;
  const chat::Answer& a = e.answer;
  return QStringList{QString::number(static_cast<int>(e.kind)),
                     QString::fromStdString(e.text),
                     QString::fromStdString(i.model),
                     QString::fromStdString(i.architecture),
                     QString::number(i.parameters),
                     QString::fromStdString(i.template_name),
                     QString::fromStdString(i.template_source),
                     QString::fromStdString(i.device),
                     QString::fromStdString(i.dtype),
                     list(i.stop_ids),
                     list(i.stop_words),
                     QString::number(i.load_seconds, 'g', 17),
                     QString::fromStdString(a.text),
                     list(a.ids),
                     list(a.prompt_ids),
                     QString::number(a.prompt_tokens),
                     QString::number(a.new_tokens),
                     QString::fromStdString(a.stop),
                     QString::number(a.seconds, 'g', 17),
                     QString::number(a.prefill_seconds, 'g', 17),
                     QString::number(a.tokens_per_sec, 'g', 17),
                     list(e.problems)}
      .join(QLatin1Char(' '));
}

// What the studio wrote for a request before the protocol moved here: QJsonDocument's compact
// form of the same object.
QByteArray qt_request_line(const chat::Request& r) {
  QJsonArray messages;
  for (const chat::Message& m : r.messages)
    messages.append(QJsonObject{{QStringLiteral("role"), QString::fromStdString(m.role)},
                                {QStringLiteral("content"), QString::fromStdString(m.content)}});
  QJsonObject o{{QStringLiteral("messages"), messages}};
  if (r.system) o.insert(QStringLiteral("system"), QString::fromStdString(*r.system));
  if (r.max_new_tokens) o.insert(QStringLiteral("max_new_tokens"), qint64(*r.max_new_tokens));
  if (r.temperature) o.insert(QStringLiteral("temperature"), *r.temperature);
  if (r.top_p) o.insert(QStringLiteral("top_p"), *r.top_p);
  if (r.top_k) o.insert(QStringLiteral("top_k"), qint64(*r.top_k));
  if (r.repetition_penalty) o.insert(QStringLiteral("repetition_penalty"), *r.repetition_penalty);
  if (r.seed) o.insert(QStringLiteral("seed"), qint64(*r.seed));
  return QJsonDocument(o).toJson(QJsonDocument::Compact) + '\n';
}

chat::Request conversation() {
  chat::Request r;
  r.messages = {{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "What is SP?\nIn one line."}};
  return r;
}

chat::Event ready_event() {
  chat::Event e;
  e.kind = chat::Event::Kind::Ready;
  e.info.model = "/abs/out/checkpoint-4";
  e.info.architecture = "Qwen2ForCausalLM";
  e.info.parameters = 623168;
  e.info.template_name = "qwen";
  e.info.template_source = "config.yaml";
  e.info.device = "cpu";
  e.info.dtype = "float32";
  e.info.stop_ids = {4258};
  e.info.load_seconds = 0.4;
  return e;
}

chat::Event done_event() {
  chat::Event e;
  e.kind = chat::Event::Kind::Done;
  e.answer.text = "Sequence parallelism";
  e.answer.ids = {327, 163, 4131};
  e.answer.prompt_ids = {4257, 82};
  e.answer.prompt_tokens = 2;
  e.answer.new_tokens = 3;
  e.answer.stop = "length";
  e.answer.seconds = 0.25;
  e.answer.prefill_seconds = 0.002;
  e.answer.tokens_per_sec = 8.5;
  return e;
}

chat::Event text_event(chat::Event::Kind kind, const std::string& text) {
  chat::Event e;
  e.kind = kind;
  e.text = text;
  return e;
}

std::string line_of(const chat::Event& e) {
  switch (e.kind) {
    case chat::Event::Kind::Ready:
      return chat::ready_line(e.info);
    case chat::Event::Kind::Token:
      return chat::token_line(e.text);
    case chat::Event::Kind::Done:
      return chat::done_line(e.answer);
    case chat::Event::Kind::Error:
      return chat::error_line(e.text);
    default:
      return e.text + '\n';
  }
}

// The engine's lines (docs/CHAT.md).
const QByteArray kReady =
    R"({"architecture":"Qwen2ForCausalLM","device":"cpu","dtype":"float32","event":"ready",)"
    R"("load_seconds":0.4,"model":"/abs/out/checkpoint-4","parameters":623168,"stop_ids":[4258],)"
    R"("stop_words":[],"template":"qwen","template_source":"config.yaml"})";
const QByteArray kDone =
    R"({"event":"done","ids":[327,163,4131],"new_tokens":3,"prefill_seconds":0.002,)"
    R"("prompt_ids":[4257,82],"prompt_tokens":2,"seconds":0.25,"stop":"length",)"
    R"("text":"Sequence parallelism","tokens_per_sec":8.5})";

// kDone or kReady with one field replaced.
QByteArray with(const QByteArray& line, const char* key, const QJsonValue& value) {
  QJsonObject o = QJsonDocument::fromJson(line).object();
  o.insert(QLatin1String(key), value);
  return QJsonDocument(o).toJson(QJsonDocument::Compact);
}

}  // namespace

class TestChatLines : public QObject {
  Q_OBJECT

 private slots:
  void requestRoundTrip_data();
  void requestRoundTrip();
  void numbersAsTheStudioWroteThem();
  void requestLineKinds_data();
  void requestLineKinds();
  void requestNumbersAsTheEngineReadThem_data();
  void requestNumbersAsTheEngineReadThem();
  void eventRoundTrip_data();
  void eventRoundTrip();
  void eventKinds_data();
  void eventKinds();
  void oddFieldCostsThatFieldOnly_data();
  void oddFieldCostsThatFieldOnly();
  void linesCutAnywhere_data();
  void linesCutAnywhere();
};

void TestChatLines::requestRoundTrip_data() {
  QTest::addColumn<chat::Request>("request");
  QTest::addColumn<QByteArray>("expected");
  const QByteArray messages =
      R"("messages":[{"content":"Hi","role":"user"},{"content":"Hello!","role":"assistant"},)"
      R"({"content":"What is SP?\nIn one line.","role":"user"}])";
  QTest::newRow("the engine's defaults") << conversation() << "{" + messages + "}\n";
  chat::Request all = conversation();
  all.system = "Be brief.";
  all.max_new_tokens = 64;
  all.temperature = 0.7;
  all.top_p = 0.9;
  all.top_k = 50;
  all.repetition_penalty = 1.1;
  all.seed = 1234567890123;
  QTest::newRow("every choice")
      << all
      << R"({"max_new_tokens":64,)" + messages +
             R"(,"repetition_penalty":1.1,"seed":1234567890123,"system":"Be brief.",)"
             R"("temperature":0.7,"top_k":50,"top_p":0.9})" +
             "\n";
  chat::Request greedy = conversation();
  greedy.temperature = 0;
  greedy.top_p = 1;
  greedy.system = "";
  QTest::newRow("whole doubles, an empty system")
      << greedy << "{" + messages + R"(,"system":"","temperature":0,"top_p":1})" + "\n";
  chat::Request odd;
  odd.messages = {{"user", std::string("\x01\x1f\x7f/\\\"\b\f\t\r é ✓ ") + '\0' + " end"}};
  odd.seed = std::numeric_limits<std::uint64_t>::max() / 2;
  QTest::newRow("control characters, a large seed")
      << odd
      << QByteArray(R"({"messages":[{"content":"\u0001\u001f)"
                    "\x7f"
                    R"(/\\\"\b\f\t\r é ✓ \u0000)"
                    R"( end","role":"user"}],"seed":9223372036854775807})"
                    "\n");
}

// Written, the line is the one expected and the one QJsonDocument wrote; read, it is the same
// request.
void TestChatLines::requestRoundTrip() {
  QFETCH(chat::Request, request);
  QFETCH(QByteArray, expected);
  const std::string line = chat::request_line(request);
  QCOMPARE(bytes(line), expected);
  QCOMPARE(bytes(line), qt_request_line(request));
  const chat::RequestLine read = chat::read_request_line(line, 1);
  QCOMPARE(read.kind, chat::RequestLine::Kind::Request);
  QCOMPARE(describe(read.request), describe(request));
  QCOMPARE(bytes(chat::cancel_line()), QByteArray("{\"cancel\":true}\n"));
}

// Doubles of every size and kind, and random bit patterns, are written as QJsonDocument wrote
// them.
void TestChatLines::numbersAsTheStudioWroteThem() {
  std::vector<double> values{0,
                             -0.0,
                             1,
                             5,
                             0.05,
                             0.95,
                             1.05,
                             0.1 + 0.2,
                             1.0 / 3,
                             0.0001,
                             0.001,
                             1e-5,
                             0.000123,
                             123456,
                             1e15,
                             1e16,
                             9007199254740992.0,
                             9007199254740994.0,
                             1e21,
                             1.5e19,
                             -2.5,
                             -1e6,
                             5e-324,
                             std::numeric_limits<double>::max(),
                             std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity()};
  std::mt19937_64 random(36);
  for (int i = 0; i < 20000; ++i) {
    const std::uint64_t bits = random();
    double d = 0;
    std::memcpy(&d, &bits, sizeof d);
    values.push_back(d);
    values.push_back(double(random() % 1000000) * std::pow(10.0, int(random() % 40) - 24));
  }
  for (double d : values) {
    chat::Request r = conversation();
    r.temperature = d;
    QCOMPARE(bytes(chat::request_line(r)), qt_request_line(r));
  }
}

void TestChatLines::requestLineKinds_data() {
  QTest::addColumn<QByteArray>("line");
  QTest::addColumn<chat::RequestLine::Kind>("kind");
  QTest::addColumn<QString>("error");
  using Kind = chat::RequestLine::Kind;
  const QByteArray user = R"([{"role":"user","content":"Hi"}])";
  QTest::newRow("blank") << QByteArray(" \t\r") << Kind::Blank << QString();
  QTest::newRow("empty") << QByteArray() << Kind::Blank << QString();
  QTest::newRow("not JSON") << QByteArray("hello {") << Kind::NotJson
                            << QStringLiteral("stdin line 7 is not JSON: hello {");
  QTest::newRow("not JSON, long") << QByteArray(300, 'x') << Kind::NotJson
                                  << "stdin line 7 is not JSON: " + QString(200, QLatin1Char('x'));
  QTest::newRow("cancel") << QByteArray(R"({"cancel":true})") << Kind::Cancel << QString();
  QTest::newRow("cancel with messages")
      << R"({"cancel":true,"messages":)" + user + "}" << Kind::Cancel << QString();
  QTest::newRow("cancel false, a request")
      << R"({"cancel":false,"messages":)" + user + "}" << Kind::Request << QString();
  QTest::newRow("cancel false alone")
      << QByteArray(R"({"cancel":false})") << Kind::Invalid
      << QStringLiteral("\"messages\" must be a non-empty array of {role, content}");
  QTest::newRow("cancel not a boolean") << QByteArray(R"({"cancel":1})") << Kind::Invalid
                                        << QStringLiteral("\"cancel\" must be true or false");
  QTest::newRow("not an object") << QByteArray("[1,2]") << Kind::Invalid
                                 << QStringLiteral("a request is a JSON object");
  QTest::newRow("no messages") << QByteArray(R"({"system":"x"})") << Kind::Invalid
                               << QStringLiteral(
                                      "\"messages\" must be a non-empty array of {role, content}");
  QTest::newRow("no message") << QByteArray(R"({"messages":[]})") << Kind::Invalid
                              << QStringLiteral(
                                     "\"messages\" must be a non-empty array of {role, content}");
  QTest::newRow("a message without content")
      << QByteArray(R"({"messages":[{"role":"user"}]})") << Kind::Invalid
      << QStringLiteral("every message needs a string \"role\" and \"content\"");
  QTest::newRow("a role not a string")
      << QByteArray(R"({"messages":[{"role":1,"content":"x"}]})") << Kind::Invalid
      << QStringLiteral("every message needs a string \"role\" and \"content\"");
  QTest::newRow("a system role")
      << QByteArray(R"({"messages":[{"role":"system","content":"x"},{"role":1}]})") << Kind::Invalid
      << QStringLiteral("message role 'system' is not user or assistant");
  QTest::newRow("assistant first")
      << QByteArray(R"({"messages":[{"role":"assistant","content":"x"}]})") << Kind::Invalid
      << QStringLiteral("messages must alternate user, assistant, user, ... (message 1 does not)");
  QTest::newRow("two users")
      << QByteArray(R"({"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]})")
      << Kind::Invalid
      << QStringLiteral("messages must alternate user, assistant, user, ... (message 2 does not)");
  QTest::newRow("system a number") << R"({"system":1,"messages":)" + user + "}" << Kind::Invalid
                                   << QStringLiteral("\"system\" must be a string");
  // With top_k null too: the first in the order of the fields is reported.
  for (const auto& [key, reported] : {std::pair{"max_new_tokens", "max_new_tokens"},
                                      {"temperature", "temperature"},
                                      {"top_p", "top_p"},
                                      {"repetition_penalty", "top_k"},
                                      {"seed", "top_k"}})
    QTest::addRow("%s a string", key)
        << R"({"top_k":null,")" + QByteArray(key) + R"(":"1","messages":)" + user + "}"
        << Kind::Invalid << QStringLiteral("\"%1\" must be a number").arg(QLatin1String(reported));
}

// The kind of each line, and for a request that cannot be answered the engine's message (the
// first problem, in the order of the fields).
void TestChatLines::requestLineKinds() {
  QFETCH(QByteArray, line);
  QFETCH(chat::RequestLine::Kind, kind);
  QFETCH(QString, error);
  const chat::RequestLine read = chat::read_request_line(view(line), 7);
  QCOMPARE(read.kind, kind);
  QCOMPARE(QString::fromStdString(read.error), error);
}

void TestChatLines::requestNumbersAsTheEngineReadThem_data() {
  QTest::addColumn<QByteArray>("numbers");
  QTest::addColumn<QString>("request");
  QTest::newRow("whole numbers as doubles")
      << QByteArray(R"("temperature":1,"top_p":1,"repetition_penalty":2)")
      << QStringLiteral("user:Hi - - 1 1 - 2 -");
  QTest::newRow("fractions of whole choices cut")
      << QByteArray(R"("max_new_tokens":2.7,"top_k":3.9)")
      << QStringLiteral("user:Hi - 2 - - 3 - -");
  QTest::newRow("a negative seed wraps")
      << QByteArray(R"("seed":-1)") << QStringLiteral("user:Hi - - - - - - 18446744073709551615");
}

void TestChatLines::requestNumbersAsTheEngineReadThem() {
  QFETCH(QByteArray, numbers);
  QFETCH(QString, request);
  const QByteArray line = R"({"messages":[{"role":"user","content":"Hi"}],)" + numbers + "}";
  const chat::RequestLine read = chat::read_request_line(view(line), 1);
  QCOMPARE(read.kind, chat::RequestLine::Kind::Request);
  QCOMPARE(describe(read.request), request);
}

void TestChatLines::eventRoundTrip_data() {
  QTest::addColumn<chat::Event>("event");
  QTest::addColumn<QByteArray>("expected");
  QTest::newRow("ready") << ready_event() << kReady;
  chat::Event words = ready_event();
  words.info.stop_ids = {2, 151643, 151645};
  words.info.stop_words = {"<|im_end|>", "Observation:"};
  QTest::newRow("ready, stop words")
      << words
      << with(with(kReady, "stop_ids", QJsonArray{2, 151643, 151645}), "stop_words",
              QJsonArray{QStringLiteral("<|im_end|>"), QStringLiteral("Observation:")});
  QTest::newRow("token") << text_event(chat::Event::Kind::Token, "Hé \"x\"\n")
                         << QByteArray(R"({"event":"token","text":"Hé \"x\"\n"})");
  QTest::newRow("empty token") << text_event(chat::Event::Kind::Token, "")
                               << QByteArray(R"({"event":"token","text":""})");
  QTest::newRow("done") << done_event() << kDone;
  chat::Event quick = done_event();
  quick.answer.tokens_per_sec = 0;
  quick.answer.seconds = 1;
  QTest::newRow("done, whole doubles")
      << quick
      << QByteArray(kDone)
             .replace("\"tokens_per_sec\":8.5", "\"tokens_per_sec\":0.0")
             .replace("\"seconds\":0.25", "\"seconds\":1.0");
  QTest::newRow("error") << text_event(chat::Event::Kind::Error, "top_p must be in (0, 1]")
                         << QByteArray(R"({"event":"error","message":"top_p must be in (0, 1]"})");
}

// Written as the engine has always written them (sorted keys, nlohmann-json's numbers), read back
// the same, without problems.
void TestChatLines::eventRoundTrip() {
  QFETCH(chat::Event, event);
  QFETCH(QByteArray, expected);
  const std::string line = line_of(event);
  QCOMPARE(bytes(line), expected + '\n');
  const chat::Event read = chat::read_event(std::string_view(line).substr(0, line.size() - 1));
  QCOMPARE(describe(read), describe(event));
}

void TestChatLines::eventKinds_data() {
  QTest::addColumn<QByteArray>("line");
  QTest::addColumn<chat::Event::Kind>("kind");
  QTest::addColumn<QString>("text");
  using Kind = chat::Event::Kind;
  QTest::newRow("unknown event") << QByteArray(R"({"event":"progress","n":1})") << Kind::Unknown
                                 << QStringLiteral(R"({"event":"progress","n":1})");
  QTest::newRow("no event") << QByteArray(R"({"text":"x"})") << Kind::Unknown
                            << QStringLiteral(R"({"text":"x"})");
  QTest::newRow("event not a string")
      << QByteArray(R"({"event":1})") << Kind::Unknown << QStringLiteral(R"({"event":1})");
  QTest::newRow("not JSON") << QByteArray("Loading weights...") << Kind::NotJson
                            << QStringLiteral("Loading weights...");
  QTest::newRow("JSON, not an object")
      << QByteArray("[1,2]") << Kind::NotJson << QStringLiteral("[1,2]");
  QTest::newRow("not UTF-8") << QByteArray("{\"event\":\"token\",\"text\":\"\xff\"}")
                             << Kind::NotJson
                             << QStringLiteral("{\"event\":\"token\",\"text\":\"\uFFFD\"}");
  QTest::newRow("a token not UTF-8, written")
      << bytes(chat::token_line("a\xff")).chopped(1) << Kind::Token << QStringLiteral("a\uFFFD");
}

void TestChatLines::eventKinds() {
  QFETCH(QByteArray, line);
  QFETCH(chat::Event::Kind, kind);
  QFETCH(QString, text);
  const chat::Event e = chat::read_event(view(line));
  QCOMPARE(e.kind, kind);
  QCOMPARE(QString::fromStdString(e.text), text);
  QVERIFY(e.problems.empty());
}

// One field of an unexpected type: that field reads as empty and is reported by name with what it
// held; the other fields of the event are all there.
void TestChatLines::oddFieldCostsThatFieldOnly_data() {
  QTest::addColumn<QByteArray>("line");
  QTest::addColumn<QString>("problem");
  QTest::newRow("new_tokens a string")
      << with(kDone, "new_tokens", QStringLiteral("3"))
      << QStringLiteral("done: new_tokens: not an integer (got \"3\")");
  QTest::newRow("new_tokens a fraction")
      << with(kDone, "new_tokens", 2.5)
      << QStringLiteral("done: new_tokens: not an integer (got 2.5)");
  QTest::newRow("new_tokens past int64")
      << QByteArray(kDone).replace("\"new_tokens\":3", "\"new_tokens\":9223372036854775808")
      << QStringLiteral("done: new_tokens: not an integer (got 9223372036854775808)");
  QTest::newRow("ids with a string")
      << with(kDone, "ids", QJsonArray{1, QStringLiteral("2")})
      << QStringLiteral("done: ids: not a list of integers (got [1,\"2\"])");
  QTest::newRow("ids an object") << with(kDone, "ids", QJsonObject{})
                                 << QStringLiteral("done: ids: not a list of integers (got {})");
  QTest::newRow("prompt_ids a number")
      << with(kDone, "prompt_ids", 4)
      << QStringLiteral("done: prompt_ids: not a list of integers (got 4)");
  QTest::newRow("seconds null") << with(kDone, "seconds", QJsonValue::Null)
                                << QStringLiteral("done: seconds: not a number (got null)");
  QTest::newRow("prefill_seconds a string")
      << with(kDone, "prefill_seconds", QStringLiteral("0"))
      << QStringLiteral("done: prefill_seconds: not a number (got \"0\")");
  QTest::newRow("stop a number") << with(kDone, "stop", 1)
                                 << QStringLiteral("done: stop: not a string (got 1)");
  QTest::newRow("parameters a fraction")
      << with(kReady, "parameters", 0.5)
      << QStringLiteral("ready: parameters: not an integer (got 0.5)");
  QTest::newRow("stop_words with a number")
      << with(kReady, "stop_words", QJsonArray{QStringLiteral("a"), 1})
      << QStringLiteral("ready: stop_words: not a list of strings (got [\"a\",1])");
  QTest::newRow("model a long list")
      << with(kReady, "model", QJsonArray{QString(100, QLatin1Char('x'))})
      << "ready: model: not a string (got [\"" + QString(78, QLatin1Char('x')) + ")";
}

void TestChatLines::oddFieldCostsThatFieldOnly() {
  QFETCH(QByteArray, line);
  QFETCH(QString, problem);
  const chat::Event e = chat::read_event(view(line));
  QCOMPARE(int(e.problems.size()), 1);
  QCOMPARE(QString::fromStdString(e.problems.front()), problem);
  const QString odd = problem.section(QLatin1String(": "), 1, 1);
  chat::Event expected = e.kind == chat::Event::Kind::Done ? done_event() : ready_event();
  chat::ModelInfo& i = expected.info;
  chat::Answer& a = expected.answer;
  if (odd == QLatin1String("new_tokens")) a.new_tokens = 0;
  if (odd == QLatin1String("ids")) a.ids.clear();
  if (odd == QLatin1String("prompt_ids")) a.prompt_ids.clear();
  if (odd == QLatin1String("seconds")) a.seconds = 0;
  if (odd == QLatin1String("prefill_seconds")) a.prefill_seconds = 0;
  if (odd == QLatin1String("stop")) a.stop.clear();
  if (odd == QLatin1String("parameters")) i.parameters = 0;
  if (odd == QLatin1String("stop_words")) i.stop_words.clear();
  if (odd == QLatin1String("model")) i.model.clear();
  expected.problems = e.problems;
  QCOMPARE(describe(e), describe(expected));
}

// The same stream, fed whole, byte by byte, or cut at every position into two chunks, gives the
// same events; a partial last line waits for its newline.
void TestChatLines::linesCutAnywhere_data() {
  QTest::addColumn<QByteArray>("stream");
  QTest::addColumn<int>("events");
  const QByteArray token = R"({"event":"token","text":"naïve ✓"})";
  QTest::newRow("LF") << kReady + '\n' + token + '\n' + kDone + '\n' << 3;
  QTest::newRow("CRLF") << kReady + "\r\n" + token + "\r\n" + kDone + "\r\n" << 3;
  QTest::newRow("blank lines") << "\n" + kReady + "\n\n \t\v\f\r\n" + token + '\n' << 2;
  QTest::newRow("no final newline") << kReady + '\n' + token << 1;
  QTest::newRow("not JSON between") << kReady + "\nWarning: x\n" + token + '\n' << 3;
}

void TestChatLines::linesCutAnywhere() {
  QFETCH(QByteArray, stream);
  QFETCH(int, events);
  const auto all = [](const std::vector<chat::Event>& list) {
    QStringList out;
    for (const chat::Event& e : list) out << describe(e);
    return out;
  };
  chat::EventReader whole;
  const QStringList expected = all(whole.feed(view(stream)));
  QCOMPARE(expected.size(), events);
  QCOMPARE(qsizetype(whole.pending_bytes()), stream.size() - (stream.lastIndexOf('\n') + 1));

  chat::EventReader bytewise;
  std::vector<chat::Event> got;
  for (char c : stream)
    for (chat::Event& e : bytewise.feed(std::string_view(&c, 1))) got.push_back(std::move(e));
  QCOMPARE(all(got), expected);
  for (qsizetype cut = 0; cut <= stream.size(); ++cut) {
    chat::EventReader two;
    std::vector<chat::Event> parts = two.feed(view(stream.left(cut)));
    for (chat::Event& e : two.feed(view(stream.mid(cut)))) parts.push_back(std::move(e));
    QCOMPARE(all(parts), expected);
  }
}

QTEST_GUILESS_MAIN(TestChatLines)
#include "tst_chat_lines.moc"
