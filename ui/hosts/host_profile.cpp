#include "studio/ui/hosts/host_profile.h"

#include <QSettings>

#include <algorithm>
#include <stdexcept>

#include "studio/remote/slurm_script.h"
#include "studio/remote/ssh_target.h"
#include "studio/ui/local_path.h"

namespace studio::ui {
namespace {

constexpr auto kArray = "hosts";

// Host names and addresses, never options or several words: they reach ssh and engine flags.
QString hostWordError(const QString& what, const QString& value) {
  if (value.startsWith(QLatin1Char('-')) || value.contains(QLatin1Char(' ')) ||
      value.contains(QLatin1Char('\t')) || value.contains(QLatin1Char('\n')))
    return QStringLiteral("%1 '%2' is not a host name or address (no spaces, not starting "
                          "with '-')")
        .arg(what, value);
  return {};
}

QString targetError(const QString& what, const QString& target) {
  std::string error;
  if (studio::remote::parse_ssh_target(target.toStdString(), error)) return {};
  return QStringLiteral("%1 '%2': %3").arg(what, target, QString::fromStdString(error));
}

}  // namespace

QString HostProfile::validate() const {
  if (name.trimmed().isEmpty()) return QStringLiteral("the host needs a name");
  if (name.trimmed() != name)
    return QStringLiteral("name '%1' starts or ends with spaces").arg(name);
  if (target.isEmpty())
    return QStringLiteral("host '%1' has no target: give [user@]host[:port] or a ~/.ssh/config "
                          "alias")
        .arg(name);
  if (QString e = targetError(QStringLiteral("target"), target); !e.isEmpty()) return e;
  if (engine.isEmpty() || engine.startsWith(QLatin1Char('-')))
    return QStringLiteral("engine '%1': give the studio-train path on the host, or a command "
                          "name in its PATH")
        .arg(engine);
  if (remoteRoot.trimmed().isEmpty())
    return QStringLiteral("remote root is empty: give a folder on the host (relative to the "
                          "login directory, or absolute)");
  if (useSlurm) {
    studio::remote::SbatchOptions slurm;
    slurm.partition = partition.toStdString();
    slurm.account = account.toStdString();
    slurm.time = timeLimit.toStdString();
    try {
      slurm.validate();
    } catch (const std::invalid_argument& e) {
      return QStringLiteral("Slurm: %1").arg(QString::fromStdString(e.what()));
    }
  }
  for (const QString& node : extraNodes) {
    if (QString e = targetError(QStringLiteral("extra node"), node); !e.isEmpty()) return e;
  }
  if (QString e = hostWordError(QStringLiteral("master address"), masterAddr); !e.isEmpty())
    return e;
  if (!extraNodes.isEmpty() && masterAddr.isEmpty())
    return QStringLiteral("with extra nodes, give the master address: rank 0's host name or "
                          "address as the other nodes reach it");
  return {};
}

studio::remote::RemoteHostRef HostProfile::hostRef() const {
  studio::remote::RemoteHostRef ref;
  ref.target = target.toStdString();
  ref.identity_file = localPath(identityFile);
  ref.known_hosts_file = localPath(knownHostsFile);
  ref.ssh_config_file = localPath(sshConfigFile);
  return ref;
}

studio::remote::SshOptions HostProfile::sshOptions() const {
  std::string error;
  const auto parsed = studio::remote::parse_ssh_target(target.toStdString(), error);
  if (!parsed)
    throw std::invalid_argument("host '" + name.toStdString() + "': target '" +
                                target.toStdString() + "': " + error);
  studio::remote::SshOptions options;
  options.target = *parsed;
  options.identity_file = localPath(identityFile);
  options.known_hosts_file = localPath(knownHostsFile);
  options.ssh_config_file = localPath(sshConfigFile);
  return options;
}

bool HostProfile::operator==(const HostProfile& o) const {
  return name == o.name && target == o.target && identityFile == o.identityFile &&
         knownHostsFile == o.knownHostsFile && sshConfigFile == o.sshConfigFile &&
         engine == o.engine && remoteRoot == o.remoteRoot && useSlurm == o.useSlurm &&
         partition == o.partition && account == o.account && timeLimit == o.timeLimit &&
         extraNodes == o.extraNodes && masterAddr == o.masterAddr;
}

HostStore::HostStore(QObject* parent) : QObject(parent) {
  QSettings settings;
  const int count = settings.beginReadArray(QLatin1String(kArray));
  for (int i = 0; i < count; ++i) {
    settings.setArrayIndex(i);
    HostProfile p;
    p.name = settings.value(QStringLiteral("name")).toString();
    p.target = settings.value(QStringLiteral("target")).toString();
    p.identityFile = settings.value(QStringLiteral("identityFile")).toString();
    p.knownHostsFile = settings.value(QStringLiteral("knownHostsFile")).toString();
    p.sshConfigFile = settings.value(QStringLiteral("sshConfigFile")).toString();
    p.engine = settings.value(QStringLiteral("engine"), p.engine).toString();
    p.remoteRoot = settings.value(QStringLiteral("remoteRoot"), p.remoteRoot).toString();
    p.useSlurm = settings.value(QStringLiteral("useSlurm"), false).toBool();
    p.partition = settings.value(QStringLiteral("partition")).toString();
    p.account = settings.value(QStringLiteral("account")).toString();
    p.timeLimit = settings.value(QStringLiteral("timeLimit")).toString();
    p.extraNodes = settings.value(QStringLiteral("extraNodes")).toStringList();
    p.masterAddr = settings.value(QStringLiteral("masterAddr")).toString();
    // A hand-edited entry that is not usable is dropped with a warning rather than offered.
    QString error = p.validate();
    if (error.isEmpty() && host(p.name) != nullptr)
      error = QStringLiteral("an earlier entry has the name '%1'").arg(p.name);
    if (error.isEmpty()) {
      hosts_.append(p);
    } else {
      qWarning("hosts/%d in %s skipped: %s", i + 1, qPrintable(settings.fileName()),
               qPrintable(error));
    }
  }
  settings.endArray();
}

const HostProfile* HostStore::host(const QString& name) const {
  for (const HostProfile& p : hosts_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

QString HostStore::save(const HostProfile& profile, const QString& previousName) {
  if (const QString error = profile.validate(); !error.isEmpty()) return error;
  const QString replaced = previousName.isEmpty() ? profile.name : previousName;
  if (profile.name != replaced && host(profile.name) != nullptr)
    return QStringLiteral("a host named '%1' exists already").arg(profile.name);
  auto it = std::find_if(hosts_.begin(), hosts_.end(),
                         [&](const HostProfile& p) { return p.name == replaced; });
  if (it != hosts_.end()) {
    if (*it == profile) return {};
    *it = profile;
  } else {
    hosts_.append(profile);
  }
  persist();
  emit hostsChanged();
  return {};
}

void HostStore::remove(const QString& name) {
  const auto removed = std::remove_if(hosts_.begin(), hosts_.end(),
                                      [&](const HostProfile& p) { return p.name == name; });
  if (removed == hosts_.end()) return;
  hosts_.erase(removed, hosts_.end());
  persist();
  emit hostsChanged();
}

void HostStore::persist() const {
  QSettings settings;
  settings.remove(QLatin1String(kArray));  // a shorter list must not keep the old tail
  settings.beginWriteArray(QLatin1String(kArray), static_cast<int>(hosts_.size()));
  for (int i = 0; i < hosts_.size(); ++i) {
    const HostProfile& p = hosts_[i];
    settings.setArrayIndex(i);
    settings.setValue(QStringLiteral("name"), p.name);
    settings.setValue(QStringLiteral("target"), p.target);
    settings.setValue(QStringLiteral("identityFile"), p.identityFile);
    settings.setValue(QStringLiteral("knownHostsFile"), p.knownHostsFile);
    settings.setValue(QStringLiteral("sshConfigFile"), p.sshConfigFile);
    settings.setValue(QStringLiteral("engine"), p.engine);
    settings.setValue(QStringLiteral("remoteRoot"), p.remoteRoot);
    settings.setValue(QStringLiteral("useSlurm"), p.useSlurm);
    settings.setValue(QStringLiteral("partition"), p.partition);
    settings.setValue(QStringLiteral("account"), p.account);
    settings.setValue(QStringLiteral("timeLimit"), p.timeLimit);
    settings.setValue(QStringLiteral("extraNodes"), p.extraNodes);
    settings.setValue(QStringLiteral("masterAddr"), p.masterAddr);
  }
  settings.endArray();
  settings.sync();
}

}  // namespace studio::ui
