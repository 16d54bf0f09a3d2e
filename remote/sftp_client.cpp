#include "studio/remote/sftp_client.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <utility>
#include <vector>

#include "studio/remote/shell_quote.h"
#include "remote_text.h"

namespace studio::remote {
namespace {

constexpr std::size_t kChunk = 64 * 1024;

struct AttributesFree {
  void operator()(sftp_attributes a) const { sftp_attributes_free(a); }
};
using Attributes = std::unique_ptr<sftp_attributes_struct, AttributesFree>;

struct FileClose {
  void operator()(sftp_file f) const { sftp_close(f); }
};
using File = std::unique_ptr<sftp_file_struct, FileClose>;

std::string local_sha256(const std::string& path, const std::string& where) {
  std::ifstream in(path, std::ios::binary);
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!in || !ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    throw RemoteError(
        RemoteError::Kind::Transfer, where,
        "cannot read " + path + " to upload it to " + where + ": " + std::strerror(errno));
  }
  std::vector<char> buffer(kChunk);
  while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) {
    EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<size_t>(in.gcount()));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &length);
  return detail::hex_digest(digest, length);
}

// `sha256sum` prints "<64 hex> <name>", with a leading backslash when the name needed escaping.
std::string remote_sha256(const SshSession& session, const std::string& path) {
  ExecResult r = session.exec("sha256sum -- " + shell_quote(path));
  std::string_view out = r.std_out;
  if (!out.empty() && out.front() == '\\') out.remove_prefix(1);
  if (r.exit_status != 0 || out.size() < 64) return {};
  return std::string(out.substr(0, 64));
}

std::string parent_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return {};
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string temp_name_beside(const std::string& path) {
  std::random_device random;
  const std::string parent = parent_of(path);
  const std::string name = path.substr(path.find_last_of('/') + 1);
  return (parent.empty()  ? ""
          : parent == "/" ? "/"
                          : parent + "/") +
         "." + name + ".upload-" + std::to_string(random());
}

}  // namespace

SftpClient::SftpClient(const SshSession& session) : session_(&session), sftp_(nullptr) {
  session.named([&] {
    ssh_session s = session.handle();
    sftp_ = STUDIO_SSH_CHECK_PTR(s, sftp_new(s));
    if (sftp_init(sftp_) != SSH_OK) {
      const int code = sftp_get_error(sftp_);
      sftp_free(sftp_);
      sftp_ = nullptr;
      throw RemoteError(RemoteError::Kind::Transfer, session.where(),
                        "cannot start SFTP on " + session.where() + " (SFTP error " +
                            std::to_string(code) + ": " + ssh_get_error(s) +
                            "). Check that the server enables the sftp subsystem.");
    }
  });
}

SftpClient::SftpClient(SftpClient&& other) noexcept
    : session_(other.session_), sftp_(std::exchange(other.sftp_, nullptr)) {}

SftpClient& SftpClient::operator=(SftpClient&& other) noexcept {
  if (this != &other) {
    if (sftp_ != nullptr) sftp_free(sftp_);
    session_ = other.session_;
    sftp_ = std::exchange(other.sftp_, nullptr);
  }
  return *this;
}

SftpClient::~SftpClient() {
  if (sftp_ != nullptr) sftp_free(sftp_);
}

std::optional<RemoteStat> SftpClient::stat(const std::string& remote_path) const {
  Attributes attributes(sftp_stat(sftp_, remote_path.c_str()));
  if (!attributes) {
    const int code = sftp_get_error(sftp_);
    if (code == SSH_FX_NO_SUCH_FILE) return std::nullopt;
    throw RemoteError(RemoteError::Kind::Transfer, session_->where(),
                      "cannot stat " + remote_path + " on " + session_->where() + " (SFTP error " +
                          std::to_string(code) + ": " + ssh_get_error(session_->handle()) + ")");
  }
  RemoteStat result;
  result.size = attributes->size;
  result.is_directory = attributes->type == SSH_FILEXFER_TYPE_DIRECTORY;
  result.permissions = attributes->permissions & 07777;
  result.mtime = static_cast<std::int64_t>(attributes->mtime);
  return result;
}

void SftpClient::mkdir_p(const std::string& remote_path, int mode) const {
  std::string prefix;
  std::size_t start = 0;
  while (start <= remote_path.size()) {
    std::size_t end = remote_path.find('/', start);
    if (end == std::string::npos) end = remote_path.size();
    prefix = remote_path.substr(0, end);
    start = end + 1;
    if (prefix.empty() || prefix.back() == '/') continue;  // leading "/" or "//"
    if (auto existing = stat(prefix)) {
      if (!existing->is_directory) {
        throw RemoteError(RemoteError::Kind::Transfer, session_->where(),
                          "cannot create directory " + remote_path + " on " + session_->where() +
                              ": " + prefix + " exists and is not a directory");
      }
      continue;
    }
    if (sftp_mkdir(sftp_, prefix.c_str(), static_cast<mode_t>(mode)) != SSH_OK &&
        !(stat(prefix) && stat(prefix)->is_directory)) {  // created meanwhile by someone else
      throw RemoteError(RemoteError::Kind::Transfer, session_->where(),
                        "cannot create directory " + prefix + " on " + session_->where() +
                            " (SFTP error " + std::to_string(sftp_get_error(sftp_)) + ": " +
                            ssh_get_error(session_->handle()) + ")");
    }
  }
}

