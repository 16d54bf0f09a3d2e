#include "studio/ui/shell/attach_remote_dialog.h"

#include <QComboBox>
#include <QDialogButtonBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QVBoxLayout>

#include "studio/remote/remote_run.h"
#include "studio/ui/remote/host_profile.h"
#include "studio/ui/remote/remote_follower.h"

namespace studio::ui {

AttachRemoteDialog::AttachRemoteDialog(HostStore* hosts, RemoteRuns* remoteRuns, QWidget* parent)
    : QDialog(parent),
      hosts_(hosts),
      remoteRuns_(remoteRuns),
      host_(new QComboBox),
      runId_(new QComboBox),
      list_(new QPushButton(tr("&List Runs"))),
      status_(new QLabel) {
  setWindowTitle(tr("Attach Remote Run"));
  host_->setObjectName(QStringLiteral("host"));
  runId_->setObjectName(QStringLiteral("runId"));
  runId_->setAccessibleName(tr("Run"));
  list_->setObjectName(QStringLiteral("list"));
  status_->setObjectName(QStringLiteral("status"));
  status_->setWordWrap(true);
  runId_->setEditable(true);
  runId_->setMinimumContentsLength(40);
  runId_->lineEdit()->setPlaceholderText(
      tr("a run id (as `studio submit` printed it), or the path of a run folder on the host"));
  runId_->setToolTip(
      tr("A run the studio submitted: its id (List Runs shows them).\nA run it did not start (a "
         "LLaMA-Factory output_dir, or a studio-train run launched by hand): the folder's path, "
         "absolute or from the login directory (~/...). It is followed read-only: the studio "
         "cannot stop it."));
  for (const HostProfile& h : hosts_->hosts()) host_->addItem(h.name);

  auto* runRow = new QHBoxLayout;
  runRow->addWidget(runId_, 1);
  runRow->addWidget(list_);
  auto* form = new QFormLayout;
  form->addRow(tr("&Host:"), host_);
  form->addRow(tr("&Run:"), runRow);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  ok_ = buttons->button(QDialogButtonBox::Ok);
  ok_->setText(tr("&Attach"));
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(form);
  layout->addWidget(status_);
  layout->addWidget(buttons);
  if (host_->count() == 0)
    status_->setText(tr("No saved hosts: add one with File > Hosts... first."));

  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(list_, &QPushButton::clicked, this, &AttachRemoteDialog::listRuns);
  connect(host_, &QComboBox::currentTextChanged, this, [this] {
    runId_->clear();
    updateOk();
  });
  connect(runId_, &QComboBox::currentTextChanged, this, &AttachRemoteDialog::updateOk);
  connect(remoteRuns_, &RemoteRuns::runsListed, this,
          [this](const QStringList& ids, const QStringList& descriptions) {
            if (!listing_) return;
            listing_ = false;
            runId_->clear();
            // Newest first: the run just submitted is the one people attach to.
            for (qsizetype i = ids.size() - 1; i >= 0; --i)
              runId_->addItem(ids[i] + QStringLiteral("  (") + descriptions.value(i) +
                                  QLatin1Char(')'),
                              ids[i]);
            status_->setText(ids.isEmpty() ? tr("No runs on %1.").arg(hostName())
                                           : tr("%n run(s) on %1.", nullptr, int(ids.size()))
                                                 .arg(hostName()));
            updateOk();
          });
  connect(remoteRuns_, &RemoteRuns::listFailed, this, [this](const QString& error) {
    if (!listing_) return;
    listing_ = false;
    status_->setText(error);
    updateOk();
  });
  updateOk();
}

QString AttachRemoteDialog::hostName() const { return host_->currentText(); }

QString AttachRemoteDialog::runId() const {
  // A listed entry carries its id as data; a typed one is the text itself.
  const int index = runId_->currentIndex();
  if (index >= 0 && runId_->itemText(index) == runId_->currentText() &&
      runId_->itemData(index).isValid())
    return runId_->itemData(index).toString();
  return runId_->currentText().trimmed();
}

void AttachRemoteDialog::listRuns() {
  const HostProfile* profile = hosts_->host(hostName());
  if (!profile) return;
  listing_ = true;
  status_->setText(tr("Listing the runs on %1 ...").arg(profile->target));
  updateOk();
  remoteRuns_->listRuns(profile->hostRef(), profile->remoteRoot);
}

void AttachRemoteDialog::updateOk() {
  list_->setEnabled(!listing_ && hosts_->host(hostName()));
  ok_->setEnabled(hosts_->host(hostName()) &&
                  (studio::remote::is_valid_run_id(runId().toStdString()) ||
                   isRemoteFolderPath(runId())));
}

}  // namespace studio::ui
