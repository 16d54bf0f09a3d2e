#pragma once
// File transfer over an SshSession with SFTP: atomic uploads that skip unchanged files, and
// reads from a byte offset for tailing files that grow (events.jsonl of a remote run).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <libssh/sftp.h>

#include "studio/remote/ssh_session.h"

namespace studio::remote {

struct RemoteStat {
  std::uint64_t size = 0;
  bool is_directory = false;
  std::uint32_t permissions = 0;  // mode bits, e.g. 0644
  std::int64_t mtime = 0;         // seconds since the epoch
};

struct UploadResult {
  bool skipped = false;     // the remote file already had the same size and SHA-256
  std::uint64_t bytes = 0;  // bytes sent (0 when skipped)
  std::string sha256;       // hex digest of the local file
};

// Called after each chunk written: (bytes sent so far, total bytes). Not called when skipped.
using UploadProgress = std::function<void(std::uint64_t sent, std::uint64_t total)>;

class SftpClient {
 public:
  // Opens the SFTP subsystem on `session`, which must outlive the client. Throws SshError.
  explicit SftpClient(const SshSession& session);
  SftpClient(SftpClient&&) noexcept;
  SftpClient& operator=(SftpClient&&) noexcept;
  SftpClient(const SftpClient&) = delete;
  SftpClient& operator=(const SftpClient&) = delete;
  ~SftpClient();

  // Follows symlinks; nullopt when the path does not exist.
  std::optional<RemoteStat> stat(const std::string& remote_path) const;

  // Creates the directory and its missing parents; existing directories are fine, an existing
  // non-directory is a RemoteError(Kind::Transfer).
  void mkdir_p(const std::string& remote_path, int mode = 0700) const;

  // Copies `local_path` to `remote_path` (its directory must exist) by writing a temporary file
  // beside it and renaming it over the target, so readers never see a half-written file. When
  // the remote file has the same size and SHA-256 (`sha256sum` run over exec) nothing is sent.
  // The remote file gets the local file's permission bits.
  UploadResult upload(const std::string& local_path, const std::string& remote_path,
                      const UploadProgress& progress = {}) const;

  // Up to `max_bytes` bytes starting at `offset`; fewer at the end of the file, none past it.
  // A tail reader keeps offset += result.size() as its cursor.
  std::string read_from(const std::string& remote_path, std::uint64_t offset,
                        std::size_t max_bytes) const;

 private:
  const SshSession* session_;
  sftp_session sftp_;
};

}  // namespace studio::remote