UploadResult SftpClient::upload(const std::string& local_path, const std::string& remote_path,
                                const UploadProgress& progress) const {
  const std::string& where = session_->where();
  struct ::stat local {};
  if (::stat(local_path.c_str(), &local) != 0 || !S_ISREG(local.st_mode)) {
    throw RemoteError(RemoteError::Kind::Transfer, where,
                      "cannot upload " + local_path + " to " + where + ": not a readable file");
  }
  UploadResult result;
  result.sha256 = local_sha256(local_path, where);
  const auto total = static_cast<std::uint64_t>(local.st_size);
  if (auto existing = stat(remote_path)) {
    if (existing->is_directory) {
      throw RemoteError(RemoteError::Kind::Transfer, where,
                        "cannot upload " + local_path + " to " + where + ":" + remote_path +
                            ": the target is a directory; give the full file path");
    }
    if (existing->size == total && remote_sha256(*session_, remote_path) == result.sha256) {
      result.skipped = true;
      return result;
    }
  }

  auto fail = [&](const std::string& what) {
    return RemoteError(RemoteError::Kind::Transfer, where,
                       "cannot upload " + local_path + " to " + where + ":" + remote_path + ": " +
                           what + " (SFTP error " + std::to_string(sftp_get_error(sftp_)) + ": " +
                           ssh_get_error(session_->handle()) + ")");
  };
  const std::string temp = temp_name_beside(remote_path);
  // Whatever fails from here on (a write, the local read, a throwing progress callback, the
  // rename) must not leave the temporary file behind on the server.
  struct RemoveTemp {
    sftp_session sftp;
    const std::string& path;
    bool armed = true;
    ~RemoveTemp() {
      if (armed) sftp_unlink(sftp, path.c_str());
    }
  };
  {
    // Private to the user whatever the local file's mode (0600, 0700 for an executable).
    File file(sftp_open(sftp_, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL,
                        (local.st_mode & 0100) | 0600));
    if (!file) throw fail("cannot create " + temp);
    RemoveTemp remove_temp{sftp_, temp};
    std::ifstream in(local_path, std::ios::binary);
    std::vector<char> buffer(kChunk);
    while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) {
      const auto count = static_cast<size_t>(in.gcount());
      if (sftp_write(file.get(), buffer.data(), count) != static_cast<ssize_t>(count)) {
        throw fail("write to " + temp + " failed");
      }
      result.bytes += count;
      if (progress) progress(result.bytes, total);
    }
    if (in.bad() || result.bytes != total) throw fail("the local file changed while it was read");
    // The rename must not publish a file whose data is still only in the server's page cache.
    if (sftp_extension_supported(sftp_, "fsync@openssh.com", "1") != 0 &&
        sftp_fsync(file.get()) != 0) {
      throw fail("fsync of " + temp + " failed");
    }
    file.reset();  // close before the rename
    // SFTP v3 rename (all libssh 0.10 sends) refuses an existing target, and libssh offers no
    // call for OpenSSH's posix-rename extension; `mv` on the same file system is rename(2),
    // which replaces the target atomically, so it takes over when the target exists.
    if (sftp_rename(sftp_, temp.c_str(), remote_path.c_str()) != SSH_OK) {
      const ExecResult moved =
          session_->exec("mv -f -- " + shell_quote(temp) + " " + shell_quote(remote_path));
      if (moved.exit_status != 0) {
        throw fail("cannot rename " + temp + " to the target: " + moved.std_err);
      }
    }
    remove_temp.armed = false;
  }
  return result;
}

std::string SftpClient::read_from(const std::string& remote_path, std::uint64_t offset,
                                  std::size_t max_bytes) const {
  File file(sftp_open(sftp_, remote_path.c_str(), O_RDONLY, 0));
  if (!file || sftp_seek64(file.get(), offset) != 0) {
    throw RemoteError(RemoteError::Kind::Transfer, session_->where(),
                      "cannot read " + remote_path + " on " + session_->where() + " (SFTP error " +
                          std::to_string(sftp_get_error(sftp_)) + ": " +
                          ssh_get_error(session_->handle()) + ")");
  }
  std::string data;
  std::vector<char> buffer(kChunk);
  while (data.size() < max_bytes) {
    const std::size_t want = std::min(buffer.size(), max_bytes - data.size());
    const ssize_t got = sftp_read(file.get(), buffer.data(), want);
    if (got < 0) {
      throw RemoteError(RemoteError::Kind::Transfer, session_->where(),
                        "read of " + remote_path + " on " + session_->where() + " failed at byte " +
                            std::to_string(offset + data.size()) + ": " +
                            ssh_get_error(session_->handle()));
    }
    if (got == 0) break;
    data.append(buffer.data(), static_cast<std::size_t>(got));
  }
  return data;
}

}  // namespace studio::remote
