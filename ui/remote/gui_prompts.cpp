#include "studio/ui/remote/gui_prompts.h"

#include <QInputDialog>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QThread>

#include "studio/ui/remote/host_profile.h"
#include "studio/ui/base/window_fit.h"

namespace studio::ui {
namespace {

using studio::remote::HostKeyDecision;
using studio::remote::HostKeyInfo;
using studio::remote::SecretRequest;

// Runs `ask` on the thread of `prompts`: directly when already there, else as a blocking queued
// call that blocks this worker only. Nothing runs when `prompts` is gone, or is deleted before
// the queued call runs (Qt then drops the call and releases the worker).
template <typename Ask>
void askOnGuiThread(const QPointer<GuiPrompts>& prompts, Ask ask) {
  GuiPrompts* target = prompts.data();
  if (target == nullptr) return;
  if (QThread::currentThread() == target->thread()) {
    ask(target);
  } else {
    QMetaObject::invokeMethod(
        target, [&] { ask(target); }, Qt::BlockingQueuedConnection);
  }
}

QString secretLabel(const SecretRequest& request) {
  const QString subject = QString::fromStdString(request.subject);
  QString label;
  switch (request.kind) {
    case SecretRequest::Kind::KeyPassphrase:
      label = GuiPrompts::tr("Passphrase for the key %1:").arg(subject);
      break;
    case SecretRequest::Kind::Password:
      label = GuiPrompts::tr("Password for %1:").arg(subject);
      break;
    case SecretRequest::Kind::KeyboardInteractive:
      label = QStringLiteral("%1\n%2").arg(subject, QString::fromStdString(request.prompt));
      break;
  }
  if (request.attempt > 1)
    label = GuiPrompts::tr("That was not accepted (attempt %1 of %2).\n")
                .arg(request.attempt)
                .arg(studio::remote::kSecretAttempts) +
            label;
  return label;
}

}  // namespace

GuiPrompts::GuiPrompts(QObject* parent) : QObject(parent) {}

studio::remote::HostKeyPolicy GuiPrompts::hostKeyPolicy() {
  QPointer<GuiPrompts> self(this);
  return [self](const HostKeyInfo& info) {
    HostKeyDecision decision = HostKeyDecision::RejectKey;
    askOnGuiThread(self, [&](GuiPrompts* p) { decision = p->askHostKey(info); });
    return decision;
  };
}

studio::remote::SecretPrompt GuiPrompts::secretPrompt() {
  QPointer<GuiPrompts> self(this);
  return [self](const SecretRequest& request) {
    std::optional<std::string> secret;
    askOnGuiThread(self, [&](GuiPrompts* p) { secret = p->askSecret(request); });
    return secret;
  };
}

HostKeyDecision GuiPrompts::askHostKey(const HostKeyInfo& info) {
  QMessageBox box(dialogParent_);
  box.setObjectName(QStringLiteral("hostKeyPrompt"));
  box.setIcon(QMessageBox::Question);
  box.setWindowTitle(tr("Unknown host key"));
  const QString host =
      QStringLiteral("%1:%2").arg(QString::fromStdString(info.host)).arg(info.port);
  box.setText(tr("The host %1 is not known yet.").arg(host));
  box.setInformativeText(
      tr("Its %1 key has the fingerprint\n%2\n\nCompare it with the one the host's administrator "
         "gives you (ssh-keygen -lf on the host's public key) before you accept it.")
          .arg(QString::fromStdString(info.key_type), QString::fromStdString(info.fingerprint)));
  QPushButton* reject = box.addButton(tr("Reject"), QMessageBox::RejectRole);
  reject->setObjectName(QStringLiteral("rejectKey"));
  QPushButton* once = box.addButton(tr("Accept once"), QMessageBox::AcceptRole);
  once->setObjectName(QStringLiteral("acceptOnce"));
  QPushButton* save = box.addButton(tr("Accept and save"), QMessageBox::AcceptRole);
  save->setObjectName(QStringLiteral("acceptAndSave"));
  // Enter or Escape must never trust a key by accident.
  box.setDefaultButton(reject);
  box.setEscapeButton(reject);
  fitToScreen(&box);
  box.exec();
  if (box.clickedButton() == once) return HostKeyDecision::AcceptOnce;
  if (box.clickedButton() == save) return HostKeyDecision::AcceptAndSave;
  return HostKeyDecision::RejectKey;
}

std::optional<std::string> GuiPrompts::askSecret(const SecretRequest& request) {
  QInputDialog dialog(dialogParent_);
  dialog.setObjectName(QStringLiteral("secretPrompt"));
  dialog.setInputMode(QInputDialog::TextInput);
  dialog.setWindowTitle(request.kind == SecretRequest::Kind::KeyPassphrase ? tr("Key passphrase")
                                                                           : tr("SSH login"));
  dialog.setLabelText(secretLabel(request));
  dialog.setTextEchoMode(request.echo ? QLineEdit::Normal : QLineEdit::Password);
  fitToScreen(&dialog);
  if (dialog.exec() != QDialog::Accepted) return std::nullopt;
  QString text = dialog.textValue();
  std::string secret = text.toStdString();
  // Best effort: the caller wipes `secret`; the widget's own copies are Qt's.
  text.fill(QChar(u'\0'));
  dialog.setTextValue(QString());
  return secret;
}

studio::remote::SshSession connectHost(const HostProfile& profile, GuiPrompts* prompts) {
  const studio::remote::SshOptions options = profile.sshOptions();
  if (prompts == nullptr)
    return studio::remote::SshSession::connect(options, studio::remote::reject_unknown_host_keys());
  return studio::remote::SshSession::connect(options, prompts->hostKeyPolicy(),
                                             prompts->secretPrompt());
}

}  // namespace studio::ui
