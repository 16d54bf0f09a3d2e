#include "studio/ui/remote/remote_prompts.h"

namespace studio::ui {

studio::remote::SshSession connectRemote(const studio::remote::RemoteHostRef& host,
                                         const RemotePrompts& prompts) {
  return studio::remote::SshSession::connect(
      studio::remote::ssh_options(host),
      prompts.hostKey ? prompts.hostKey : studio::remote::reject_unknown_host_keys(),
      prompts.secret);
}

studio::remote::NodeConnector nodeConnector(const RemotePrompts& prompts) {
  return
      [prompts](const studio::remote::RemoteHostRef& node) { return connectRemote(node, prompts); };
}

}  // namespace studio::ui
