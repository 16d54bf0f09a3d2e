#include "sshd_server.h"

#include "loopback_port.h"

#include <QDir>
#include <QFile>
#include <QList>
#include <QMap>
#include <QTcpSocket>
#include <QThread>

#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

namespace {

QString run(const QString& program, const QStringList& args) {
  QProcess p;
  p.start(program, args);
  if (!p.waitForFinished(20000) || p.exitCode() != 0) return {};
  return QString::fromUtf8(p.readAllStandardOutput());
}

}  // namespace

SshdServer::SshdServer() = default;

SshdServer::~SshdServer() {
  stop();
}

std::string SshdServer::user() {
  const passwd* entry = getpwuid(geteuid());
  return entry != nullptr ? entry->pw_name : "";
}

QString SshdServer::make_key(const QString& name, const QString& type, const QString& passphrase) {
  const QString file = path(name);
  QFile::remove(file);
  QFile::remove(file + ".pub");
  run("ssh-keygen", {"-q", "-t", type, "-N", passphrase, "-C", name, "-f", file});
  return QFile::exists(file) ? file : QString();
}

bool SshdServer::authorize(const QString& key_path) {
  QFile pub(key_path + ".pub");
  QFile keys(path("authorized_keys"));
  if (!pub.open(QIODevice::ReadOnly) || !keys.open(QIODevice::Append)) return false;
  return keys.write(pub.readAll()) > 0;
}

QString SshdServer::fingerprint(const QString& key_path) {
  // "256 SHA256:xxxx comment (ED25519)"
  return run("ssh-keygen", {"-l", "-E", "sha256", "-f", key_path}).section(' ', 1, 1);
}

namespace {

// Every process whose parent chain leads to `root`, read from /proc.
QList<qint64> descendants(qint64 root) {
  QMap<qint64, QList<qint64>> children;
  for (const QString& entry : QDir("/proc").entryList(QDir::Dirs | QDir::NoDotAndDotDot)) {
    bool numeric = false;
    const qint64 pid = entry.toLongLong(&numeric);
    if (!numeric) continue;
    QFile stat("/proc/" + entry + "/stat");
    if (!stat.open(QIODevice::ReadOnly)) continue;
    const QByteArray text = stat.readAll();
    const int close = text.lastIndexOf(')');  // the command name may hold spaces and ')'
    const QList<QByteArray> fields = text.mid(close + 2).split(' ');
    if (fields.size() > 1) children[fields[1].toLongLong()].append(pid);
  }
  QList<qint64> out;
  QList<qint64> todo{root};
  while (!todo.isEmpty()) {
    for (const qint64 child : children.value(todo.takeFirst())) {
      out.append(child);
      todo.append(child);
    }
  }
  return out;
}

}  // namespace

QString SshdServer::start(const QString& host_key, const QString& extra_config) {
  stop();
  if (!dir_.isValid()) return "no temporary directory";
  // sshd started as root insists on its privilege separation directory.
  if (geteuid() == 0 && !QDir("/run/sshd").exists() && !QDir().mkpath("/run/sshd")) {
    return "cannot create /run/sshd";
  }
  QFile keys(path("authorized_keys"));
  if (!keys.open(QIODevice::Append)) return "cannot create authorized_keys";
  keys.close();
  // A restart keeps the port, so known_hosts entries ("[127.0.0.1]:port") still apply.
  for (int tries = 0; tries < 5; ++tries) {
    if (port_ == 0 || tries > 0) port_ = studio::test::free_loopback_port();
    QFile config(path("sshd_config"));
    if (!config.open(QIODevice::WriteOnly | QIODevice::Truncate)) return "cannot write sshd_config";
    // extra_config precedes the password default: sshd keeps the first value read per keyword.
    config.write(QString("Port %1\n"
                         "ListenAddress 127.0.0.1\n"
                         "HostKey %2\n"
                         "AuthorizedKeysFile %3\n"
                         "PidFile %4\n"
                         "StrictModes no\n"
                         "UsePAM no\n"
                         "PermitRootLogin yes\n"
                         "PubkeyAuthentication yes\n"
                         "KbdInteractiveAuthentication no\n"
                         "Subsystem sftp internal-sftp\n"
                         "LogLevel ERROR\n"
                         "%5\n"
                         "PasswordAuthentication no\n")
                     .arg(port_)
                     .arg(path(host_key), path("authorized_keys"), path("sshd.pid"), extra_config)
                     .toUtf8());
    config.close();
    process_.setProcessChannelMode(QProcess::MergedChannels);
    end_with_test(process_);
    process_.start("/usr/sbin/sshd", {"-D", "-e", "-f", path("sshd_config")});
    if (!process_.waitForStarted(5000)) return "cannot start /usr/sbin/sshd";
    for (int wait = 0; wait < 100 && process_.state() == QProcess::Running; ++wait) {
      QTcpSocket socket;
      socket.connectToHost(QHostAddress::LocalHost, static_cast<quint16>(port_));
      if (socket.waitForConnected(200)) return {};
      QThread::msleep(50);
    }
    process_.waitForFinished(1000);
    log_ += QString::fromUtf8(process_.readAll());
    // The port may have been taken between the probe and sshd's bind: try another.
  }
  return "sshd did not start: " + log_;
}

