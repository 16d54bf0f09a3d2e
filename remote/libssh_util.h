#pragma once
// Private to studio_remote: small helpers over libssh shared by its source files.
#include <memory>
#include <string>
#include <type_traits>

#include <libssh/libssh.h>

namespace studio::remote::detail {

struct KeyFree {
  void operator()(ssh_key key) const { ssh_key_free(key); }
};
// An owned ssh_key.
using Key = std::unique_ptr<std::remove_pointer_t<ssh_key>, KeyFree>;

// Reads a string option back from a session (host, user, known_hosts file) after
// ~/.ssh/config and libssh's defaults were applied; empty when libssh has no value.
inline std::string ssh_option_text(ssh_session session, ssh_options_e option) {
  char* value = nullptr;
  if (ssh_options_get(session, option, &value) != SSH_OK || value == nullptr) return {};
  std::string text = value;
  ssh_string_free_char(value);
  return text;
}

}  // namespace studio::remote::detail
