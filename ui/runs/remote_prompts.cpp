#include "studio/ui/runs/remote_prompts.h"

namespace studio::ui {

studio::remote::SshSession connectRemote(const studio::remote::RemoteHostRef& host,
                                         const RemotePrompts& prompts) {
  return studio::remote::SshSession::connect(
      host.ssh_options(),
      prompts.hostKey ? prompts.hostKey : studio::remote::reject_unknown_host_keys(),
      prompts.secret);
}

}  // namespace studio::ui