void end_with_test(QProcess& p) {
  p.setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGTERM); });
}

void SshdServer::stop() {
  if (process_.state() == QProcess::NotRunning) return;
  // Stopping the listener alone leaves every open connection served by its own sshd child: kill
  // those too, so a stop cuts live sessions the way a network drop or a reboot of sshd does.
  // Detached programs started through a session have left this tree (setsid + reparenting).
  for (const qint64 pid : descendants(process_.processId())) ::kill(static_cast<pid_t>(pid), SIGKILL);
  process_.terminate();
  if (!process_.waitForFinished(5000)) {
    process_.kill();
    process_.waitForFinished(2000);
  }
  log_ += QString::fromUtf8(process_.readAll());
}

namespace {

const QString kHostKey = QStringLiteral("host_ed25519");

}  // namespace

QString SshdFixture::set_up(const QString& client_dir, const QString& extra_config) {
  client_dir_ = client_dir;
  extra_config_ = extra_config;
  qunsetenv("SSH_AUTH_SOCK");
  host_key_ = make_key(kHostKey, "ed25519");
  user_key_ = make_key("user_ed25519", "ed25519");
  if (host_key_.isEmpty() || user_key_.isEmpty()) return "ssh-keygen could not make the keys";
  if (!authorize(user_key_)) return "cannot authorize " + user_key_;
  if (const QString error = start(kHostKey, extra_config); !error.isEmpty()) return error;
  // What `ssh` writes after a "yes": "[host]:port type base64", the key's comment left out.
  QFile pub(host_key_ + ".pub");
  QFile known(client_file("known_hosts"));
  if (!pub.open(QIODevice::ReadOnly) || !known.open(QIODevice::WriteOnly | QIODevice::Truncate)) {
    return "cannot write " + known.fileName();
  }
  const QByteArray line = "[127.0.0.1]:" + QByteArray::number(port()) + " " +
                          pub.readAll().split(' ').mid(0, 2).join(' ') + "\n";
  if (known.write(line) != line.size()) return "cannot write " + known.fileName();
  return {};
}

QString SshdFixture::restart(const QString& extra_config) {
  return start(kHostKey, extra_config);
}

std::string SshdFixture::target() const {
  return user() + "@127.0.0.1:" + std::to_string(port());
}

studio::remote::RemoteHostRef SshdFixture::host_ref() const {
  studio::remote::RemoteHostRef host;
  host.target = target();
  host.identity_file = user_key_.toStdString();
  host.known_hosts_file = client_file("known_hosts").toStdString();
  host.ssh_config_file = client_file("no_config").toStdString();
  return host;
}

QStringList SshdFixture::cli_connection(const QString& remote_root) const {
  const studio::remote::RemoteHostRef host = host_ref();
  return {"--host", QString::fromStdString(host.target), "--identity", user_key_,
          "--known-hosts", QString::fromStdString(host.known_hosts_file), "--ssh-config",
          QString::fromStdString(host.ssh_config_file), "--remote-root", remote_root, "--batch"};
}

studio::remote::SshOptions SshdFixture::options(const QString& known_hosts) const {
  studio::remote::RemoteHostRef host = host_ref();
  host.known_hosts_file = client_file(known_hosts).toStdString();
  studio::remote::SshOptions o = studio::remote::ssh_options(host);
  o.connect_timeout_s = 5;
  o.operation_timeout_s = 10;
  return o;
}

studio::remote::SshSession SshdFixture::connect() const {
  return studio::remote::SshSession::connect(options(), studio::remote::reject_unknown_host_keys());
}
