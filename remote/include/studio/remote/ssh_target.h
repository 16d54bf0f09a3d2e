#pragma once
// The host argument of headless subcommands, in the forms people type for ssh:
//   host   host:port   user@host   user@host:port   [::1]   [::1]:2222   user@[fe80::1%eth0]
// each optionally after "ssh://". Paths, queries, passwords and percent-escapes are refused, and
// so is anything that starts with '-', so a target can never turn into an ssh option.
#include <optional>
#include <string>
#include <string_view>

namespace studio::remote {

struct SshTarget {
  std::string user;         // empty: the SSH default (config or local user name)
  std::string host;         // a host name, IPv4 address, or IPv6 address without brackets
  std::optional<int> port;  // 1..65535; empty: the SSH default

  // "[user@]host[:port]" with IPv6 hosts in brackets; parse_ssh_target() reads it back to an
  // equal target.
  std::string to_string() const;
};

bool operator==(const SshTarget& a, const SshTarget& b);
bool operator!=(const SshTarget& a, const SshTarget& b);

// The target, or nullopt with `error` set to a message that names the part that is wrong.
std::optional<SshTarget> parse_ssh_target(std::string_view text, std::string& error);

// True for a textual IPv6 address (RFC 4291), optionally with a "%zone" suffix.
bool is_ipv6_address(std::string_view text);

}  // namespace studio::remote
