#include "studio/ui/remote/host_profile.h"

#include <QSettings>

#include <algorithm>
#include <iterator>
#include <stdexcept>

#include "studio/remote/slurm_script.h"
#include "studio/remote/ssh_target.h"
#include "studio/ui/base/local_path.h"

namespace studio::ui {
namespace {

constexpr auto kArray = "hosts";

// The profile's text fields with their settings keys: the one list that reading, writing and
// comparing go through, so a new field cannot be forgotten in one of them.
struct TextField {
  const char* key;
  QString HostProfile::*member;
};
constexpr TextField kTextFields[] = {
    {"name", &HostProfile::name},
    {"target", &HostProfile::target},
    {"identityFile", &HostProfile::identityFile},
    {"knownHostsFile", &HostProfile::knownHostsFile},
    {"sshConfigFile", &HostProfile::sshConfigFile},
    {"engine", &HostProfile::engine},
    {"remoteRoot", &HostProfile::remoteRoot},
    {"partition", &HostProfile::partition},
    {"account", &HostProfile::account},
    {"timeLimit", &HostProfile::timeLimit},
    {"masterAddr", &HostProfile::masterAddr},
};
constexpr auto kUseSlurm = "useSlurm";
constexpr auto kExtraNodes = "extraNodes";

// Host names and addresses, never options or several words: they reach ssh and engine flags.
QString hostWordError(const QString& what, const QString& value) {
  if (value.startsWith(QLatin1Char('-')) || value.contains(QLatin1Char(' ')) ||
      value.contains(QLatin1Char('\t')) || value.contains(QLatin1Char('\n')))
    return QStringLiteral(
               "%1 '%2' is not a host name or address (no spaces, not starting "
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
    return QStringLiteral(
               "host '%1' has no target: give [user@]host[:port] or a ~/.ssh/config "
               "alias")
        .arg(name);
  if (QString e = targetError(QStringLiteral("target"), target); !e.isEmpty()) return e;
  if (engine.isEmpty() || engine.startsWith(QLatin1Char('-')))
    return QStringLiteral(
               "engine '%1': give the studio-train path on the host, or a command "
               "name in its PATH")
        .arg(engine);
  if (remoteRoot.trimmed().isEmpty())
    return QStringLiteral(
        "remote root is empty: give a folder on the host (relative to the "
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
    return QStringLiteral(
        "with extra nodes, give the master address: rank 0's host name or "
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
  return useSlurm == o.useSlurm && extraNodes == o.extraNodes &&
         std::all_of(std::begin(kTextFields), std::end(kTextFields),
                     [&](const TextField& f) { return this->*f.member == o.*f.member; });
}

HostStore::HostStore(QObject* parent) : QObject(parent) {
  QSettings settings;
  const int count = settings.beginReadArray(QLatin1String(kArray));
  for (int i = 0; i < count; ++i) {
    settings.setArrayIndex(i);
    HostProfile p;  // a missing key keeps the default
    for (const TextField& f : kTextFields)
      p.*f.member = settings.value(QLatin1String(f.key), p.*f.member).toString();
    p.useSlurm = settings.value(QLatin1String(kUseSlurm), p.useSlurm).toBool();
    p.extraNodes = settings.value(QLatin1String(kExtraNodes)).toStringList();
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
    for (const TextField& f : kTextFields) settings.setValue(QLatin1String(f.key), p.*f.member);
    settings.setValue(QLatin1String(kUseSlurm), p.useSlurm);
    settings.setValue(QLatin1String(kExtraNodes), p.extraNodes);
  }
  settings.endArray();
  settings.sync();
}

}  // namespace studio::ui
