#include "studio/remote/run_follow.h"

#include <algorithm>
#include <thread>

namespace studio::remote {
namespace {

// Sleeps up to `total`, waking early when `stop` becomes true; returns !stop.
bool sleep_unless_stopped(std::chrono::milliseconds total, const std::atomic<bool>& stop) {
  const auto deadline = std::chrono::steady_clock::now() + total;
  while (!stop.load()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return true;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        deadline - now, std::chrono::milliseconds(50)));
  }
  return false;
}

// Failures that a new connection cannot fix: asking again would only repeat them (and, for a
// changed host key, keep knocking on what may be an attacker's door).
bool is_permanent(const RemoteError& e) {
  switch (e.kind()) {
    case RemoteError::Kind::HostKeyUnknown:
    case RemoteError::Kind::HostKeyChanged:
    case RemoteError::Kind::HostKeyOtherType:
    case RemoteError::Kind::Auth:
      return true;
    default:
      return false;
  }
}

// Delivers everything new in the two files; true when anything was.
bool pull(const SftpClient& sftp, const RemoteRunRecord& record, FollowCursor& cursor,
          const FollowCallbacks& callbacks, const FollowOptions& options,
          const std::atomic<bool>& stop) {
  bool any = false;
  for (;;) {
    std::string bytes = read_complete_lines(sftp, record.events_path(), cursor.events);
    if (bytes.empty() || stop.load()) break;
    cursor.events += bytes.size();
    any = true;
    if (callbacks.on_events) callbacks.on_events(bytes);
  }
  if (options.follow_log) {
    for (;;) {
      const auto st = sftp.stat(record.log_path());
      if (!st || st->size <= cursor.log) break;
      std::string bytes = sftp.read_from(record.log_path(), cursor.log, 1 << 20);
      if (bytes.empty() || stop.load()) break;
      cursor.log += bytes.size();
      any = true;
      if (callbacks.on_log) callbacks.on_log(bytes);
    }
  }
  return any;
}

}  // namespace

std::string read_complete_lines(const SftpClient& sftp, const std::string& remote_path,
                                std::uint64_t offset, std::size_t max_bytes) {
  const auto st = sftp.stat(remote_path);
  if (!st || st->size <= offset) return {};
  std::string bytes = sftp.read_from(remote_path, offset, max_bytes);
  std::size_t end = bytes.rfind('\n');
  // One line longer than max_bytes: read on until its newline (or the end of what is there).
  while (end == std::string::npos && bytes.size() >= max_bytes) {
    std::string more = sftp.read_from(remote_path, offset + bytes.size(), max_bytes);
    if (more.empty()) break;
    const std::size_t nl = more.find('\n');
    if (nl != std::string::npos) {
      end = bytes.size() + nl;
      bytes += more;
      break;
    }
    bytes += more;
  }
  if (end == std::string::npos) return {};
  bytes.resize(end + 1);
  return bytes;
}

std::optional<RemoteRunStatus> follow_run(const SessionFactory& connect,
                                          const RemoteRunRecord& record, FollowCursor& cursor,
                                          const FollowCallbacks& callbacks,
                                          const FollowOptions& options,
                                          const std::atomic<bool>& stop) {
  auto backoff = options.backoff_initial;
  int attempt = 0;
  const int status_every = std::max(1, options.status_every_polls);
  while (!stop.load()) {
    std::string error;
    try {
      SshSession session = connect();
      SftpClient sftp(session);
      attempt = 0;
      backoff = options.backoff_initial;
      if (callbacks.on_connected) callbacks.on_connected();
      for (int poll = 0; !stop.load(); ++poll) {
        std::optional<RemoteRunStatus> status;
        if (poll % status_every == 0) {
          status = query_status(session, record);
          if (callbacks.on_status) callbacks.on_status(*status);
        }
        // Read after the state query: when it says the run is over, no process writes any more,
        // so what is read now is all there will ever be.
        pull(sftp, record, cursor, callbacks, options, stop);
        if (stop.load()) return std::nullopt;
        if (status && is_terminal(status->state)) return status;
        if (!sleep_unless_stopped(options.poll_interval, stop)) return std::nullopt;
      }
      return std::nullopt;
    } catch (const RemoteError& e) {
      if (is_permanent(e)) throw;
      error = e.what();
    } catch (const SshError& e) {
      error = e.what();
    } catch (const std::runtime_error& e) {
      // Unreadable remote output (a login banner, a dying shell): a new connection may fix it.
      error = e.what();
    }
    if (stop.load()) break;
    ++attempt;
    if (callbacks.on_disconnected) callbacks.on_disconnected(error, attempt, backoff);
    if (!sleep_unless_stopped(backoff, stop)) break;
    backoff = std::min(backoff * 2, options.backoff_max);
  }
  return std::nullopt;
}

}  // namespace studio::remote
