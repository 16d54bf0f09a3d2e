#include "studio/ui/wizard/wizard_page.h"

#include "studio/ui/wizard/field_bindings.h"
#include "studio/ui/wizard/run_draft.h"

namespace studio::ui {

WizardPage::WizardPage(RunDraft* draft, QStringList keys, QWidget* parent)
    : QWizardPage(parent),
      draft_(draft),
      keys_(std::move(keys)),
      bindings_(new FieldBindings(draft, this)),
      messages_(new InlineMessages) {
  connect(draft_, &RunDraft::validated, this, &WizardPage::refresh);
  connect(draft_, &RunDraft::changed, this, &WizardPage::refresh);
  connect(bindings_, &FieldBindings::problemsChanged, this, &WizardPage::refresh);
}

bool WizardPage::isComplete() const {
  return !draft_->validating() && pageReady() && messages_->errorCount() == 0;
}

QString WizardPage::messageText() const {
  return messages_->text();
}

void WizardPage::refresh() {
  std::vector<InlineMessage> all = pageMessages();
  for (const QString& problem : bindings_->problems())
    all.push_back({studio::Severity::Error, problem});
  for (const auto& d : draft_->diagnosticsFor(keys_)) all.push_back({d.severity, describe(d)});
  messages_->setMessages(all);
  emit completeChanged();
}

}  // namespace studio::ui
