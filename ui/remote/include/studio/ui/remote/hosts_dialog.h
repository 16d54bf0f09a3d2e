#pragma once
// The Hosts page: the hosts the studio knows, an editor for one profile, and "Test connection",
// which connects and reads the host's inventory (GPUs, CPUs, memory, OS, studio-train version,
// Slurm partitions) on a worker thread; host key and passphrase questions come up through
// GuiPrompts while the dialog stays responsive.
//
// Widget object names, for tests: hostList, addHost, removeHost, saveHost, testConnection;
// the editor's nameEdit, targetEdit, identityEdit, engineEdit, remoteRootEdit, slurmGroup,
// partitionEdit, accountEdit, timeEdit, extraNodesEdit, masterAddrEdit, advancedGroup,
// knownHostsEdit, sshConfigEdit; statusLabel (progress and errors), and the inventory's
// inventoryGroup, hostnameLabel, cpuLabel, memoryLabel, osLabel, engineLabel, slurmLabel,
// gpuNoteLabel, gpuTable.
#include <QDialog>
#include <QFutureWatcher>
#include <QString>

#include "studio/remote/host_inventory.h"
#include "studio/ui/remote/host_profile.h"

class QGroupBox;
class QLabel;
class QLayout;
class QLineEdit;
class QListWidget;
class QPushButton;
class QTableWidget;

namespace studio::ui {

class GuiPrompts;

// What a test connection found: the inventory, or the error text to show.
struct HostProbeResult {
  bool ok = false;
  studio::remote::HostInventory inventory;
  QString error;  // the RemoteError / SshError message, naming the host
};

class HostsDialog : public QDialog {
  Q_OBJECT

 public:
  // `store` and `prompts` must outlive the dialog and any test connection it started (the
  // main window owns both); `prompts` may be nullptr: unknown host keys are then rejected.
  HostsDialog(HostStore* store, GuiPrompts* prompts, QWidget* parent = nullptr);
  ~HostsDialog() override;

  // The profile the editor shows now, saved or not.
  HostProfile editedProfile() const;
  // Shows the host `name` in the editor (false when the store has none).
  bool selectHost(const QString& name);

 signals:
  // A test connection ended; the inventory or the error is on screen.
  void testFinished(bool ok);

 private:
  QWidget* createList();
  QWidget* createEditor();
  QWidget* createInventory();
  void reloadList(const QString& select);
  void showProfile(const HostProfile& profile);
  void startNew();
  void saveProfile();
  void removeProfile();
  void testConnection();
  void showProbe(const HostProbeResult& result);
  void showStatus(const QString& text, bool error);
  QPushButton* button(const QString& text, const char* objectName, void (HostsDialog::*clicked)(),
                      QWidget* parent);
  // `edit` with a "Browse..." button that picks a local file (starting in ~/.ssh).
  QLayout* withBrowse(QLineEdit* edit, const QString& title, QWidget* parent);

  HostStore* store_;
  GuiPrompts* prompts_;
  QString editingName_;  // the stored name the editor started from; "" for a new host
  QFutureWatcher<HostProbeResult> probe_;

  QListWidget* list_ = nullptr;
  QPushButton* removeButton_ = nullptr;
  QPushButton* testButton_ = nullptr;
  QLineEdit* name_ = nullptr;
  QLineEdit* target_ = nullptr;
  QLineEdit* identity_ = nullptr;
  QLineEdit* engine_ = nullptr;
  QLineEdit* remoteRoot_ = nullptr;
  QGroupBox* slurm_ = nullptr;
  QLineEdit* partition_ = nullptr;
  QLineEdit* account_ = nullptr;
  QLineEdit* timeLimit_ = nullptr;
  QLineEdit* extraNodes_ = nullptr;
  QLineEdit* masterAddr_ = nullptr;
  QLineEdit* knownHosts_ = nullptr;
  QLineEdit* sshConfig_ = nullptr;
  QLabel* status_ = nullptr;
  QGroupBox* inventory_ = nullptr;
  QLabel* hostname_ = nullptr;
  QLabel* cpus_ = nullptr;
  QLabel* memory_ = nullptr;
  QLabel* os_ = nullptr;
  QLabel* engineInfo_ = nullptr;
  QLabel* slurmInfo_ = nullptr;
  QLabel* gpuNote_ = nullptr;
  QTableWidget* gpus_ = nullptr;
};

}  // namespace studio::ui
