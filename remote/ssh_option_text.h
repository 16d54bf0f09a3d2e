#pragma once
// Private to studio_remote: reading a string option back from a libssh session (host, user,
// known_hosts file) after ~/.ssh/config and libssh's defaults were applied.
#include <string>

#include <libssh/libssh.h>

namespace studio::remote::detail {

// The option's value, or an empty string when libssh has none.
inline std::string ssh_option_text(ssh_session session, ssh_options_e option) {
  char* value = nullptr;
  if (ssh_options_get(session, option, &value) != SSH_OK || value == nullptr) return {};
  std::string text = value;
  ssh_string_free_char(value);
  return text;
}

}  // namespace studio::remote::detail
