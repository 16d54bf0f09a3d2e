#pragma once
// The studio's side of `studio-train chat --json` (docs/CHAT.md): the command line of a session,
// the request lines written to the engine's stdin, and the event lines it writes to stdout. The
// lines themselves are runs/chat_protocol.h's, shared with the engine; this is their Qt face. The
// events are read field by field: a field of an unexpected type costs that field, not the event,
// and the problem is reported with it.
#include <optional>

#include "studio/runs/chat_protocol.h"

#include <QByteArray>
#include <QList>
#include <QMetaType>
#include <QString>
#include <QStringList>

namespace studio::ui {

struct ChatMessage {
  QString role;  // "user" or "assistant"
  QString content;
  bool operator==(const ChatMessage& o) const { return role == o.role && content == o.content; }
};

// Per-request choices; an unset one is the engine's command-line value (its default).
struct ChatSampling {
  std::optional<int> maxNewTokens;          // >= 1 (engine default 256)
  std::optional<double> temperature;        // 0: greedy
  std::optional<double> topP;               // (0, 1]; 1: off
  std::optional<int> topK;                  // 0: off
  std::optional<double> repetitionPenalty;  // 1: off
  std::optional<qint64> seed;               // of the sampler, per answer
};

// What fixes a session when it starts (the engine's command line).
struct ChatOptions {
  QString templateName;  // empty: the run's config.yaml beside the model, else guessed
  QString device;        // empty: auto (the first CUDA device, else the CPU); "cpu", "cuda", ...
  bool operator==(const ChatOptions& o) const {
    return templateName == o.templateName && device == o.device;
  }
  bool operator!=(const ChatOptions& o) const { return !(*this == o); }
};

// The engine's ready event: the model it loaded and how it will talk to it.
struct ChatModelInfo {
  QString model;           // the model folder, absolute
  QString architecture;    // config.json's architectures[0], e.g. "Qwen2ForCausalLM"
  QString templateName;    // the chat template in use
  QString templateSource;  // "--template", "config.yaml" or "guessed"
  QString device;          // "cpu", "cuda:0", ...
  QString dtype;           // "float32", "bfloat16", ...
  qint64 parameters = 0;
  double loadSeconds = 0;
};

// The engine's done event: one whole answer and its numbers.
struct ChatAnswer {
  QString text;  // the token events' texts, concatenated
  QList<qint64> ids;
  qint64 promptTokens = 0;
  qint64 newTokens = 0;
  QString stop;  // "eos", "stop_word", "length" or "cancelled"
  double seconds = 0;
  double tokensPerSec = 0;  // decoding speed after the first token
};

struct ChatEvent {
  enum class Kind {
    Ready,    // info
    Token,    // text: the next piece of the answer
    Done,     // answer
    Error,    // text: why the engine refused a request (the session goes on)
    Unknown,  // text: the line (an event this studio does not know)
    NotJson,  // text: the line
  };
  Kind kind = Kind::Unknown;
  ChatModelInfo info;
  QString text;
  ChatAnswer answer;
  // Fields left out for a value of an unexpected type: "done: new_tokens: not a number".
  QStringList problems;
};

// One line of the engine's stdout (without its newline).
ChatEvent parseChatEvent(const QByteArray& line);

// The engine's stdout, fed in whatever chunks the pipe delivers: each complete line becomes an
// event; a partial last line waits for its newline. Blank lines are skipped.
class ChatEventReader {
 public:
  QList<ChatEvent> feed(const QByteArray& bytes);
  qsizetype pendingBytes() const { return static_cast<qsizetype>(reader_.pending_bytes()); }

 private:
  chat::EventReader reader_;
};

// The request line (with its newline) asking for the answer to `messages`, the conversation so
// far ending with a user message; `system` empty: none (or the engine's --system).
QByteArray chatRequestLine(const QList<ChatMessage>& messages, const QString& system,
                           const ChatSampling& sampling);
// The line that ends the answer being generated at its next token.
QByteArray chatCancelLine();
// The arguments of `studio-train` for a JSON session on `modelDir`.
QStringList chatArguments(const QString& modelDir, const ChatOptions& options);

}  // namespace studio::ui

Q_DECLARE_METATYPE(studio::ui::ChatModelInfo)
Q_DECLARE_METATYPE(studio::ui::ChatAnswer)
