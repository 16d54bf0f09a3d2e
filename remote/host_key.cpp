#include "studio/remote/host_key.h"

#include <fstream>
#include <memory>
#include <stdexcept>

#include "libssh_util.h"
#include "studio/remote/remote_error.h"
#include "studio/remote/ssh_check.h"

namespace studio::remote {
namespace {

using detail::Key;

struct EntryFree {
  void operator()(ssh_knownhosts_entry* entry) const { ssh_knownhosts_entry_free(entry); }
};
using Entry = std::unique_ptr<ssh_knownhosts_entry, EntryFree>;

// The host as known_hosts names it: "host", or "[host]:port" off port 22.
std::string known_hosts_name(const HostKeyInfo& info) {
  return info.port == 22 ? info.host : "[" + info.host + "]:" + std::to_string(info.port);
}

// The known_hosts line that records a key of `type` for the host, as "file:line" plus its key.
// libssh reports a changed key without the entry, so the file is read again here; the libssh
// parser matches hashed host names and returns SSH_OK only for lines naming this host.
struct RecordedKey {
  std::string location;
  std::string fingerprint;
};

RecordedKey find_recorded_key(const std::string& file, const HostKeyInfo& server,
                              ssh_keytypes_e type) {
  const std::string host = known_hosts_name(server);
  std::ifstream in(file);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    ssh_knownhosts_entry* raw = nullptr;
    const int rc = ssh_known_hosts_parse_line(host.c_str(), line.c_str(), &raw);
    Entry entry(raw);
    if (rc == SSH_OK && entry && entry->publickey && ssh_key_type(entry->publickey) == type) {
      return {file + ":" + std::to_string(number), sha256_fingerprint(entry->publickey)};
    }
  }
  return {file, {}};
}

HostKeyInfo describe_server_key(ssh_session session, ssh_key key) {
  HostKeyInfo info;
  info.host = detail::ssh_option_text(session, SSH_OPTIONS_HOST);
  unsigned int port = 22;
  ssh_options_get_port(session, &port);
  info.port = static_cast<int>(port);
  info.key_type = ssh_key_type_to_char(ssh_key_type(key));
  info.fingerprint = sha256_fingerprint(key);
  return info;
}

// The host as ssh writes it in known_hosts and on its command line.
std::string ssh_host_argument(const HostKeyInfo& info) {
  return info.port == 22 ? info.host : "-p " + std::to_string(info.port) + " " + info.host;
}

}  // namespace

HostKeyPolicy reject_unknown_host_keys() {
  return [](const HostKeyInfo&) { return HostKeyDecision::RejectKey; };
}

std::string sha256_fingerprint(ssh_key key) {
  unsigned char* hash = nullptr;
  size_t length = 0;
  if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &length) != SSH_OK) {
    throw std::runtime_error("libssh could not compute the SHA256 fingerprint of a host key");
  }
  // libssh prints "SHA256:" plus unpadded base64, the same text as ssh-keygen -l.
  char* text = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, length);
  ssh_clean_pubkey_hash(&hash);
  if (text == nullptr) {
    throw std::runtime_error("libssh could not format the SHA256 fingerprint of a host key");
  }
  std::string fingerprint = text;
  ssh_string_free_char(text);
  return fingerprint;
}

void verify_host_key(ssh_session session, const std::string& where, const HostKeyPolicy& policy) {
  ssh_key raw_key = nullptr;
  STUDIO_SSH_CHECK(session, ssh_get_server_publickey(session, &raw_key));
  Key key(raw_key);
  const HostKeyInfo info = describe_server_key(session, key.get());
  const std::string file = detail::ssh_option_text(session, SSH_OPTIONS_KNOWNHOSTS);
  const std::string offered = info.key_type + " key " + info.fingerprint;

  switch (ssh_session_is_known_server(session)) {
    case SSH_KNOWN_HOSTS_OK:
      return;
    case SSH_KNOWN_HOSTS_CHANGED: {
      const RecordedKey recorded = find_recorded_key(file, info, ssh_key_type(key.get()));
      std::string message = "@@@ WARNING: THE HOST KEY OF " + where +
                            " HAS CHANGED @@@ Someone could be intercepting the connection "
                            "(man-in-the-middle), or the host was reinstalled. The server now "
                            "offers the " +
                            offered + "; " + recorded.location + " records " +
                            (recorded.fingerprint.empty() ? std::string("a different key")
                                                          : "the key " + recorded.fingerprint);
      message +=
          ". Connection refused. If the change is expected, verify the new fingerprint "
          "with the host's administrator, then remove the old line (ssh-keygen -R '" +
          known_hosts_name(info) + "' -f " + file + ") and connect again.";
      throw RemoteError(RemoteError::Kind::HostKeyChanged, where, message);
    }
    case SSH_KNOWN_HOSTS_OTHER:
      throw RemoteError(
          RemoteError::Kind::HostKeyOtherType, where,
          "WARNING: " + where + " offered the " + offered + ", but " + file +
              " records only keys of other types for this host. This can mean an attack that "
              "hides the known key. Connection refused. Check the fingerprint with the host's "
              "administrator; if it is right, add the key with `ssh " +
              ssh_host_argument(info) + "` after confirming it there.");
    case SSH_KNOWN_HOSTS_UNKNOWN:
    case SSH_KNOWN_HOSTS_NOT_FOUND:
      break;
    case SSH_KNOWN_HOSTS_ERROR:
    default:
      throw RemoteError(RemoteError::Kind::HostKeyUnknown, where,
                        "cannot check the host key of " + where + " against " + file + ": " +
                            ssh_get_error(session));
  }

  const HostKeyDecision decision = policy ? policy(info) : HostKeyDecision::RejectKey;
  if (decision == HostKeyDecision::RejectKey) {
    throw RemoteError(RemoteError::Kind::HostKeyUnknown, where,
                      "the host key of " + where + " is not known (" + offered +
                          "). Connection refused. If the fingerprint is right, trust it by "
                          "connecting once with `ssh " +
                          ssh_host_argument(info) +
                          "` and answering yes, or accept it in SeqStudio's host key prompt.");
  }
  if (decision == HostKeyDecision::AcceptAndSave) {
    if (ssh_session_update_known_hosts(session) != SSH_OK) {
      throw RemoteError(
          RemoteError::Kind::HostKeyUnknown, where,
          "cannot save the host key of " + where + " to " + file + ": " + ssh_get_error(session));
    }
  }
}

}  // namespace studio::remote
