#pragma once
// The GUI's answers to the questions an SSH connection asks while it is being made on a worker
// thread: "trust this unknown host key?" and "passphrase / password?". The remote layer calls
// the policy and the prompt on the connecting thread; GuiPrompts hands each question to the GUI
// thread (a blocking queued call) and the WORKER waits for the answer while the event loop keeps
// running and shows the dialog. A changed host key never reaches these questions: the remote
// layer refuses it before any policy is asked.
//
// Dialog object names, for tests and styling: the host key box is "hostKeyPrompt" with buttons
// "rejectKey", "acceptOnce" and "acceptAndSave"; the secret dialog is "secretPrompt".
#include <QObject>
#include <QPointer>
#include <QWidget>

#include <optional>
#include <string>

#include "studio/remote/host_key.h"
#include "studio/remote/ssh_auth.h"
#include "studio/remote/ssh_session.h"

namespace studio::ui {

struct HostProfile;

class GuiPrompts : public QObject {
  Q_OBJECT

 public:
  // Create on the GUI thread; the dialogs appear over `dialogParent` (or unparented).
  explicit GuiPrompts(QObject* parent = nullptr);

  void setDialogParent(QWidget* dialogParent) { dialogParent_ = dialogParent; }

  // For SshSession::connect on a worker thread. Each call blocks the worker until the user
  // answers; called on the GUI thread it asks directly. Once this object is gone they answer
  // "reject" / "cancel".
  studio::remote::HostKeyPolicy hostKeyPolicy();
  studio::remote::SecretPrompt secretPrompt();

  // The questions themselves; GUI thread only.
  studio::remote::HostKeyDecision askHostKey(const studio::remote::HostKeyInfo& info);
  std::optional<std::string> askSecret(const studio::remote::SecretRequest& request);

 private:
  QPointer<QWidget> dialogParent_;
};

// Connects to the profile's host with the GUI's prompts (or, without prompts, rejecting unknown
// host keys and skipping passphrases and passwords). Blocks until connected: call it on a worker
// thread. Throws what SshSession::connect throws, and std::invalid_argument for a target that
// does not parse.
studio::remote::SshSession connectHost(const HostProfile& profile, GuiPrompts* prompts);

}  // namespace studio::ui
