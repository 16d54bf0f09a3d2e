#include "studio/remote/ssh_session.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <utility>

#include "libssh_util.h"

namespace studio::remote {
namespace {

using Clock = std::chrono::steady_clock;

std::string home_directory() {
  const char* home = std::getenv("HOME");
  if (home != nullptr && *home != '\0') return home;
  const passwd* entry = getpwuid(getuid());
  return entry != nullptr && entry->pw_dir != nullptr ? entry->pw_dir : "";
}

// "user@host:port" once libssh has applied config and defaults.
std::string describe_target(ssh_session session) {
  SshTarget target;
  target.user = detail::ssh_option_text(session, SSH_OPTIONS_USER);
  target.host = detail::ssh_option_text(session, SSH_OPTIONS_HOST);
  unsigned int port = 22;
  if (ssh_options_get_port(session, &port) == SSH_OK) target.port = static_cast<int>(port);
  return target.to_string();
}

void set_timeout(ssh_session session, int seconds) {
  long value = seconds;
  STUDIO_SSH_CHECK(session, ssh_options_set(session, SSH_OPTIONS_TIMEOUT, &value));
}

// The host goes first so the config's Host blocks match it (HostName then replaces an alias);
// user and port go after the config because libssh 0.10's parser overwrites them, and explicit
// choices must win as they do with ssh's command line.
void apply_options(ssh_session session, const SshOptions& options) {
  bool process_config = false;  // parse exactly the file chosen below, once
  STUDIO_SSH_CHECK(session, ssh_options_set(session, SSH_OPTIONS_PROCESS_CONFIG, &process_config));
  int verbosity = SSH_LOG_NOLOG;
  STUDIO_SSH_CHECK(session, ssh_options_set(session, SSH_OPTIONS_LOG_VERBOSITY, &verbosity));
  STUDIO_SSH_CHECK(session,
                   ssh_options_set(session, SSH_OPTIONS_HOST, options.target.host.c_str()));
  const std::string config =
      options.ssh_config_file.empty() ? home_directory() + "/.ssh/config" : options.ssh_config_file;
  if (std::ifstream(config).good()) {
    STUDIO_SSH_CHECK(session, ssh_options_parse_config(session, config.c_str()));
  }
  if (!options.target.user.empty()) {
    STUDIO_SSH_CHECK(session,
                     ssh_options_set(session, SSH_OPTIONS_USER, options.target.user.c_str()));
  }
  if (options.target.port) {
    int port = *options.target.port;
    STUDIO_SSH_CHECK(session, ssh_options_set(session, SSH_OPTIONS_PORT, &port));
  }
  if (!options.known_hosts_file.empty()) {
    STUDIO_SSH_CHECK(session, ssh_options_set(session, SSH_OPTIONS_KNOWNHOSTS,
                                              options.known_hosts_file.c_str()));
  }
  set_timeout(session, options.connect_timeout_s);
}

// Starts each exec's stderr, followed by the remote shell's PID and a newline.
constexpr const char* kPidMarker = "studio-remote-pid:";

// Runs `command` on a new channel, collecting output into `result`; false on timeout.
bool run_channel(ssh_session s, const std::string& command, std::chrono::milliseconds timeout,
                 ExecResult& result) {
  struct ChannelFree {
    void operator()(ssh_channel c) const {
      if (ssh_channel_is_open(c)) ssh_channel_close(c);
      ssh_channel_free(c);
    }
  };
  std::unique_ptr<std::remove_pointer_t<ssh_channel>, ChannelFree> channel(
      STUDIO_SSH_CHECK_PTR(s, ssh_channel_new(s)));
  ssh_channel c = channel.get();
  STUDIO_SSH_CHECK(s, ssh_channel_open_session(c));
  STUDIO_SSH_CHECK(s, ssh_channel_request_exec(c, command.c_str()));

  const auto deadline = Clock::now() + timeout;
  char buffer[32768];
  // Short waits on stdout with stderr drained in between, so a command writing only to stderr
  // cannot fill the channel window and stall.
  for (;;) {
    int out =
        STUDIO_SSH_CHECK_NONBLOCKING(s, ssh_channel_read_timeout(c, buffer, sizeof buffer, 0, 50));
    if (out > 0) result.std_out.append(buffer, static_cast<size_t>(out));
    int err =
        STUDIO_SSH_CHECK_NONBLOCKING(s, ssh_channel_read_nonblocking(c, buffer, sizeof buffer, 1));
    if (err > 0) result.std_err.append(buffer, static_cast<size_t>(err));
    if (out <= 0 && err <= 0 && ssh_channel_is_eof(c)) break;
    if (Clock::now() > deadline) return false;
  }
  result.exit_status = ssh_channel_get_exit_status(c);
  return true;
}

// Removes the kPidMarker line from `std_err`; returns the PID, or empty when there is none.
std::string take_pid_line(std::string& std_err) {
  // Login scripts may print to stderr before the command line runs, so the marker is looked
  // for at the start of any line.
  std::size_t start =
      std_err.rfind(kPidMarker, 0) == 0 ? 0 : std_err.find("\n" + std::string(kPidMarker));
  if (start == std::string::npos) return {};
  if (start != 0) ++start;
  const std::size_t end = std_err.find('\n', start);
  const std::size_t digits = start + std::strlen(kPidMarker);
  std::string pid = std_err.substr(digits, end == std::string::npos ? end : end - digits);
  std_err.erase(start, end == std::string::npos ? end : end + 1 - start);
  if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) return {};
  return pid;
}

// Sends SIGTERM to the remote process group led by `pid`; does nothing for an empty pid.
void stop_process_group(ssh_session session, const std::string& pid) {
  if (pid.empty()) return;
  ExecResult ignored;
  // Best effort: the timeout error is what the caller needs; this only avoids leaving the
  // command running.
  try {
    run_channel(session, "kill -TERM -- -" + pid + " 2>/dev/null || kill -TERM " + pid,
                std::chrono::seconds(5), ignored);
  } catch (const SshError&) {
  }
}

}  // namespace

