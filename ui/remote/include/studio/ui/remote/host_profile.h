#pragma once
// The remote hosts the studio knows (the Hosts page), persisted in QSettings under "hosts/".
// A profile holds how to reach a host and how to run there; no secret is ever stored: passphrases
// and passwords are asked for when needed (gui_prompts.h).
#include <QObject>
#include <QString>
#include <QStringList>
#include <QVector>

#include "studio/remote/remote_run.h"

namespace studio::ui {

struct HostProfile {
  QString name;            // unique display name, e.g. "gpu-box" (the key in the store)
  QString target;          // "[ssh://][user@]host[:port]" or a ~/.ssh/config alias
  QString identityFile;    // "": ssh-agent, ~/.ssh/config, ~/.ssh/id_*
  QString knownHostsFile;  // "": ~/.ssh/known_hosts
  QString sshConfigFile;   // "": ~/.ssh/config
  QString engine = QStringLiteral("studio-train");                        // remote path/PATH name
  QString remoteRoot = QString::fromLatin1(studio::remote::kDefaultRemoteRoot);
  bool useSlurm = false;   // submit with sbatch
  QString partition;       // Slurm defaults for the wizard
  QString account;
  QString timeLimit;
  QStringList extraNodes;  // multi-node without Slurm: the other nodes' SSH targets
  QString masterAddr;      // multi-node: rank 0's address as the other nodes reach it

  // "" when usable, else what is wrong (empty name, target that does not parse, bad time...).
  QString validate() const;
  studio::remote::RemoteHostRef hostRef() const;
  // What SshSession::connect needs (default timeouts). Throws std::invalid_argument naming the
  // host when the target does not parse.
  studio::remote::SshOptions sshOptions() const;

  bool operator==(const HostProfile& other) const;
  bool operator!=(const HostProfile& other) const { return !(*this == other); }
};

class HostStore : public QObject {
  Q_OBJECT

 public:
  explicit HostStore(QObject* parent = nullptr);  // loads from QSettings

  QVector<HostProfile> hosts() const { return hosts_; }
  // nullptr when no host has that name.
  const HostProfile* host(const QString& name) const;
  // Adds or replaces (by name; `previousName` renames). Returns "" or the validation error.
  QString save(const HostProfile& profile, const QString& previousName = {});
  void remove(const QString& name);

 signals:
  void hostsChanged();

 private:
  void persist() const;
  QVector<HostProfile> hosts_;
};

}  // namespace studio::ui
