#pragma once
// Page 7: where the run starts: this machine, or an SSH host - one of the saved hosts of the
// Hosts page (chosen by name, bringing its key, known_hosts, engine, remote root, Slurm and node
// settings) or typed as [ssh://]user@host[:port] and checked with remote::parse_ssh_target as it
// is typed. "Manage hosts..." asks the studio to open the Hosts page.
#include <QVector>

#include "studio/ui/remote/host_profile.h"
#include "studio/ui/runs/launch_target.h"
#include "studio/ui/wizard/wizard_page.h"

class QCheckBox;
class QComboBox;
class QLineEdit;
class QPushButton;
class QRadioButton;

namespace studio::ui {

class TargetPage : public WizardPage {
  Q_OBJECT

 public:
  explicit TargetPage(RunDraft* draft, QWidget* parent = nullptr);

  // Where the run goes; the world size comes from the draft (the Parallelism page).
  LaunchTarget target() const;
  void setSshTarget(const QString& text);  // selects SSH with this host text (or host name)
  void setLocal();
  // The saved hosts offered in the host box (the studio passes its HostStore's hosts).
  void setHosts(const QVector<HostProfile>& hosts);
  QVector<HostProfile> hosts() const { return hosts_; }

  QRadioButton* localButton() const { return local_; }
  QRadioButton* sshButton() const { return ssh_; }
  QComboBox* hostBox() const { return host_; }
  QLineEdit* hostEdit() const;  // the host box's text
  QPushButton* manageHostsButton() const { return manage_; }
  QCheckBox* slurmBox() const { return slurm_; }
  QCheckBox* uploadModelBox() const { return uploadModel_; }

 signals:
  void targetChanged();
  void manageHostsRequested();

 protected:
  std::vector<InlineMessage> pageMessages() const override;

 private:
  void update();
  void hostTextChanged(const QString& text);
  const HostProfile* chosenHost() const;

  QRadioButton* local_;
  QRadioButton* ssh_;
  QComboBox* host_;
  QPushButton* manage_;
  QCheckBox* slurm_;
  QLineEdit* partition_;
  QLineEdit* account_;
  QLineEdit* time_;
  QCheckBox* uploadModel_;
  QVector<HostProfile> hosts_;
};

}  // namespace studio::ui
