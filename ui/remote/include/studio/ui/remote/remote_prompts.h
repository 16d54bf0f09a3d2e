#pragma once
// How the studio opens SSH sessions to run hosts from its worker threads. The questions SSH may
// need answered (an unknown host key, a passphrase or password) come from callables the shell
// supplies (the Hosts page's GUI prompts, which hand the question to the GUI thread and wait for
// the answer), so the runs library does not depend on any dialog.
#include "studio/remote/host_key.h"
#include "studio/remote/remote_run.h"
#include "studio/remote/ssh_auth.h"
#include "studio/remote/ssh_session.h"

namespace studio::ui {

struct RemotePrompts {
  studio::remote::HostKeyPolicy hostKey;  // empty: unknown host keys are refused
  studio::remote::SecretPrompt secret;    // empty: no passphrase or password is asked for
};

// Connects to `host` with the prompts. Throws what SshSession::connect throws, and
// std::invalid_argument for a target that does not parse. Call it on a worker thread.
studio::remote::SshSession connectRemote(const studio::remote::RemoteHostRef& host,
                                         const RemotePrompts& prompts);
// connectRemote for the other nodes of a multi-node run (submit_run, cancel_run).
studio::remote::NodeConnector nodeConnector(const RemotePrompts& prompts);

}  // namespace studio::ui
