#include "studio/ui/chat/chat_protocol.h"

namespace studio::ui {
namespace {

QString qs(const std::string& s) {
  return QString::fromStdString(s);
}

ChatModelInfo toQt(const chat::ModelInfo& in) {
  ChatModelInfo info;
  info.model = qs(in.model);
  info.architecture = qs(in.architecture);
  info.templateName = qs(in.template_name);
  info.templateSource = qs(in.template_source);
  info.device = qs(in.device);
  info.dtype = qs(in.dtype);
  info.parameters = in.parameters;
  info.loadSeconds = in.load_seconds;
  return info;
}

ChatAnswer toQt(const chat::Answer& in) {
  ChatAnswer a;
  a.text = qs(in.text);
  a.ids = QList<qint64>(in.ids.begin(), in.ids.end());
  a.promptTokens = in.prompt_tokens;
  a.newTokens = in.new_tokens;
  a.stop = qs(in.stop);
  a.seconds = in.seconds;
  a.tokensPerSec = in.tokens_per_sec;
  return a;
}

ChatEvent toQt(const chat::Event& in) {
  ChatEvent e;
  switch (in.kind) {
    case chat::Event::Kind::Ready:
      e.kind = ChatEvent::Kind::Ready;
      break;
    case chat::Event::Kind::Token:
      e.kind = ChatEvent::Kind::Token;
      break;
    case chat::Event::Kind::Done:
      e.kind = ChatEvent::Kind::Done;
      break;
    case chat::Event::Kind::Error:
      e.kind = ChatEvent::Kind::Error;
      break;
    case chat::Event::Kind::Unknown:
      e.kind = ChatEvent::Kind::Unknown;
      break;
    case chat::Event::Kind::NotJson:
      e.kind = ChatEvent::Kind::NotJson;
      break;
  }
  e.info = toQt(in.info);
  e.text = qs(in.text);
  e.answer = toQt(in.answer);
  for (const std::string& problem : in.problems) e.problems << qs(problem);
  return e;
}

std::string_view view(const QByteArray& bytes) {
  return {bytes.constData(), static_cast<std::size_t>(bytes.size())};
}

}  // namespace

ChatEvent parseChatEvent(const QByteArray& line) {
  return toQt(chat::read_event(view(line)));
}

QList<ChatEvent> ChatEventReader::feed(const QByteArray& bytes) {
  QList<ChatEvent> events;
  for (const chat::Event& e : reader_.feed(view(bytes))) events << toQt(e);
  return events;
}

QByteArray chatRequestLine(const QList<ChatMessage>& messages, const QString& system,
                           const ChatSampling& sampling) {
  chat::Request request;
  for (const ChatMessage& m : messages)
    request.messages.push_back({m.role.toStdString(), m.content.toStdString()});
  if (!system.isEmpty()) request.system = system.toStdString();
  request.max_new_tokens = sampling.maxNewTokens;
  request.temperature = sampling.temperature;
  request.top_p = sampling.topP;
  request.top_k = sampling.topK;
  request.repetition_penalty = sampling.repetitionPenalty;
  if (sampling.seed) request.seed = static_cast<std::uint64_t>(*sampling.seed);
  return QByteArray::fromStdString(chat::request_line(request));
}

QByteArray chatCancelLine() {
  return QByteArray::fromStdString(chat::cancel_line());
}

QStringList chatArguments(const QString& modelDir, const ChatOptions& options) {
  QStringList args{QStringLiteral("chat"), QStringLiteral("--model"), modelDir,
                   QStringLiteral("--json")};
  if (!options.templateName.isEmpty()) args << QStringLiteral("--template") << options.templateName;
  if (!options.device.isEmpty()) args << QStringLiteral("--device") << options.device;
  return args;
}

}  // namespace studio::ui
