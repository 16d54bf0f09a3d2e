#pragma once
// A real OpenSSH server for tests: /usr/sbin/sshd in the foreground on 127.0.0.1 at a free high
// port, with throwaway host and user keys in a temporary directory. It logs in as the current
// user (root included, as on CI) with public keys only.
#include <QProcess>
#include <QString>
#include <QTemporaryDir>

#include <string>

#include "studio/remote/ssh_session.h"

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
  // How a test client reaches this server: the current user at 127.0.0.1:port() with the key
  // `user_key`, host keys checked against `known_hosts`, no ssh config (`no_config` names a file
  // that does not exist), short timeouts.
  studio::remote::SshOptions client_options(const QString& user_key, const QString& known_hosts,
                                            const QString& no_config) const;
  QString path(const QString& name) const { return dir_.filePath(name); }
  static std::string user();            // the current user's login name
  QString log() const { return log_; }  // sshd's stderr so far, for failure messages

 private:
  QTemporaryDir dir_;
  QProcess process_;
  int port_ = 0;
  QString log_;
};
