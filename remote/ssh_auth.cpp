#include "studio/remote/ssh_auth.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <libssh/callbacks.h>
#include <strings.h>

#include "libssh_util.h"
#include "studio/remote/remote_error.h"
#include "studio/remote/ssh_check.h"

namespace studio::remote {
namespace {

using detail::Key;

// Wipes an answer from the prompt however the scope is left. The answer is used in place:
// moving it out would leave the characters behind in the short-string buffer.
class WipeOnExit {
 public:
  explicit WipeOnExit(std::string& secret) : secret_(secret) {}
  WipeOnExit(const WipeOnExit&) = delete;
  WipeOnExit& operator=(const WipeOnExit&) = delete;
  ~WipeOnExit() { wipe_secret(secret_); }

 private:
  std::string& secret_;
};

std::string accepted_methods(int methods) {
  std::vector<std::string> names;
  if (methods & SSH_AUTH_METHOD_PUBLICKEY) names.emplace_back("publickey");
  if (methods & SSH_AUTH_METHOD_INTERACTIVE) names.emplace_back("keyboard-interactive");
  if (methods & SSH_AUTH_METHOD_PASSWORD) names.emplace_back("password");
  if (methods & SSH_AUTH_METHOD_HOSTBASED) names.emplace_back("hostbased");
  if (methods & SSH_AUTH_METHOD_GSSAPI_MIC) names.emplace_back("gssapi-with-mic");
  std::string text;
  for (const auto& name : names) text += (text.empty() ? "" : ", ") + name;
  return text.empty() ? "none" : text;
}

// Collects "method: outcome" lines for the failure message.
class Attempts {
 public:
  void add(const std::string& method, const std::string& outcome) {
    text_ += "\n  - " + method + ": " + outcome;
  }
  const std::string& text() const { return text_; }
  bool empty() const { return text_.empty(); }

