#pragma once
// Page 7: where the run starts: this machine, or an SSH host typed as [ssh://]user@host[:port]
// and checked with remote::parse_ssh_target as it is typed. Launching on a host is not built
// yet: the Review page then offers export and the command line only.
#include "studio/ui/wizard/launch_target.h"
#include "studio/ui/wizard/wizard_page.h"

class QLineEdit;
class QRadioButton;

namespace studio::ui {

class TargetPage : public WizardPage {
  Q_OBJECT

 public:
  explicit TargetPage(RunDraft* draft, QWidget* parent = nullptr);

  // Where the run goes; the world size comes from the draft (the Parallelism page).
  LaunchTarget target() const;
  void setSshTarget(const QString& text);  // selects SSH with this host text
  void setLocal();

  QRadioButton* localButton() const { return local_; }
  QRadioButton* sshButton() const { return ssh_; }
  QLineEdit* hostEdit() const { return host_; }

 signals:
  void targetChanged();

 protected:
  std::vector<InlineMessage> pageMessages() const override;

 private:
  void update();

  QRadioButton* local_;
  QRadioButton* ssh_;
  QLineEdit* host_;
};

}  // namespace studio::ui
