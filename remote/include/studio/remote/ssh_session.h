#pragma once
// One authenticated SSH connection (RAII over libssh's ssh_session) and blocking command
// execution on it. Everything is synchronous with timeouts; the GUI calls it from worker
// threads. A session is used by one thread at a time (libssh sessions are not thread-safe).
#include <chrono>
#include <memory>
#include <string>

#include <libssh/libssh.h>

#include "studio/remote/host_key.h"
#include "studio/remote/remote_error.h"
#include "studio/remote/ssh_auth.h"
#include "studio/remote/ssh_check.h"
#include "studio/remote/ssh_target.h"

namespace studio::remote {

struct SshOptions {
  SshTarget target;              // host may be a ~/.ssh/config alias; set user/port win over it
  std::string identity_file;     // empty: config IdentityFile entries, then ~/.ssh/id_*
  std::string known_hosts_file;  // empty: ~/.ssh/known_hosts (or the config's UserKnownHostsFile)
  std::string ssh_config_file;   // empty: ~/.ssh/config; a missing file is skipped
  int connect_timeout_s = 10;    // TCP connect plus the SSH handshake
  int operation_timeout_s = 30;  // each later blocking call: auth replies, exec, SFTP requests
};

struct ExecResult {
  int exit_status = -1;  // -1 when the command died from a signal or sent no status
  std::string std_out;
  std::string std_err;
};

class SshSession {
 public:
  // Connects, verifies the host key and authenticates. Throws RemoteError (Connect, HostKey*,
  // Auth) or SshError; the message always names the host and port.
  static SshSession connect(const SshOptions& options, const HostKeyPolicy& host_key_policy,
                            const SecretPrompt& secret_prompt = {});

  SshSession(SshSession&&) noexcept;
  SshSession& operator=(SshSession&&) noexcept;
  SshSession(const SshSession&) = delete;
  SshSession& operator=(const SshSession&) = delete;
  ~SshSession();

  // Runs `command` through the remote login shell (a POSIX shell; build it with shell_quote.h)
  // and waits for it within the operation timeout, or `timeout`. A command still running then
  // gets SIGTERM, with every process it started, and RemoteError(Kind::Timeout) names the host
  // and the command.
  ExecResult exec(const std::string& command) const;
  ExecResult exec(const std::string& command, std::chrono::milliseconds timeout) const;

  // "user@host:port" after ~/.ssh/config was applied; used in every message.
  const std::string& where() const;
  int operation_timeout_s() const;
  ssh_session handle() const;

  // Runs f(); an SshError it throws is rethrown with where() in front of the libssh message, so
  // errors from any libssh call name the host.
  template <typename F>
  decltype(auto) named(F&& f) const {
    try {
      return f();
    } catch (const SshError& e) {
      throw SshError(e.statement(), e.location(), where() + ": " + e.ssh_message(), e.code());
    }
  }

 private:
  struct Impl;
  explicit SshSession(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace studio::remote
