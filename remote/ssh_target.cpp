#include "studio/remote/ssh_target.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace studio::remote {
namespace {

constexpr std::string_view kScheme = "ssh://";
constexpr size_t kMaxHostLength = 253;  // the DNS limit for a full name

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_alnum(char c) {
  return is_digit(c) || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}
bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// Messages quote user input, which may hold control bytes that would garble a terminal.
std::string printable(std::string_view text) {
  std::string out;
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", u);
      out += buf;
    }
  }
  return out;
}

std::string quoted(std::string_view text) {
  return "'" + printable(text) + "'";
}

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (;;) {
    size_t end = text.find(sep, start);
    if (end == std::string_view::npos) break;
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  parts.push_back(text.substr(start));
  return parts;
}

bool is_hex_group(std::string_view g) {
  if (g.empty() || g.size() > 4) return false;
  for (char c : g) {
    if (!is_hex(c)) return false;
  }
  return true;
}

// Dotted-quad IPv4 without leading zeros, which some parsers read as octal.
bool is_ipv4_dotted(std::string_view text) {
  auto parts = split(text, '.');
  if (parts.size() != 4) return false;
  for (std::string_view p : parts) {
    if (p.empty() || p.size() > 3 || (p.size() > 1 && p[0] == '0')) return false;
    int value = 0;
    for (char c : p) {
      if (!is_digit(c)) return false;
      value = value * 10 + (c - '0');
    }
    if (value > 255) return false;
  }
  return true;
}

// The number of 16-bit groups on one side of "::", or -1 when a group is malformed. A trailing
// dotted IPv4 part counts as two groups.
int count_groups(std::string_view side, bool ipv4_tail_allowed) {
  if (side.empty()) return 0;
  auto parts = split(side, ':');
  int count = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    bool last = i + 1 == parts.size();
    if (last && ipv4_tail_allowed && parts[i].find('.') != std::string_view::npos) {
      if (!is_ipv4_dotted(parts[i])) return -1;
      count += 2;
    } else if (is_hex_group(parts[i])) {
      count += 1;
    } else {
      return -1;
    }
  }
  return count;
}

bool is_zone_id(std::string_view zone) {
  if (zone.empty()) return false;
  for (char c : zone) {
    if (!is_alnum(c) && c != '.' && c != '-' && c != '_') return false;
  }
  return true;
}

std::string check_bytes(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    auto u = static_cast<unsigned char>(text[i]);
    bool space = u == ' ' || (u >= '\t' && u <= '\r');
    if (space || u < 0x20 || u == 0x7f) {
      return "SSH target " + quoted(text) + " contains " +
             (space ? "whitespace" : "a control character") + " at offset " + std::to_string(i);
    }
  }
  return {};
}

bool starts_with_scheme(std::string_view text) {
  if (text.size() < kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    char c = text[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != kScheme[i]) return false;
  }
  return true;
}

// Strips "ssh://" and refuses what a URI may carry but a target cannot.
std::string strip_scheme(std::string_view& text) {
  if (!starts_with_scheme(text)) {
    auto sep = text.find("://");
    if (sep == std::string_view::npos) return {};
    return "unsupported scheme " + quoted(text.substr(0, sep + 3)) + ": only ssh:// is accepted";
  }
  text.remove_prefix(kScheme.size());
  auto extra = text.find_first_of("/?#");
  if (extra == std::string_view::npos) return {};
  return "a path, query or fragment after the host (" + quoted(text.substr(extra)) +
         ") is not supported in an SSH target";
}

std::string check_user(std::string_view user) {
  if (user.empty()) return "empty user name before '@'";
  if (user.front() == '-') return "user name " + quoted(user) + " must not start with '-'";
  if (user.find(':') != std::string_view::npos) {
    return "user " + quoted(user.substr(0, user.find(':'))) +
           " is followed by ':': passwords in the target are not supported";
  }
  auto bad = user.find_first_of("/[]");
  if (bad != std::string_view::npos) {
    return "user name " + quoted(user) + " contains '" + user[bad] + "'";
  }
  return {};
}

