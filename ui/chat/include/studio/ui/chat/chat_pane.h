#pragma once
// One side of the Chat tab: a model picker (a run's final model and checkpoints, plus any folder
// chosen with Browse...), the conversation with that model, and the engine session answering it.
// The engine starts at the first message (so that picking a run never loads a model unasked) and
// again when the model or the session options change; each answer streams into the transcript
// and ends with its numbers (tokens, tokens/s, why it stopped).
#include <QList>
#include <QString>
#include <QTimer>
#include <QWidget>

#include "studio/ui/chat/chat_protocol.h"
#include "studio/ui/chat/run_models.h"

class QComboBox;
class QLabel;
class QTextBrowser;

namespace studio::ui {

class ChatSession;

class ChatPane : public QWidget {
  Q_OBJECT

 public:
  // Tokens arriving within this time are added to the transcript together.
  static constexpr int kFlushMs = 30;

  // `side` names the pane for screen readers ("Left", "Right").
  explicit ChatPane(const QString& side, QWidget* parent = nullptr);
  ~ChatPane() override;

  void setEngineProgram(const QString& path);
  // Applied from the next message on (the engine restarts when they changed).
  void setOptions(const ChatOptions& options) { options_ = options; }

  // The models of the current run. The folders added with Browse... stay listed after them. The
  // selection stays when its folder is still listed, else `preferred` is selected (or the first).
  void setModels(const QList<RunModel>& models, const QString& preferred);
  // Selects a model folder, adding it to the list when it is not there. A new model starts a new
  // conversation (an answer still coming from the old one is dropped).
  void selectModel(const QString& dir);
  QString model() const { return model_; }
  // The folders offered, in the picker's order.
  QStringList modelFolders() const;

  // Sends the conversation so far plus `prompt` to the selected model, starting its engine when
  // needed. False (nothing sent) when no model is selected or an answer is still coming.
  bool ask(const QString& prompt, const QString& system, const ChatSampling& sampling);
  // Ends the answer being generated at its next token.
  void cancel();
  // Starts a new conversation: empties the transcript and the history (not while busy).
  void clear();
  // Ends the engine (it restarts at the next message); the conversation stays.
  void stopEngine();

  bool isBusy() const { return busy_; }
  QList<ChatMessage> history() const { return history_; }
  ChatSession* session() const { return session_; }
  QComboBox* modelPicker() const { return picker_; }
  QTextBrowser* transcript() const { return transcript_; }
  QLabel* statusLabel() const { return status_; }

 signals:
  // An answer is being generated (or the model loaded for it), or no longer.
  void busyChanged(bool busy);
  // An answer is complete (also when cancelled).
  void answered(const studio::ui::ChatAnswer& answer);

 private:
  void onPicked(int index);
  void browse();
  void setModel(const QString& dir);
  void showIdleStatus();
  void rebuildPicker();
  void setBusy(bool busy);
  void onReady(const ChatModelInfo& info);
  void onDone(const ChatAnswer& answer);
  // The answer in progress ends without one (refused request, engine gone).
  void onNoAnswer(const QString& message);
  void flushTokens();
  void appendLine(const QString& text, int kind);
  QString modelLabel(const QString& dir) const;

  QComboBox* picker_;
  QLabel* status_;
  QTextBrowser* transcript_;
  ChatSession* session_;
  QTimer flush_;
  QString pendingTokens_;
  QList<RunModel> runModels_;
  QStringList browsed_;  // folders added with Browse... or selectModel()
  QString model_;        // the selected folder; "" when there is none
  ChatOptions options_;
  QList<ChatMessage> history_;
  bool busy_ = false;
};

}  // namespace studio::ui
