#pragma once
// The studio's Chat tab: talk to the current run's final model or one of its checkpoints, or
// compare two side by side (the same prompt to both, each pane its own conversation), with the
// sampling settings of `studio-train chat`. Each pane runs its own engine process; the run
// folder is listed on QtConcurrent's pool, again whenever the tab is shown (new checkpoints of
// a run in progress appear).
#include <QFutureWatcher>
#include <QList>
#include <QString>
#include <QWidget>

#include "studio/ui/chat/chat_protocol.h"
#include "studio/ui/chat/run_models.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;

namespace studio::ui {

class ChatPane;

class ChatPanel : public QWidget {
  Q_OBJECT

 public:
  enum Side { Left = 0, Right = 1 };

  explicit ChatPanel(QWidget* parent = nullptr);
  ~ChatPanel() override;

  // The studio-train that answers.
  void setEngineProgram(const QString& path);
  // The run whose final model and checkpoints the pickers offer; listed off the GUI thread,
  // modelsListed() once done. The left pane prefers the final model (else the last
  // checkpoint), the right one the first checkpoint.
  void setRunFolder(const QString& dir);
  QString runFolder() const { return runDir_; }

  // Shows the right pane; the prompt then goes to both. Hiding it ends its engine.
  void setCompare(bool on);
  bool compare() const;

  // Sends the prompt box's text to the left pane (and the right one when comparing), then
  // empties the box. False, with nothing sent, when the prompt is empty, a pane has no model or
  // an answer is still coming. Ctrl+Return in the prompt box does the same.
  bool send();
  // Ends the answers being generated at their next token.
  void stop();
  // Starts new conversations in both panes.
  void clear();

  ChatPane* pane(Side side) const { return side == Left ? left_ : right_; }
  QPlainTextEdit* promptBox() const { return prompt_; }
  // The settings of the next request, as the controls show them.
  ChatSampling sampling() const;
  QString systemPrompt() const;
  ChatOptions options() const;
  // Whether an answer is still coming in either pane.
  bool isBusy() const;

 signals:
  // The models of `runDir` are in the pickers.
  void modelsListed(const QString& runDir, int count);
  // Every pane asked by send() has finished answering (or failed).
  void answersFinished();

 protected:
  void showEvent(QShowEvent* event) override;

 private:
  struct Listing {
    QString runDir;
    QList<RunModel> models;
  };
  void listModels();
  void onListed();
  void updateButtons();
  QWidget* createSettings();

  ChatPane* left_;
  ChatPane* right_;
  QPlainTextEdit* prompt_;
  QPushButton* send_;
  QPushButton* stop_;
  QPushButton* clear_;
  QCheckBox* compare_;
  QDoubleSpinBox* temperature_;
  QDoubleSpinBox* topP_;
  QSpinBox* topK_;
  QSpinBox* maxNewTokens_;
  QSpinBox* seed_;
  QDoubleSpinBox* repetitionPenalty_;
  QLineEdit* system_;
  QComboBox* template_;
  QComboBox* device_;
  QFutureWatcher<Listing> listing_;
  QString runDir_;
  bool asked_ = false;  // send() asked and not every pane has answered yet
};

}  // namespace studio::ui
