#pragma once
// Host key verification with OpenSSH's rules: a key in known_hosts is accepted silently; an
// unknown key is shown (type and SHA256 fingerprint) to a policy that may accept it for this
// connection or save it; a CHANGED key, or a key of another type than the ones recorded, is
// always refused with a loud message and never offered to the policy, because accepting it is
// exactly what a man-in-the-middle needs.
#include <functional>
#include <string>

#include <libssh/libssh.h>

namespace studio::remote {

struct HostKeyInfo {
  std::string host;  // the host name or address connected to (after ~/.ssh/config)
  int port = 22;
  std::string key_type;     // "ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa", ...
  std::string fingerprint;  // "SHA256:<base64>", as `ssh-keygen -l` prints it
};

enum class HostKeyDecision {
  RejectKey,      // do not connect
  AcceptOnce,     // connect this time; known_hosts is not touched
  AcceptAndSave,  // connect and append the key to the known_hosts file
};

// Asked only for unknown keys. Runs on the thread that connects, so a GUI policy must hand the
// question to the GUI thread and wait for the answer.
using HostKeyPolicy = std::function<HostKeyDecision(const HostKeyInfo&)>;

// The non-interactive policy: every unknown key is rejected, and the error tells the user how to
// trust the key (connect once with `ssh`, or the GUI's trust prompt).
HostKeyPolicy reject_unknown_host_keys();

// "SHA256:<base64 without padding>" of a public key; throws std::runtime_error when libssh
// cannot hash it.
std::string sha256_fingerprint(ssh_key key);

// Checks the server key of a connected (not yet authenticated) session against the session's
// known_hosts file. `where` names the host in messages. Returns normally when the key is known
// or the policy accepted it; throws RemoteError (HostKeyUnknown, HostKeyChanged,
// HostKeyOtherType) otherwise, or SshError when libssh fails.
void verify_host_key(ssh_session session, const std::string& where, const HostKeyPolicy& policy);

}  // namespace studio::remote
