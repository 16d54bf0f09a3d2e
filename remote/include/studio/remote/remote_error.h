#pragma once
// The error for failures of the remote layer that are not a single failed libssh call: an
// unreachable host, a host key that is unknown or has changed, refused authentication, a remote
// command that hung, a transfer that cannot complete. The message is complete on its own (it
// names the host and says what to do); kind() lets callers react without parsing it, e.g. the
// GUI offers "trust this key" only for HostKeyUnknown. Failed libssh calls throw SshError.
#include <stdexcept>
#include <string>

namespace studio::remote {

class RemoteError : public std::runtime_error {
 public:
  enum class Kind {
    Connect,           // TCP connect or SSH handshake failed or timed out
    HostKeyUnknown,    // the host key is not in known_hosts and the policy did not accept it
    HostKeyChanged,    // known_hosts holds a different key of the same type: possible attack
    HostKeyOtherType,  // known_hosts holds only keys of other types for this host
    Auth,              // every authentication method failed or was cancelled
    Timeout,           // a remote command did not finish within its time limit
    Transfer,          // an SFTP transfer or remote file operation failed
  };

  RemoteError(Kind kind, std::string host, const std::string& message)
      : std::runtime_error(message), kind_(kind), host_(std::move(host)) {}

  Kind kind() const noexcept { return kind_; }
  // "user@host:port" as the session resolved it (after ~/.ssh/config).
  const std::string& host() const noexcept { return host_; }

 private:
  Kind kind_;
  std::string host_;
};

}  // namespace studio::remote
