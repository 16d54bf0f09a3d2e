#include "studio/ui/wizard/launch_command.h"

#include <string>

#include <QStandardPaths>
#include <vector>

#include "studio/remote/shell_quote.h"
#include "studio/remote/ssh_target.h"

namespace studio::ui {

QString trainCommandLine(const QString& engine, const QString& configFile, const QString& workDir,
                         const LaunchTarget& target) {
  std::vector<std::string> argv{engine.toStdString(), "train", configFile.toStdString()};
  if (target.nproc > 1 || target.nnodes > 1) {
    argv.push_back("--nproc");
    argv.push_back(std::to_string(target.nproc));
  }
  // The per-node values differ on every node, so they stay shell variables, not quoted words.
  std::string perNode =
      target.nnodes > 1 ? " --nnodes " + std::to_string(target.nnodes) +
                              " --node-rank \"$NODE_RANK\" --master-addr \"$MASTER_ADDR\""
                              " --master-port \"$MASTER_PORT\""
                        : std::string();
  if (target.trainer == LaunchTarget::LlamaFactory) {
    // LLaMA-Factory's own way: torchrun through FORCE_TORCHRUN, sized by its variables.
    argv = {"env", "FORCE_TORCHRUN=1", "NPROC_PER_NODE=" + std::to_string(target.nproc)};
    if (target.nnodes > 1) argv.push_back("NNODES=" + std::to_string(target.nnodes));
    argv.insert(argv.end(), {target.llamafactoryCli.toStdString(), "train", configFile.toStdString()});
    // Several nodes: LLaMA-Factory reads NODE_RANK, MASTER_ADDR and MASTER_PORT from the
    // environment, exported on each node before the line.
    perNode.clear();
  }
  std::string error;
  const auto host = studio::remote::parse_ssh_target(target.sshTarget.toStdString(), error);
  if (target.kind == LaunchTarget::Local || !host) {
    return QString::fromStdString("cd " + studio::remote::shell_quote(workDir.toStdString()) +
                                  " && " + studio::remote::shell_join(argv) + perNode);
  }
  std::vector<std::string> ssh{"ssh"};
  if (host->port) {
    ssh.push_back("-p");
    ssh.push_back(std::to_string(*host->port));
  }
  ssh.push_back(host->user.empty() ? host->host : host->user + "@" + host->host);
  const std::string remote =
      studio::remote::shell_command_in_dir(workDir.toStdString(), argv) + perNode;
  return QString::fromStdString(studio::remote::shell_join(ssh) + " " +
                                studio::remote::shell_quote(remote));
}

}  // namespace studio::ui