struct SshSession::Impl {
  ssh_session session = nullptr;
  std::string where;
  int operation_timeout_s = 30;

  ~Impl() {
    if (session == nullptr) return;
    if (ssh_is_connected(session)) ssh_disconnect(session);
    ssh_free(session);
  }
};

SshSession::SshSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SshSession::SshSession(SshSession&&) noexcept = default;
SshSession& SshSession::operator=(SshSession&&) noexcept = default;
SshSession::~SshSession() = default;

const std::string& SshSession::where() const {
  return impl_->where;
}
int SshSession::operation_timeout_s() const {
  return impl_->operation_timeout_s;
}
ssh_session SshSession::handle() const {
  return impl_->session;
}

SshSession SshSession::connect(const SshOptions& options, const HostKeyPolicy& host_key_policy,
                               const SecretPrompt& secret_prompt) {
  auto impl = std::make_unique<Impl>();
  impl->operation_timeout_s = options.operation_timeout_s;
  impl->where = options.target.to_string();
  impl->session = ssh_new();
  if (impl->session == nullptr) {
    throw RemoteError(RemoteError::Kind::Connect, impl->where,
                      "cannot create an SSH session for " + impl->where + " (out of memory)");
  }
  SshSession result(std::move(impl));
  ssh_session s = result.handle();
  result.named([&] { apply_options(s, options); });
  result.impl_->where = describe_target(s);

  if (ssh_connect(s) != SSH_OK) {
    throw RemoteError(RemoteError::Kind::Connect, result.where(),
                      "cannot connect to " + result.where() + " within " +
                          std::to_string(options.connect_timeout_s) + " s: " + ssh_get_error(s) +
                          ". Check the host name, the port and that sshd runs there.");
  }
  // libssh fills in the user name at connect time when neither the target nor config set it.
  result.impl_->where = describe_target(s);
  result.named([&] {
    verify_host_key(s, result.where(), host_key_policy);
    authenticate(s, result.where(), options.identity_file, secret_prompt);
    set_timeout(s, options.operation_timeout_s);
  });
  return result;
}

ExecResult SshSession::exec(const std::string& command) const {
  return exec(command, std::chrono::seconds(impl_->operation_timeout_s));
}

ExecResult SshSession::exec(const std::string& command, std::chrono::milliseconds timeout) const {
  return named([&] {
    ssh_session s = impl_->session;
    // The remote shell first reports its PID on stderr (the line is removed again). sshd makes
    // that shell a process group leader, so a hung command and all its children can be stopped
    // by group; sshd's own "signal" request is refused for root logins and old servers.
    const std::string reporting =
        "printf '" + std::string(kPidMarker) + "%s\\n' \"$$\" >&2; " + command;
    ExecResult result;
    const bool finished = run_channel(s, reporting, timeout, result);
    const std::string pid = take_pid_line(result.std_err);
    if (!finished) {
      stop_process_group(s, pid);
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
      throw RemoteError(RemoteError::Kind::Timeout, where(),
                        "the command on " + where() + " did not finish within " +
                            std::to_string(ms) + " ms and was stopped (SIGTERM): " + command);
    }
    return result;
  });
}

}  // namespace studio::remote
