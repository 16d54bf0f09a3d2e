#pragma once
// Where a run is started: this machine, or an SSH host ([ssh://]user@host[:port], normalised by
// remote::SshTarget::to_string), with the processes per node and the node count.
#include <QMetaType>
#include <QString>

namespace studio::ui {

struct LaunchTarget {
  enum Kind { Local, Ssh } kind = Local;
  QString sshTarget;  // "[user@]host[:port]" for Ssh
  int nproc = 1;      // processes (GPUs) per node
  int nnodes = 1;
};

}  // namespace studio::ui
