#pragma once
// One `studio-train chat --json` process talking to one model folder. Requests go to its stdin
// and its stdout is read as it arrives, through QProcess's signals: nothing here waits, so the
// GUI thread stays free while a model loads or an answer is generated. The engine answers
// requests in order; each ends with done() or requestError().
#include <QObject>
#include <QString>
#include <QStringList>

#include "studio/ui/chat/chat_protocol.h"

class QProcess;

namespace studio::ui {

class ChatSession : public QObject {
  Q_OBJECT

 public:
  // Lines of the engine's stderr kept for the message of failed().
  static constexpr int kStderrLines = 12;
  // How long stop() lets the engine end by itself (end of input) before it is killed.
  static constexpr int kStopGraceMs = 3000;

  explicit ChatSession(QObject* parent = nullptr);
  ~ChatSession() override;

  // The studio-train to run.
  void setEngineProgram(const QString& path) { engine_ = path; }
  QString engineProgram() const { return engine_; }

  // Starts the engine on `modelDir` (stopping the one this session ran before). ready() once the
  // model is loaded, or failed() when the engine cannot start or ends with an error.
  void start(const QString& modelDir, const ChatOptions& options = {});
  // Asks for the answer to `messages` (the whole conversation, ending with a user message).
  // Written at once, also while the model loads: the engine reads it once ready. False when no
  // engine is running.
  bool send(const QList<ChatMessage>& messages, const QString& system = {},
            const ChatSampling& sampling = {});
  // Ends the answer being generated at its next token; its done() says stop "cancelled".
  void cancel();
  // Ends the engine (end of its input; killed when still there after kStopGraceMs) and forgets
  // it: no signal of it follows. Returns at once; so does the destructor, which stops too.
  void stop();

  bool isRunning() const { return process_ != nullptr; }
  bool isReady() const { return ready_; }
  // Requests sent and not answered yet.
  int pendingRequests() const { return pending_; }
  QString modelDir() const { return modelDir_; }
  ChatOptions options() const { return options_; }
  // The ready event's description of the model; empty before ready().
  ChatModelInfo info() const { return info_; }

 signals:
  void ready(const studio::ui::ChatModelInfo& info);
  // The next piece of the answer being generated.
  void token(const QString& text);
  void done(const studio::ui::ChatAnswer& answer);
  // The engine refused a request (e.g. a conversation longer than the model's positions); the
  // session goes on.
  void requestError(const QString& message);
  // The engine could not start, crashed or ended with an error (its last stderr lines are in
  // `message`); the session has ended. Requests not answered are lost.
  void failed(const QString& message);
  // A line or field of the engine's output that could not be read (the rest was used).
  void warning(const QString& message);

 private:
  void readOutput();
  void readErrors();
  void onFinished(int exitCode, bool crashed);
  void handle(const ChatEvent& event);
  void end(const QString& failure);

  QString engine_;
  QString modelDir_;
  ChatOptions options_;
  QProcess* process_ = nullptr;  // the running engine; null when there is none
  ChatEventReader reader_;
  QByteArray stderrPartial_;
  QStringList stderrTail_;
  ChatModelInfo info_;
  bool ready_ = false;
  int pending_ = 0;
  // cancel() was asked for the answer in progress: asked again at each token until it is done,
  // since the engine drops a cancel that arrives before it starts generating.
  bool cancelling_ = false;
};

}  // namespace studio::ui