std::string check_host_name(std::string_view host) {
  if (host.front() == '-') return "host " + quoted(host) + " must not start with '-'";
  if (host.size() > kMaxHostLength) return "host name is longer than 253 characters";
  for (char c : host) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      return "host " + quoted(host) + " contains a non-ASCII byte; use the xn-- (punycode) form";
    }
    if (!is_alnum(c) && c != '.' && c != '-' && c != '_') {
      return "host " + quoted(host) + " contains '" + c +
             "'; a host name may hold letters, digits, '.', '-' and '_'";
    }
  }
  // A single trailing dot marks a fully qualified name; any other empty label is a typo.
  std::string_view labels = host.back() == '.' ? host.substr(0, host.size() - 1) : host;
  for (std::string_view label : split(labels, '.')) {
    if (label.empty()) return "host " + quoted(host) + " has an empty label between dots";
  }
  return {};
}

std::string parse_port(std::string_view text, std::optional<int>& port) {
  if (text.empty()) return "empty port after ':'";
  long value = 0;
  for (char c : text) {
    if (!is_digit(c)) return "port " + quoted(text) + " is not a number";
    // Saturating keeps a 30-digit port from overflowing before the range check.
    value = std::min(value * 10 + (c - '0'), 100000L);
  }
  if (value < 1 || value > 65535) return "port " + quoted(text) + " is out of range 1-65535";
  port = static_cast<int>(value);
  return {};
}

std::string parse_bracketed(std::string_view text, SshTarget& target) {
  auto close = text.find(']');
  if (close == std::string_view::npos) return "missing ']' after IPv6 address " + quoted(text);
  std::string_view address = text.substr(1, close - 1);
  if (address.empty()) return "empty IPv6 address in '[]'";
  if (!is_ipv6_address(address)) return quoted(address) + " is not a valid IPv6 address";
  target.host = std::string(address);
  std::string_view rest = text.substr(close + 1);
  if (rest.empty()) return {};
  if (rest.front() != ':') {
    return "unexpected " + quoted(rest) + " after ']': expected ':PORT' or the end";
  }
  return parse_port(rest.substr(1), target.port);
}

std::string parse_host_port(std::string_view text, SshTarget& target) {
  if (text.empty()) {
    return target.user.empty() ? "empty host" : "empty host after '" + target.user + "@'";
  }
  if (text.front() == '[') return parse_bracketed(text, target);
  auto colon = text.find(':');
  if (colon != std::string_view::npos && text.find(':', colon + 1) != std::string_view::npos) {
    return quoted(text) + " looks like an IPv6 address: put it in brackets, e.g. [::1]:22";
  }
  std::string_view host = text.substr(0, colon);
  if (host.empty()) return "empty host before ':'";
  if (auto err = check_host_name(host); !err.empty()) return err;
  target.host = std::string(host);
  if (colon == std::string_view::npos) return {};
  return parse_port(text.substr(colon + 1), target.port);
}

std::string parse_target(std::string_view text, SshTarget& target) {
  if (text.empty()) return "empty SSH target";
  if (auto err = check_bytes(text); !err.empty()) return err;
  if (auto err = strip_scheme(text); !err.empty()) return err;
  // The last '@' splits, as in OpenSSH, so user names holding '@' (a@corp.example@host) work.
  auto at = text.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view user = text.substr(0, at);
    if (auto err = check_user(user); !err.empty()) return err;
    target.user = std::string(user);
    text.remove_prefix(at + 1);
  }
  return parse_host_port(text, target);
}

}  // namespace

std::string SshTarget::to_string() const {
  std::string out;
  if (!user.empty()) out += user + "@";
  out += host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port) out += ":" + std::to_string(*port);
  return out;
}

bool operator==(const SshTarget& a, const SshTarget& b) {
  return a.user == b.user && a.host == b.host && a.port == b.port;
}

bool operator!=(const SshTarget& a, const SshTarget& b) {
  return !(a == b);
}

std::optional<SshTarget> parse_ssh_target(std::string_view text, std::string& error) {
  SshTarget target;
  error = parse_target(text, target);
  if (!error.empty()) return std::nullopt;
  return target;
}

bool is_ipv6_address(std::string_view text) {
  auto percent = text.find('%');
  if (percent != std::string_view::npos) {
    if (!is_zone_id(text.substr(percent + 1))) return false;
    text = text.substr(0, percent);
  }
  auto gap = text.find("::");
  if (gap == std::string_view::npos) return count_groups(text, true) == 8;
  std::string_view head = text.substr(0, gap);
  std::string_view tail = text.substr(gap + 2);
  if (tail.find("::") != std::string_view::npos) return false;
  int head_groups = count_groups(head, false);
  int tail_groups = count_groups(tail, true);
  // "::" stands for at least one zero group.
  return head_groups >= 0 && tail_groups >= 0 && head_groups + tail_groups <= 7;
}

}  // namespace studio::remote
