#pragma once
// Following a remote run: events.jsonl and train.log are read by byte cursor over SFTP (only
// complete lines of events.jsonl are taken; a partly written last line waits for its newline),
// the run's state is queried every few polls, and a dropped connection is retried with
// exponential backoff while the run goes on. The cursor belongs to the caller: the studio keeps
// it as the size of its local mirror files, `studio attach` in memory; reading again from the
// cursor after any interruption loses and repeats nothing.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "studio/remote/remote_run.h"
#include "studio/remote/sftp_client.h"

namespace studio::remote {

// The bytes of `remote_path` from `offset` up to and including the last '\n' available (at most
// about max_bytes, always whole lines unless one line alone is longer). "" when nothing new or
// the file does not exist yet.
std::string read_complete_lines(const SftpClient& sftp, const std::string& remote_path,
                                std::uint64_t offset, std::size_t max_bytes = 4 << 20);

struct FollowCursor {
  std::uint64_t events = 0;  // bytes of events.jsonl already delivered
  std::uint64_t log = 0;     // bytes of train.log already delivered
};

struct FollowOptions {
  std::chrono::milliseconds poll_interval{1000};
  int status_every_polls = 3;                  // query_status every N polls (and at the start)
  std::chrono::milliseconds backoff_initial{1000};
  std::chrono::milliseconds backoff_max{30000};
  bool follow_log = true;
};

struct FollowCallbacks {
  // Complete lines appended to events.jsonl since cursor.events (already advanced past them).
  std::function<void(const std::string& bytes)> on_events;
  // Bytes appended to train.log since cursor.log.
  std::function<void(const std::string& bytes)> on_log;
  // After each state query.
  std::function<void(const RemoteRunStatus& status)> on_status;
  // The connection is up (first time and after each reconnect).
  std::function<void()> on_connected;
  // The connection failed or dropped; the next try is in `retry_in` (attempt counts from 1).
  std::function<void(const std::string& error, int attempt, std::chrono::milliseconds retry_in)>
      on_disconnected;
};

// Opens a fresh session (each reconnect calls it again).
using SessionFactory = std::function<SshSession()>;

// Follows until the run is in a terminal state and every byte written before it ended has been
// delivered; returns that last status. Returns nullopt as soon as `stop` becomes true. Connection
// failures (RemoteError Connect/Timeout/Transfer, SshError) are retried with backoff forever;
// host key and authentication failures are not (retrying cannot fix them): they are rethrown.
std::optional<RemoteRunStatus> follow_run(const SessionFactory& connect,
                                          const RemoteRunRecord& record, FollowCursor& cursor,
                                          const FollowCallbacks& callbacks,
                                          const FollowOptions& options,
                                          const std::atomic<bool>& stop);

}  // namespace studio::remote