 private:
  std::string text_;
};

bool succeeded(ssh_session session, int rc) {
  STUDIO_SSH_CHECK(session, rc);
  return rc == SSH_AUTH_SUCCESS;
}

std::string auth_outcome(ssh_session session, int rc) {
  if (rc == SSH_AUTH_PARTIAL) return "accepted, but the server asks for a further method";
  const char* error = ssh_get_error(session);
  return std::string("refused by the server") +
         (error != nullptr && *error != '\0' ? std::string(" (") + error + ")" : std::string());
}

// Loads a private key, asking for its passphrase when it is encrypted. Returns null with
// `outcome` set when the key cannot be used.
Key load_private_key(const std::string& file, const SecretPrompt& prompt, std::string& outcome) {
  ssh_key raw = nullptr;
  int rc = ssh_pki_import_privkey_file(file.c_str(), nullptr, nullptr, nullptr, &raw);
  if (rc == SSH_OK) return Key(raw);
  if (rc == SSH_EOF) {
    outcome = "cannot read the key file (missing or no permission)";
    return nullptr;
  }
  // Without a passphrase libssh fails the same way for encrypted and for corrupt keys; only a
  // passphrase can tell them apart.
  if (!prompt) {
    outcome = "the key is encrypted (or not a valid key) and no passphrase prompt is available";
    return nullptr;
  }
  for (int attempt = 1; attempt <= kSecretAttempts; ++attempt) {
    SecretRequest request{SecretRequest::Kind::KeyPassphrase, file,
                          "Enter the passphrase for key " + file, false, attempt};
    std::optional<std::string> answer = prompt(request);
    if (!answer) {
      outcome = "passphrase entry cancelled";
      return nullptr;
    }
    WipeOnExit wipe(*answer);
    rc = ssh_pki_import_privkey_file(file.c_str(), answer->c_str(), nullptr, nullptr, &raw);
    if (rc == SSH_OK) return Key(raw);
  }
  outcome = "wrong passphrase (" + std::to_string(kSecretAttempts) +
            " attempts), or the file is not a valid private key";
  return nullptr;
}

bool try_identity_file(ssh_session session, const std::string& file, const SecretPrompt& prompt,
                       Attempts& attempts) {
  const std::string method = "publickey " + file;
  // Like ssh, offer the public half first so no passphrase is asked for a key the server
  // would refuse anyway.
  ssh_key raw_public = nullptr;
  if (ssh_pki_import_pubkey_file((file + ".pub").c_str(), &raw_public) == SSH_OK) {
    Key public_key(raw_public);
    int rc =
        STUDIO_SSH_CHECK(session, ssh_userauth_try_publickey(session, nullptr, public_key.get()));
    if (rc != SSH_AUTH_SUCCESS) {
      attempts.add(method, auth_outcome(session, rc));
      return false;
    }
  }
  std::string outcome;
  Key key = load_private_key(file, prompt, outcome);
  if (!key) {
    attempts.add(method, outcome);
    return false;
  }
  int rc = ssh_userauth_publickey(session, nullptr, key.get());
  if (succeeded(session, rc)) return true;
  attempts.add(method, auth_outcome(session, rc));
  return false;
}

struct PassphraseBridge {
  const SecretPrompt* prompt;
  int attempt = 0;
};

// libssh's callback for passphrases of the identities it loads itself (config and defaults).
int ask_passphrase(const char* text, char* buffer, size_t length, int echo, int, void* userdata) {
  auto* bridge = static_cast<PassphraseBridge*>(userdata);
  if (bridge->prompt == nullptr || !*bridge->prompt) return -1;
  SecretRequest request{SecretRequest::Kind::KeyPassphrase, "ssh identity", text ? text : "",
                        echo != 0, ++bridge->attempt};
  std::optional<std::string> answer = (*bridge->prompt)(request);
  if (!answer) return -1;
  WipeOnExit wipe(*answer);
  if (answer->size() + 1 > length) return -1;
  std::memcpy(buffer, answer->c_str(), answer->size() + 1);
  return 0;
}

bool try_default_identities(ssh_session session, const SecretPrompt& prompt, Attempts& attempts) {
  PassphraseBridge bridge{&prompt};
  ssh_callbacks_struct callbacks{};
  callbacks.userdata = &bridge;
  callbacks.auth_function = ask_passphrase;
  ssh_callbacks_init(&callbacks);
  STUDIO_SSH_CHECK(session, ssh_set_callbacks(session, &callbacks));
  int rc = ssh_userauth_publickey_auto(session, nullptr, nullptr);
  // The callbacks live on this stack frame: replace them before returning.
  static ssh_callbacks_struct no_callbacks = [] {
    ssh_callbacks_struct empty{};
    ssh_callbacks_init(&empty);
    return empty;
  }();
  ssh_set_callbacks(session, &no_callbacks);
  if (succeeded(session, rc)) return true;
  attempts.add(
      "publickey (~/.ssh/config IdentityFile and ~/.ssh/id_*)",
      rc == SSH_AUTH_DENIED ? "no key found there was accepted" : auth_outcome(session, rc));
  return false;
}

bool try_keyboard_interactive(ssh_session session, const std::string& where,
                              const SecretPrompt& prompt, Attempts& attempts) {
  int rc = ssh_userauth_kbdint(session, nullptr, nullptr);
  for (int round = 1; rc == SSH_AUTH_INFO; ++round) {
    const int count = ssh_userauth_kbdint_getnprompts(session);
    for (int i = 0; i < count; ++i) {
      char echo = 0;
      const char* text = ssh_userauth_kbdint_getprompt(session, static_cast<unsigned>(i), &echo);
      SecretRequest request{SecretRequest::Kind::KeyboardInteractive, where, text ? text : "",
                            echo != 0, round};
      std::optional<std::string> answer = prompt(request);
      if (!answer) {
        attempts.add("keyboard-interactive", "cancelled");
        return false;
      }
      WipeOnExit wipe(*answer);
      STUDIO_SSH_CHECK(session, ssh_userauth_kbdint_setanswer(session, static_cast<unsigned>(i),
                                                              answer->c_str()));
    }
    rc = ssh_userauth_kbdint(session, nullptr, nullptr);
  }
  if (succeeded(session, rc)) return true;
  attempts.add("keyboard-interactive", auth_outcome(session, rc));
  return false;
}

bool try_password(ssh_session session, const std::string& where, const SecretPrompt& prompt,
                  Attempts& attempts) {
  for (int attempt = 1; attempt <= kSecretAttempts; ++attempt) {
    SecretRequest request{SecretRequest::Kind::Password, where, "Password for " + where, false,
                          attempt};
    std::optional<std::string> answer = prompt(request);
    if (!answer) {
      attempts.add("password", "cancelled");
      return false;
    }
    WipeOnExit wipe(*answer);
    int rc = ssh_userauth_password(session, nullptr, answer->c_str());
    if (succeeded(session, rc)) return true;
  }
  attempts.add("password", "refused " + std::to_string(kSecretAttempts) + " times");
  return false;
}

}  // namespace

void wipe_secret(std::string& secret) {
  // explicit_bzero is not removed as a dead store, unlike memset on a string about to die.
  if (!secret.empty()) explicit_bzero(secret.data(), secret.size());
  secret.clear();
}

void authenticate(ssh_session session, const std::string& where, const std::string& identity_file,
                  const SecretPrompt& prompt) {
  // "none" both succeeds on servers that need no authentication and makes the server list the
  // methods it accepts.
  if (succeeded(session, ssh_userauth_none(session, nullptr))) return;
  const int methods = ssh_userauth_list(session, nullptr);
  Attempts attempts;

  if (methods & SSH_AUTH_METHOD_PUBLICKEY) {
    const char* agent = std::getenv("SSH_AUTH_SOCK");
    if (agent != nullptr && *agent != '\0') {
      int rc = ssh_userauth_agent(session, nullptr);
      if (succeeded(session, rc)) return;
      attempts.add("ssh-agent",
                   rc == SSH_AUTH_DENIED ? "no agent key was accepted" : auth_outcome(session, rc));
    }
    if (!identity_file.empty()) {
      if (try_identity_file(session, identity_file, prompt, attempts)) return;
    } else if (try_default_identities(session, prompt, attempts)) {
      return;
    }
  }
  if (prompt && (methods & SSH_AUTH_METHOD_INTERACTIVE) &&
      try_keyboard_interactive(session, where, prompt, attempts)) {
    return;
  }
  if (prompt && (methods & SSH_AUTH_METHOD_PASSWORD) &&
      try_password(session, where, prompt, attempts)) {
    return;
  }
  std::string message = "authentication to " + where + " failed.";
  message +=
      attempts.empty() ? std::string(" No method could be tried.") : " Tried:" + attempts.text();
  message += "\nThe server accepts: " + accepted_methods(methods) + ".";
  if (!prompt) message += " Passwords and key passphrases were not asked for (no prompt).";
  message +=
      " Check the user name, add the key to the server's authorized_keys, or load it "
      "into ssh-agent.";
  throw RemoteError(RemoteError::Kind::Auth, where, message);
}

}  // namespace studio::remote
