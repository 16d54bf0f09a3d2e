#pragma once
// Client authentication in OpenSSH's order: ssh-agent (when SSH_AUTH_SOCK is set), then the
// identity file (or, without one, the identities from ~/.ssh/config and the default ~/.ssh/id_*),
// then keyboard-interactive and password. Passphrases and passwords come from a SecretPrompt;
// they are never written anywhere and every copy this code makes is wiped after use.
#include <functional>
#include <optional>
#include <string>

#include <libssh/libssh.h>

namespace studio::remote {

struct SecretRequest {
  enum class Kind { KeyPassphrase, Password, KeyboardInteractive };
  Kind kind = Kind::Password;
  std::string subject;  // the key file for KeyPassphrase, "user@host:port" otherwise
  std::string prompt;   // text to show; for KeyboardInteractive the server's prompt
  bool echo = false;    // true when the server says the answer is not secret
  int attempt = 1;      // 1 for the first question about this subject, 2 after a wrong answer...
};

// Returns the secret, or nullopt when the user cancels. The caller wipes the returned string.
using SecretPrompt = std::function<std::optional<std::string>(const SecretRequest&)>;

// How many times a passphrase or password is asked for before giving up, as ssh does.
constexpr int kSecretAttempts = 3;

// Overwrites the characters of a secret (in a way the compiler cannot drop) and clears it.
void wipe_secret(std::string& secret);

// Authenticates a connected session whose host key has been verified. `identity_file` empty:
// use the identities libssh knows (config IdentityFile entries, then ~/.ssh/id_*). `prompt` may
// be empty: then encrypted keys, keyboard-interactive and passwords are skipped. Throws
// RemoteError(Kind::Auth) listing every method tried, why each failed, and the methods the
// server accepts; SshError when libssh itself fails.
void authenticate(ssh_session session, const std::string& where, const std::string& identity_file,
                  const SecretPrompt& prompt);

}  // namespace studio::remote
