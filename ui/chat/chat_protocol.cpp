#include "studio/ui/chat/chat_protocol.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QJsonValue>

namespace studio::ui {
namespace {

// Reads the fields of one event; a field of an unexpected type reads as empty and is reported
// as "EVENT: KEY: not a ...". An absent field is no problem: the event's readers take its
// default.
class Fields {
 public:
  Fields(const QJsonObject& object, const QString& event, QStringList& problems)
      : object_(object), event_(event), problems_(problems) {}

  QString string(const char* key) const {
    const QJsonValue v = object_.value(QLatin1String(key));
    if (v.isString()) return v.toString();
    if (!v.isUndefined()) problem(key, QStringLiteral("not a string"), v);
    return {};
  }
  double number(const char* key) const {
    const QJsonValue v = object_.value(QLatin1String(key));
    if (v.isDouble()) return v.toDouble();
    if (!v.isUndefined()) problem(key, QStringLiteral("not a number"), v);
    return 0;
  }
  qint64 integer(const char* key) const {
    const QJsonValue v = object_.value(QLatin1String(key));
    if (v.isDouble() && v.toDouble() == static_cast<double>(v.toInteger())) return v.toInteger();
    if (!v.isUndefined()) problem(key, QStringLiteral("not an integer"), v);
    return 0;
  }
  // The whole list, or none of it when one element is not an integer.
  QList<qint64> integers(const char* key) const {
    const QJsonValue v = object_.value(QLatin1String(key));
    QList<qint64> out;
    if (v.isUndefined()) return out;
    const QJsonArray array = v.toArray();
    for (const QJsonValue& e : array) {
      if (!e.isDouble() || e.toDouble() != static_cast<double>(e.toInteger())) break;
      out << e.toInteger();
    }
    if (v.isArray() && out.size() == array.size()) return out;
    problem(key, QStringLiteral("not a list of integers"), v);
    return {};
  }

 private:
  void problem(const char* key, const QString& what, const QJsonValue& v) const {
    const QByteArray given = QJsonDocument(QJsonArray{v}).toJson(QJsonDocument::Compact);
    // "[...]" around the one value: cut to keep a message short
    problems_ << QStringLiteral("%1: %2: %3 (got %4)")
                     .arg(event_, QLatin1String(key), what,
                          QString::fromUtf8(given.mid(1, given.size() - 2).left(80)));
  }

  const QJsonObject& object_;
  QString event_;
  QStringList& problems_;
};

ChatModelInfo readInfo(const Fields& f) {
  ChatModelInfo info;
  info.model = f.string("model");
  info.architecture = f.string("architecture");
  info.templateName = f.string("template");
  info.templateSource = f.string("template_source");
  info.device = f.string("device");
  info.dtype = f.string("dtype");
  info.parameters = f.integer("parameters");
  info.loadSeconds = f.number("load_seconds");
  return info;
}

ChatAnswer readAnswer(const Fields& f) {
  ChatAnswer a;
  a.text = f.string("text");
  a.ids = f.integers("ids");
  a.promptTokens = f.integer("prompt_tokens");
  a.newTokens = f.integer("new_tokens");
  a.stop = f.string("stop");
  a.seconds = f.number("seconds");
  a.tokensPerSec = f.number("tokens_per_sec");
  return a;
}

}  // namespace

ChatEvent parseChatEvent(const QByteArray& line) {
  ChatEvent e;
  const QJsonDocument doc = QJsonDocument::fromJson(line);
  if (!doc.isObject()) {
    e.kind = ChatEvent::Kind::NotJson;
    e.text = QString::fromUtf8(line);
    return e;
  }
  const QJsonObject object = doc.object();
  const QString name = object.value(QLatin1String("event")).toString();
  const Fields fields(object, name, e.problems);
  if (name == QLatin1String("ready")) {
    e.kind = ChatEvent::Kind::Ready;
    e.info = readInfo(fields);
  } else if (name == QLatin1String("token")) {
    e.kind = ChatEvent::Kind::Token;
    e.text = fields.string("text");
  } else if (name == QLatin1String("done")) {
    e.kind = ChatEvent::Kind::Done;
    e.answer = readAnswer(fields);
  } else if (name == QLatin1String("error")) {
    e.kind = ChatEvent::Kind::Error;
    e.text = fields.string("message");
  } else {
    e.kind = ChatEvent::Kind::Unknown;
    e.text = QString::fromUtf8(line);
  }
  return e;
}

QList<ChatEvent> ChatEventReader::feed(const QByteArray& bytes) {
  QList<ChatEvent> events;
  qsizetype start = 0;
  for (qsizetype nl = bytes.indexOf('\n'); nl >= 0; nl = bytes.indexOf('\n', start)) {
    QByteArray line = partial_ + bytes.mid(start, nl - start);
    partial_.clear();
    start = nl + 1;
    if (line.endsWith('\r')) line.chop(1);
    if (!line.trimmed().isEmpty()) events << parseChatEvent(line);
  }
  partial_ += bytes.mid(start);
  return events;
}

QByteArray chatRequestLine(const QList<ChatMessage>& messages, const QString& system,
                           const ChatSampling& sampling) {
  QJsonArray list;
  for (const ChatMessage& m : messages)
    list.append(
        QJsonObject{{QStringLiteral("role"), m.role}, {QStringLiteral("content"), m.content}});
  QJsonObject request{{QStringLiteral("messages"), list}};
  if (!system.isEmpty()) request.insert(QStringLiteral("system"), system);
  if (sampling.maxNewTokens)
    request.insert(QStringLiteral("max_new_tokens"), *sampling.maxNewTokens);
  if (sampling.temperature) request.insert(QStringLiteral("temperature"), *sampling.temperature);
  if (sampling.topP) request.insert(QStringLiteral("top_p"), *sampling.topP);
  if (sampling.topK) request.insert(QStringLiteral("top_k"), *sampling.topK);
  if (sampling.repetitionPenalty)
    request.insert(QStringLiteral("repetition_penalty"), *sampling.repetitionPenalty);
  if (sampling.seed) request.insert(QStringLiteral("seed"), *sampling.seed);
  return QJsonDocument(request).toJson(QJsonDocument::Compact) + '\n';
}

QByteArray chatCancelLine() {
  return QByteArrayLiteral("{\"cancel\":true}\n");
}

QStringList chatArguments(const QString& modelDir, const ChatOptions& options) {
  QStringList args{QStringLiteral("chat"), QStringLiteral("--model"), modelDir,
                   QStringLiteral("--json")};
  if (!options.templateName.isEmpty()) args << QStringLiteral("--template") << options.templateName;
  if (!options.device.isEmpty()) args << QStringLiteral("--device") << options.device;
  return args;
}

}  // namespace studio::ui
