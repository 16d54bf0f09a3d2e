#include "studio/ui/wizard/target_page.h"

#include <QButtonGroup>
#include <QLabel>
#include <QLineEdit>
#include <QRadioButton>
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
      host_(new QLineEdit) {
  setTitle(tr("Target"));
  setSubTitle(tr("Where the training processes run."));
  local_->setObjectName(QStringLiteral("local"));
  ssh_->setObjectName(QStringLiteral("ssh"));
  host_->setObjectName(QStringLiteral("host"));
  host_->setPlaceholderText(tr("[ssh://]user@host[:port]"));
  auto* group = new QButtonGroup(this);
  group->addButton(local_);
  group->addButton(ssh_);
  local_->setChecked(true);
  auto* note = new QLabel(tr("Runs on an SSH host are prepared here (Export YAML, Copy command "
                             "line); launching them from the studio comes with the Hosts page."));
  note->setWordWrap(true);

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(local_);
  layout->addWidget(ssh_);
  layout->addWidget(host_);
  layout->addWidget(note);
  layout->addWidget(messagesWidget());
  layout->addStretch(1);

  connect(local_, &QRadioButton::toggled, this, &TargetPage::update);
  connect(host_, &QLineEdit::textChanged, this, &TargetPage::update);
  update();
}

void TargetPage::setSshTarget(const QString& text) {
  host_->setText(text);
  ssh_->setChecked(true);
}

void TargetPage::setLocal() {
  local_->setChecked(true);
}

void TargetPage::update() {
  host_->setEnabled(ssh_->isChecked());
  refresh();
  emit targetChanged();
}

LaunchTarget TargetPage::target() const {
  LaunchTarget t;
  t.nproc = draft()->processesPerNode();
  t.nnodes = draft()->nodes();
  if (ssh_->isChecked()) {
    t.kind = LaunchTarget::Ssh;
    const auto parsed = parseHost(host_->text(), nullptr);
    t.sshTarget = parsed ? QString::fromStdString(parsed->to_string()) : host_->text().trimmed();
  }
  return t;
}

std::vector<InlineMessage> TargetPage::pageMessages() const {
  if (!ssh_->isChecked()) return {};
  if (host_->text().trimmed().isEmpty())
    return {{studio::Severity::Error, tr("host: type the SSH host as [ssh://]user@host[:port]")}};
  QString error;
  if (!parseHost(host_->text(), &error)) return {{studio::Severity::Error, tr("host: %1").arg(error)}};
  return {};
}

}  // namespace studio::ui
