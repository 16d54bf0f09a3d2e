#pragma once
// Where a run is started: this machine, or an SSH host ([ssh://]user@host[:port], normalised by
// remote::SshTarget::to_string, or a saved host from the Hosts page), with the processes per
// node and the node count. For an SSH host it also carries how to reach it and how to run there
// (a saved host's settings), which is what the studio's remote submit needs.
#include <QMetaType>
#include <QString>
#include <QStringList>

namespace studio::ui {

struct LaunchTarget {
  enum Kind { Local, Ssh } kind = Local;
  QString sshTarget;  // "[user@]host[:port]" (or a ~/.ssh/config alias) for Ssh
  int nproc = 1;      // processes (GPUs) per node
  int nnodes = 1;

  // Ssh only. A saved host fills these from its profile; a typed host uses the defaults.
  QString hostName;                                 // the saved host's name; "" for a typed host
  QString identityFile;                             // "": ssh-agent, ~/.ssh/config, ~/.ssh/id_*
  QString knownHostsFile;                           // "": ~/.ssh/known_hosts
  QString sshConfigFile;                            // "": ~/.ssh/config
  QString engine = QStringLiteral("studio-train");  // studio-train on the host: path or PATH name
  QString remoteRoot;     // where run folders go on the host; "": the remote default
  bool useSlurm = false;  // submit with sbatch
  QString partition;      // Slurm; "": the cluster's default
  QString account;
  QString timeLimit;
  QStringList extraNodes;    // several nodes without Slurm: SSH targets of nodes 1..n-1
  QString masterAddr;        // several nodes: rank 0's address as the other nodes reach it
  bool uploadModel = false;  // upload the local model folder(s) with the data

  // Who trains: studio-train, or LLaMA-Factory's `llamafactory-cli train` run under
  // `studio-train supervise` (FORCE_TORCHRUN; status, stop and reattach as studio-train's runs).
  enum Trainer { StudioTrain, LlamaFactory } trainer = StudioTrain;
  QString llamafactoryCli = QStringLiteral("llamafactory-cli");  // path, or a name in PATH
};

// llamafactory-cli as the studio finds it on this machine: STUDIO_LLAMAFACTORY_CLI when set, else
// the one in PATH, else the bare name (the launch then says it is missing).
QString defaultLlamaFactoryCli();

}  // namespace studio::ui
