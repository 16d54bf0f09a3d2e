#include "studio/ui/remote/hosts_dialog.h"

#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPushButton>
#include <QRegularExpression>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include <exception>

#include "studio/ui/remote/gui_prompts.h"

namespace studio::ui {
namespace {

QLineEdit* lineEdit(const char* objectName, const QString& placeholder, QWidget* parent) {
  auto* edit = new QLineEdit(parent);
  edit->setObjectName(QLatin1String(objectName));
  edit->setPlaceholderText(placeholder);
  return edit;
}

QLabel* valueLabel(const char* objectName, QWidget* parent) {
  auto* label = new QLabel(parent);
  label->setObjectName(QLatin1String(objectName));
  label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  label->setWordWrap(true);
  return label;
}

QString gib(long long kib) {
  return QString::number(static_cast<double>(kib) / (1024.0 * 1024.0), 'f', 1);
}

QString partitionsText(const studio::remote::HostInventory& inv) {
  if (!inv.slurm) return QString::fromStdString(inv.slurm_note);
  if (inv.partitions.empty()) return HostsDialog::tr("sinfo lists no partitions");
  QStringList lines;
  for (const auto& p : inv.partitions) {
    QStringList parts{QString::fromStdString(p.availability),
                      HostsDialog::tr("%n node(s)", nullptr, p.nodes)};
    if (!p.gres.empty()) parts << QString::fromStdString(p.gres);
    parts << HostsDialog::tr("time limit %1").arg(QString::fromStdString(p.time_limit));
    lines << QStringLiteral("%1%2: %3")
                 .arg(QString::fromStdString(p.name),
                      p.is_default ? HostsDialog::tr(" (default)") : QString(),
                      parts.join(QStringLiteral(", ")));
  }
  return lines.join(QLatin1Char('\n'));
}

QString engineText(const studio::remote::HostInventory& inv) {
  if (!inv.engine_found) return QString::fromStdString(inv.engine_note);
  QString text =
      QStringLiteral("studio-train %1 (%2)")
          .arg(QString::fromStdString(inv.engine_version), QString::fromStdString(inv.engine_path));
  if (!inv.engine_details.empty())
    text += QLatin1Char('\n') + QString::fromStdString(inv.engine_details);
  return text;
}

// Runs on the worker: every failure becomes the text the dialog shows.
HostProbeResult probe(const HostProfile& profile, GuiPrompts* prompts) {
  HostProbeResult result;
  try {
    const studio::remote::SshSession session = connectHost(profile, prompts);
    result.inventory = studio::remote::probe_inventory(session, profile.engine.toStdString());
    result.ok = true;
  } catch (const std::exception& e) {
    result.error = QString::fromStdString(e.what());
  }
  return result;
}

}  // namespace

HostsDialog::HostsDialog(HostStore* store, GuiPrompts* prompts, QWidget* parent)
    : QDialog(parent), store_(store), prompts_(prompts) {
  setObjectName(QStringLiteral("hostsDialog"));
  setWindowTitle(tr("Hosts"));
  auto* splitter = new QSplitter(this);
  splitter->addWidget(createList());
  auto* right = new QWidget(splitter);
  auto* rightLayout = new QVBoxLayout(right);
  rightLayout->setContentsMargins(0, 0, 0, 0);
  rightLayout->addWidget(createEditor());
  status_ = valueLabel("statusLabel", right);
  rightLayout->addWidget(status_);
  rightLayout->addWidget(createInventory(), 1);
  splitter->addWidget(right);
  splitter->setStretchFactor(1, 1);

  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(splitter, 1);
  layout->addWidget(buttons);

  connect(&probe_, &QFutureWatcherBase::finished, this, [this] { showProbe(probe_.result()); });
  connect(store_, &HostStore::hostsChanged, this, [this] { reloadList(editingName_); });
  reloadList({});
  if (store_->hosts().isEmpty() || !selectHost(store_->hosts().front().name)) startNew();
  resize(900, 640);
}

// A running probe finishes in the pool unobserved: it holds a copy of the profile, and the
// prompts outlive it (see the constructor).
HostsDialog::~HostsDialog() = default;

QWidget* HostsDialog::createList() {
  auto* box = new QWidget(this);
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(0, 0, 0, 0);
  list_ = new QListWidget(box);
  list_->setObjectName(QStringLiteral("hostList"));
  list_->setAccessibleName(tr("Saved hosts"));
  connect(list_, &QListWidget::currentTextChanged, this, [this](const QString& name) {
    if (const HostProfile* p = store_->host(name)) showProfile(*p);
  });
  auto* row = new QHBoxLayout;
  row->addWidget(button(tr("&Add"), "addHost", &HostsDialog::startNew, box));
  removeButton_ = button(tr("&Remove"), "removeHost", &HostsDialog::removeProfile, box);
  row->addWidget(removeButton_);
  layout->addWidget(list_, 1);
  layout->addLayout(row);
  return box;
}

QWidget* HostsDialog::createEditor() {
  auto* box = new QWidget(this);
  auto* form = new QFormLayout(box);
  name_ = lineEdit("nameEdit", tr("e.g. gpu-box"), box);
  target_ = lineEdit("targetEdit", tr("[user@]host[:port] or a ~/.ssh/config alias"), box);
  identity_ = lineEdit("identityEdit", tr("ssh-agent, ~/.ssh/config, ~/.ssh/id_*"), box);
  engine_ =
      lineEdit("engineEdit", tr("path of studio-train on the host, or a name in its PATH"), box);
  remoteRoot_ = lineEdit("remoteRootEdit", tr("relative to the login directory, or absolute"), box);
  form->addRow(tr("&Name:"), name_);
  form->addRow(tr("&Target:"), target_);
  identity_->setAccessibleName(tr("Identity file"));
  form->addRow(tr("Identit&y file:"), withBrowse(identity_, tr("Identity file"), box));
  form->addRow(tr("&Engine:"), engine_);
  form->addRow(tr("Remote r&oot:"), remoteRoot_);

  slurm_ = new QGroupBox(tr("Submit with &Slurm (sbatch)"), box);
  slurm_->setObjectName(QStringLiteral("slurmGroup"));
  slurm_->setCheckable(true);
  auto* slurmForm = new QFormLayout(slurm_);
  partition_ = lineEdit("partitionEdit", tr("the cluster's default"), slurm_);
  account_ = lineEdit("accountEdit", tr("your default account"), slurm_);
  timeLimit_ = lineEdit("timeEdit", tr("e.g. 1-12:00:00; the partition's default"), slurm_);
  slurmForm->addRow(tr("Partition:"), partition_);
  slurmForm->addRow(tr("Account:"), account_);
  slurmForm->addRow(tr("Time limit:"), timeLimit_);
  form->addRow(slurm_);

  extraNodes_ =
      lineEdit("extraNodesEdit", tr("multi-node without Slurm: other nodes' targets"), box);
  masterAddr_ = lineEdit("masterAddrEdit", tr("rank 0's address as the other nodes reach it"), box);
  form->addRow(tr("Extra no&des:"), extraNodes_);
  form->addRow(tr("&Master address:"), masterAddr_);

  auto* advanced = new QGroupBox(tr("Advanced"), box);
  advanced->setObjectName(QStringLiteral("advancedGroup"));
  auto* advancedForm = new QFormLayout(advanced);
  knownHosts_ = lineEdit("knownHostsEdit", tr("~/.ssh/known_hosts"), advanced);
  sshConfig_ = lineEdit("sshConfigEdit", tr("~/.ssh/config"), advanced);
  advancedForm->addRow(tr("Known hosts:"), withBrowse(knownHosts_, tr("Known hosts"), advanced));
  advancedForm->addRow(tr("SSH config:"), withBrowse(sshConfig_, tr("SSH config"), advanced));
  form->addRow(advanced);

  auto* actions = new QHBoxLayout;
  actions->addStretch(1);
  actions->addWidget(button(tr("Sa&ve"), "saveHost", &HostsDialog::saveProfile, box));
  testButton_ = button(tr("Test connect&ion"), "testConnection", &HostsDialog::testConnection, box);
  actions->addWidget(testButton_);
  form->addRow(actions);
  return box;
}

QWidget* HostsDialog::createInventory() {
  inventory_ = new QGroupBox(tr("Inventory"), this);
  inventory_->setObjectName(QStringLiteral("inventoryGroup"));
  auto* form = new QFormLayout(inventory_);
  hostname_ = valueLabel("hostnameLabel", inventory_);
  cpus_ = valueLabel("cpuLabel", inventory_);
  memory_ = valueLabel("memoryLabel", inventory_);
  os_ = valueLabel("osLabel", inventory_);
  engineInfo_ = valueLabel("engineLabel", inventory_);
  slurmInfo_ = valueLabel("slurmLabel", inventory_);
  gpuNote_ = valueLabel("gpuNoteLabel", inventory_);
  form->addRow(tr("Host name:"), hostname_);
  form->addRow(tr("CPUs:"), cpus_);
  form->addRow(tr("Memory:"), memory_);
  form->addRow(tr("OS:"), os_);
  form->addRow(tr("studio-train:"), engineInfo_);
  form->addRow(tr("Slurm:"), slurmInfo_);
  form->addRow(tr("GPUs:"), gpuNote_);
  gpus_ = new QTableWidget(0, 4, inventory_);
  gpus_->setObjectName(QStringLiteral("gpuTable"));
  gpus_->setHorizontalHeaderLabels({tr("Index"), tr("Name"), tr("Total MiB"), tr("Used MiB")});
  gpus_->horizontalHeader()->setSectionResizeMode(1, QHeaderView::Stretch);
  gpus_->verticalHeader()->hide();
  gpus_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  form->addRow(gpus_);
  inventory_->setEnabled(false);
  return inventory_;
}

void HostsDialog::reloadList(const QString& select) {
  const QSignalBlocker blocker(list_);
  list_->clear();
  for (const HostProfile& p : store_->hosts()) list_->addItem(p.name);
  const auto found = list_->findItems(select, Qt::MatchExactly);
  if (!found.isEmpty()) list_->setCurrentItem(found.front());
  removeButton_->setEnabled(!found.isEmpty());
}

bool HostsDialog::selectHost(const QString& name) {
  const auto found = list_->findItems(name, Qt::MatchExactly);
  const HostProfile* profile = store_->host(name);
  if (found.isEmpty() || profile == nullptr) return false;
  {
    // showProfile below, also when the item is current already.
    const QSignalBlocker blocker(list_);
    list_->setCurrentItem(found.front());
  }
  showProfile(*profile);
  return true;
}

void HostsDialog::showProfile(const HostProfile& p) {
  editingName_ = p.name;
  removeButton_->setEnabled(!p.name.isEmpty() && store_->host(p.name) != nullptr);
  name_->setText(p.name);
  target_->setText(p.target);
  identity_->setText(p.identityFile);
  engine_->setText(p.engine);
  remoteRoot_->setText(p.remoteRoot);
  slurm_->setChecked(p.useSlurm);
  partition_->setText(p.partition);
  account_->setText(p.account);
  timeLimit_->setText(p.timeLimit);
  extraNodes_->setText(p.extraNodes.join(QLatin1Char(' ')));
  masterAddr_->setText(p.masterAddr);
  knownHosts_->setText(p.knownHostsFile);
  sshConfig_->setText(p.sshConfigFile);
  showStatus({}, false);
}

HostProfile HostsDialog::editedProfile() const {
  HostProfile p;
  p.name = name_->text().trimmed();
  p.target = target_->text().trimmed();
  p.identityFile = identity_->text().trimmed();
  p.engine = engine_->text().trimmed();
  p.remoteRoot = remoteRoot_->text().trimmed();
  p.useSlurm = slurm_->isChecked();
  p.partition = partition_->text().trimmed();
  p.account = account_->text().trimmed();
  p.timeLimit = timeLimit_->text().trimmed();
  // Targets never hold spaces or commas, so either separates them.
  p.extraNodes =
      extraNodes_->text().split(QRegularExpression(QStringLiteral("[\\s,]+")), Qt::SkipEmptyParts);
  p.masterAddr = masterAddr_->text().trimmed();
  p.knownHostsFile = knownHosts_->text().trimmed();
  p.sshConfigFile = sshConfig_->text().trimmed();
  return p;
}

void HostsDialog::startNew() {
  list_->clearSelection();
  list_->setCurrentItem(nullptr);
  showProfile(HostProfile{});
  name_->setFocus();
}

void HostsDialog::saveProfile() {
  const HostProfile p = editedProfile();
  const QString previous = editingName_;
  const QString error = store_->save(p, previous);
  if (!error.isEmpty()) {
    showStatus(error, true);
    return;
  }
  editingName_ = p.name;
  reloadList(p.name);
  showStatus(tr("Saved %1.").arg(p.name), false);
}

void HostsDialog::removeProfile() {
  if (editingName_.isEmpty()) return;
  const QString removed = editingName_;
  store_->remove(removed);
  if (store_->hosts().isEmpty() || !selectHost(store_->hosts().front().name)) startNew();
  showStatus(tr("Removed %1.").arg(removed), false);
}

void HostsDialog::testConnection() {
  if (probe_.isRunning()) return;
  const HostProfile p = editedProfile();
  if (const QString error = p.validate(); !error.isEmpty()) {
    showStatus(error, true);
    emit testFinished(false);
    return;
  }
  testButton_->setEnabled(false);
  showStatus(tr("Connecting to %1...").arg(p.target), false);
  GuiPrompts* prompts = prompts_;
  probe_.setFuture(QtConcurrent::run([p, prompts] { return probe(p, prompts); }));
}

void HostsDialog::showProbe(const HostProbeResult& result) {
  testButton_->setEnabled(true);
  inventory_->setEnabled(result.ok);
  gpus_->setRowCount(0);
  for (QLabel* label : {hostname_, cpus_, memory_, os_, engineInfo_, slurmInfo_, gpuNote_})
    label->clear();
  if (!result.ok) {
    showStatus(result.error, true);
    emit testFinished(false);
    return;
  }
  const studio::remote::HostInventory& inv = result.inventory;
  showStatus(tr("Connected to %1.").arg(QString::fromStdString(inv.hostname)), false);
  hostname_->setText(QString::fromStdString(inv.hostname));
  cpus_->setText(QString::number(inv.cpu_count));
  memory_->setText(
      tr("%1 GiB total, %2 GiB available").arg(gib(inv.mem_total_kib), gib(inv.mem_available_kib)));
  os_->setText(QString::fromStdString(inv.os));
  engineInfo_->setText(engineText(inv));
  slurmInfo_->setText(partitionsText(inv));
  gpuNote_->setText(inv.gpus.empty() ? QString::fromStdString(inv.gpu_note)
                                     : tr("%n GPU(s)", nullptr, static_cast<int>(inv.gpus.size())));
  gpus_->setRowCount(static_cast<int>(inv.gpus.size()));
  for (int row = 0; row < gpus_->rowCount(); ++row) {
    const studio::remote::GpuInfo& g = inv.gpus[static_cast<std::size_t>(row)];
    const QStringList cells{QString::number(g.index), QString::fromStdString(g.name),
                            QString::number(g.memory_total_mib),
                            QString::number(g.memory_used_mib)};
    for (int column = 0; column < cells.size(); ++column)
      gpus_->setItem(row, column, new QTableWidgetItem(cells[column]));
  }
  emit testFinished(true);
}

void HostsDialog::showStatus(const QString& text, bool error) {
  status_->setText(text);
  // A red that reads on the window's colour: dark red on a light theme, light red on a dark one.
  const bool dark = palette().color(QPalette::Window).lightness() < 128;
  status_->setStyleSheet(error ? (dark ? QStringLiteral("color: #ff7b72;") : QStringLiteral("color: #b00020;"))
                               : QString());
}

QPushButton* HostsDialog::button(const QString& text, const char* objectName,
                                 void (HostsDialog::*clicked)(), QWidget* parent) {
  auto* b = new QPushButton(text, parent);
  b->setObjectName(QLatin1String(objectName));
  connect(b, &QPushButton::clicked, this, clicked);
  return b;
}

QLayout* HostsDialog::withBrowse(QLineEdit* edit, const QString& title, QWidget* parent) {
  auto* row = new QHBoxLayout;
  row->addWidget(edit, 1);
  auto* browse = new QPushButton(tr("Browse..."), parent);
  connect(browse, &QPushButton::clicked, this, [this, edit, title] {
    const QString start =
        edit->text().isEmpty() ? QDir::homePath() + QStringLiteral("/.ssh") : edit->text();
    const QString file = QFileDialog::getOpenFileName(this, title, start);
    if (!file.isEmpty()) edit->setText(file);
  });
  row->addWidget(browse);
  return row;
}

}  // namespace studio::ui
