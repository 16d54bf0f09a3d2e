#pragma once
// A real OpenSSH server for tests: /usr/sbin/sshd in the foreground on 127.0.0.1 at a free high
// port, with throwaway host and user keys in a temporary directory. It logs in as the current
// user (root included, as on CI) with public keys only.
#include <QProcess>
#include <QString>
#include <QStringList>
#include <QTemporaryDir>

#include <string>

#include "studio/remote/remote_run.h"
#include "studio/remote/ssh_session.h"

// Makes `p`, once started, end (SIGTERM) when this test process dies, killed or not
// (PR_SET_PDEATHSIG), so no server or daemon a test starts outlives it.
void end_with_test(QProcess& p);

class SshdServer {
 public:
  SshdServer();
  ~SshdServer();

  // Starts (or restarts, on the same port) sshd with the host key `host_key` (a name from
  // make_key) and waits until it accepts connections. `extra_config` lines are added to the
  // sshd_config. Returns an empty string or the reason it could not start.
  QString start(const QString& host_key, const QString& extra_config = {});
  // Stops sshd and cuts every open connection (as a dropped network would).
  void stop();

  // Generates an OpenSSH key pair in the temp dir; the passphrase empty for an unencrypted key.
  // Returns the private key path or an empty string.
  QString make_key(const QString& name, const QString& type, const QString& passphrase = {});
  // Lets `key_path` (a private key from make_key) log in.
  bool authorize(const QString& key_path);
  // "SHA256:..." of a key file, as `ssh-keygen -l -E sha256` prints it.
  static QString fingerprint(const QString& key_path);

  int port() const { return port_; }
  QString path(const QString& name) const { return dir_.filePath(name); }
  static std::string user();            // the current user's login name
  QString log() const { return log_; }  // sshd's stderr so far, for failure messages

 private:
  QTemporaryDir dir_;
  QProcess process_;
  int port_ = 0;
  QString log_;
};

// The set-up of every test that logs in, in one place. set_up() puts the developer's agent out of
// the way (SSH_AUTH_SOCK unset: only the test's keys may log in), makes an ed25519 host key and an
// authorized ed25519 user key, starts sshd, and writes the client's known_hosts trusting it in a
// folder of the test's, beside where its ssh config would be (a file that does not exist). A
// test's own cases go through SshdServer: start() with another host key or sshd_config lines,
// make_key() and authorize() for other users' keys, stop().
class SshdFixture : public SshdServer {
 public:
  // `extra_config` as for start(). Returns an empty string or why it could not.
  QString set_up(const QString& client_dir, const QString& extra_config = {});
  // Starts sshd again on the same port with set_up()'s host key and sshd_config lines, or with
  // `extra_config` instead of those lines: after stop(), or after a start() with another key.
  QString restart() { return restart(extra_config_); }
  QString restart(const QString& extra_config);

  QString host_key() const { return host_key_; }  // the private key; its ".pub" beside it
  QString user_key() const { return user_key_; }
  // "user@127.0.0.1:port", as a host profile or a run record names this server.
  std::string target() const;
  // How a test client logs in: the current user at 127.0.0.1:port() with the user key, host keys
  // checked against the file `known_hosts` in the client folder, no ssh config, short timeouts.
  studio::remote::SshOptions options(const QString& known_hosts = "known_hosts") const;
  // This server as the host of a run: the user key, the trusting known_hosts, no ssh config.
  studio::remote::RemoteHostRef host_ref() const;
  // The same host on `studio`'s command line (submit, attach, cancel, runs), runs under
  // `remote_root`, never asking (--batch).
  QStringList cli_connection(const QString& remote_root) const;
  // A session with options(), refusing any host key the known_hosts file does not hold.
  studio::remote::SshSession connect() const;

 private:
  QString client_file(const QString& name) const { return client_dir_ + '/' + name; }

  QString client_dir_;
  QString extra_config_;
  QString host_key_;
  QString user_key_;
};
