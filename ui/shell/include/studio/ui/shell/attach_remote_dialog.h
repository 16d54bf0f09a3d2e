#pragma once
// File > Attach Remote Run...: pick a saved host and one of its runs (listed on the host off the
// GUI thread, or typed: the id `studio submit` printed), or type the path of a run folder on the
// host the studio did not start (a LLaMA-Factory output_dir), to mirror and follow it.
#include <QDialog>
#include <QString>

class QComboBox;
class QLabel;
class QPushButton;

namespace studio::ui {

class HostStore;
class RemoteRuns;

class AttachRemoteDialog : public QDialog {
  Q_OBJECT

 public:
  // Widgets by objectName: "host", "runId", "list", "status".
  AttachRemoteDialog(HostStore* hosts, RemoteRuns* remoteRuns, QWidget* parent = nullptr);

  QString hostName() const;
  // The run id, or the folder path, as chosen.
  QString runId() const;
  // Asks the selected host for its runs (RemoteRuns::listRuns); the run combo fills when they
  // arrive.
  void listRuns();

 private:
  void updateOk();

  HostStore* hosts_;
  RemoteRuns* remoteRuns_;
  QComboBox* host_;
  QComboBox* runId_;
  QPushButton* list_;
  QPushButton* ok_;
  QLabel* status_;
  bool listing_ = false;
};

}  // namespace studio::ui
