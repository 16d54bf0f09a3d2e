#pragma once
// A page of the run wizard: it edits some keys of the RunDraft and validates live. Its messages
// are its own problems (what the config cannot hold: text that is not a number, a folder that
// could not be read) followed by validate_config's diagnostics for its keys; any error, or a
// validation still running, keeps the page incomplete (Next disabled).
#include <vector>

#include <QStringList>
#include <QWizardPage>

#include "studio/ui/wizard/inline_messages.h"

namespace studio::ui {

class FieldBindings;
class RunDraft;

class WizardPage : public QWizardPage {
  Q_OBJECT

 public:
  WizardPage(RunDraft* draft, QStringList keys, QWidget* parent = nullptr);

  bool isComplete() const override;
  // The config keys this page edits, whose diagnostics it shows.
  const QStringList& keys() const { return keys_; }
  // The page's messages as plain text, one per line (errors first).
  QString messageText() const;
  InlineMessages* messagesWidget() const { return messages_; }
  RunDraft* draft() const { return draft_; }

 protected:
  FieldBindings* bindings() const { return bindings_; }
  // Problems outside the config's diagnostics; the page is incomplete while there are errors.
  virtual std::vector<InlineMessage> pageMessages() const { return {}; }
  // Further conditions for Next (e.g. the model was read); pageMessages() says why.
  virtual bool pageReady() const { return true; }
  // Recomputes the messages and completeness; pages call it when their own state changes.
  void refresh();

 private:
  RunDraft* draft_;
  QStringList keys_;
  FieldBindings* bindings_;
  InlineMessages* messages_;
};

}  // namespace studio::ui
