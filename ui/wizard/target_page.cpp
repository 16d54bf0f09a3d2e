#include "studio/ui/wizard/target_page.h"

#include <QButtonGroup>
#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QSignalBlocker>
#include <QVBoxLayout>

#include "studio/remote/ssh_target.h"
#include "studio/ui/wizard/run_draft.h"

namespace studio::ui {
namespace {

std::optional<studio::remote::SshTarget> parseHost(const QString& text, QString* error) {
  std::string why;
  auto target = studio::remote::parse_ssh_target(text.trimmed().toStdString(), why);
  if (error) *error = QString::fromStdString(why);
  return target;
}

}  // namespace

TargetPage::TargetPage(RunDraft* draft, QWidget* parent)
    : WizardPage(draft, {}, parent),
      local_(new QRadioButton(tr("&This machine"))),
      ssh_(new QRadioButton(tr("An &SSH host:"))),
      host_(new QComboBox),
      manage_(new QPushButton(tr("&Manage hosts..."))),
      slurm_(new QCheckBox(tr("Submit as a Slurm batch &job"))),
      partition_(new QLineEdit),
      account_(new QLineEdit),
      time_(new QLineEdit),
      uploadModel_(new QCheckBox(tr("&Upload the model folder(s) with the data"))) {
  setTitle(tr("Target"));
  setSubTitle(tr("Where the training processes run."));
  local_->setObjectName(QStringLiteral("local"));
  ssh_->setObjectName(QStringLiteral("ssh"));
  host_->setObjectName(QStringLiteral("host"));
  host_->setAccessibleName(tr("SSH host"));
  host_->setEditable(true);
  // Typed hosts are used as typed, never added to the saved hosts by pressing Enter.
  host_->setInsertPolicy(QComboBox::NoInsert);
  host_->lineEdit()->setPlaceholderText(tr("a saved host, or [ssh://]user@host[:port]"));
  manage_->setObjectName(QStringLiteral("manageHosts"));
  slurm_->setObjectName(QStringLiteral("slurm"));
  partition_->setObjectName(QStringLiteral("partition"));
  account_->setObjectName(QStringLiteral("account"));
  time_->setObjectName(QStringLiteral("timeLimit"));
  partition_->setPlaceholderText(tr("the cluster's default"));
  account_->setPlaceholderText(tr("the cluster's default"));
  time_->setPlaceholderText(tr("e.g. 04:00:00"));
  uploadModel_->setObjectName(QStringLiteral("uploadModel"));
  uploadModel_->setToolTip(tr("Without it the model path must exist on the host as written."));
  auto* group = new QButtonGroup(this);
  group->addButton(local_);
  group->addButton(ssh_);
  local_->setChecked(true);
  auto* note =
      new QLabel(tr("The data is uploaded into a new run folder on the host and the run "
                    "starts detached there (or as a Slurm job): it goes on if the "
                    "connection drops or the studio closes, and the studio follows it "
                    "again when it reconnects."));
  note->setWordWrap(true);

  auto* hostRow = new QHBoxLayout;
  hostRow->addWidget(host_, 1);
  hostRow->addWidget(manage_);
  auto* slurmForm = new QFormLayout;
  slurmForm->addRow(tr("Partition:"), partition_);
  slurmForm->addRow(tr("Account:"), account_);
  slurmForm->addRow(tr("Time limit:"), time_);

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(local_);
  layout->addWidget(ssh_);
  layout->addLayout(hostRow);
  layout->addWidget(uploadModel_);
  layout->addWidget(slurm_);
  layout->addLayout(slurmForm);
  layout->addWidget(note);
  layout->addWidget(messagesWidget());
  layout->addStretch(1);

  connect(local_, &QRadioButton::toggled, this, &TargetPage::update);
  connect(host_, &QComboBox::currentTextChanged, this, &TargetPage::hostTextChanged);
  connect(manage_, &QPushButton::clicked, this, &TargetPage::manageHostsRequested);
  for (QCheckBox* box : {slurm_, uploadModel_})
    connect(box, &QCheckBox::toggled, this, &TargetPage::update);
  for (QLineEdit* edit : {partition_, account_, time_})
    connect(edit, &QLineEdit::textChanged, this, &TargetPage::update);
  update();
}

QLineEdit* TargetPage::hostEdit() const {
  return host_->lineEdit();
}

void TargetPage::setSshTarget(const QString& text) {
  host_->setEditText(text);
  ssh_->setChecked(true);
}

void TargetPage::setLocal() {
  local_->setChecked(true);
}

void TargetPage::setHosts(const QVector<HostProfile>& hosts) {
  hosts_ = hosts;
  const QString text = host_->currentText();
  {
    // Refilling the list must not replace what the box says.
    const QSignalBlocker blocker(host_);
    host_->clear();
    for (const HostProfile& h : hosts_) host_->addItem(h.name);
    host_->setCurrentIndex(-1);
    host_->setEditText(text);
  }
  hostTextChanged(text);
}

const HostProfile* TargetPage::chosenHost() const {
  const QString text = host_->currentText().trimmed();
  for (const HostProfile& h : hosts_)
    if (h.name == text) return &h;
  return nullptr;
}

// Choosing a saved host brings its Slurm defaults; they stay editable for this run.
void TargetPage::hostTextChanged(const QString&) {
  if (const HostProfile* h = chosenHost()) {
    const QSignalBlocker blockers[] = {QSignalBlocker(slurm_), QSignalBlocker(partition_),
                                       QSignalBlocker(account_), QSignalBlocker(time_)};
    slurm_->setChecked(h->useSlurm);
    partition_->setText(h->partition);
    account_->setText(h->account);
    time_->setText(h->timeLimit);
  }
  update();
}

void TargetPage::update() {
  const bool ssh = ssh_->isChecked();
  for (QWidget* w : std::initializer_list<QWidget*>{host_, manage_, slurm_, uploadModel_})
    w->setEnabled(ssh);
  for (QLineEdit* edit : {partition_, account_, time_})
    edit->setEnabled(ssh && slurm_->isChecked());
  refresh();
  emit targetChanged();
}

LaunchTarget TargetPage::target() const {
  LaunchTarget t;
  t.nproc = draft()->processesPerNode();
  t.nnodes = draft()->nodes();
  if (!ssh_->isChecked()) return t;
  t.kind = LaunchTarget::Ssh;
  if (const HostProfile* h = chosenHost()) {
    t.hostName = h->name;
    t.sshTarget = h->target;
    t.identityFile = h->identityFile;
    t.knownHostsFile = h->knownHostsFile;
    t.sshConfigFile = h->sshConfigFile;
    t.engine = h->engine;
    t.remoteRoot = h->remoteRoot;
    t.extraNodes = h->extraNodes;
    t.masterAddr = h->masterAddr;
  } else {
    const auto parsed = parseHost(host_->currentText(), nullptr);
    t.sshTarget =
        parsed ? QString::fromStdString(parsed->to_string()) : host_->currentText().trimmed();
  }
  t.useSlurm = slurm_->isChecked();
  if (t.useSlurm) {
    t.partition = partition_->text().trimmed();
    t.account = account_->text().trimmed();
    t.timeLimit = time_->text().trimmed();
  }
  t.uploadModel = uploadModel_->isChecked();
  return t;
}

std::vector<InlineMessage> TargetPage::pageMessages() const {
  if (!ssh_->isChecked()) return {};
  if (host_->currentText().trimmed().isEmpty())
    return {{studio::Severity::Error, tr("host: type the SSH host as [ssh://]user@host[:port]")}};
  QString error;
  if (!chosenHost() && !parseHost(host_->currentText(), &error))
    return {{studio::Severity::Error, tr("host: %1").arg(error)}};
  const LaunchTarget t = target();
  if (t.nnodes > 1 && !t.useSlurm && t.extraNodes.size() != t.nnodes - 1)
    return {{studio::Severity::Error,
             tr("nodes: %1 nodes without Slurm need the other %2 node(s) listed in a saved "
                "host's extra nodes (Manage hosts...), or submit with Slurm")
                 .arg(t.nnodes)
                 .arg(t.nnodes - 1)}};
  return {};
}

}  // namespace studio::ui
