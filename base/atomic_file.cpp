#include "studio/base/atomic_file.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace studio {
namespace {

std::string sys_error(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

// Reads the rest of `fd` into `out`, stopping once it holds more than `limit` bytes (so that a
// file longer than the limit shows as out.size() > limit). false on a read error, errno set.
bool read_to_end(int fd, std::size_t limit, std::string& out) {
  out.clear();
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
    out.reserve(std::min<std::uintmax_t>(static_cast<std::uintmax_t>(st.st_size), limit));
  char buf[1 << 16];
  while (out.size() <= limit) {
    const std::size_t left = limit - out.size();
    const std::size_t want = left < sizeof buf ? left + 1 : sizeof buf;
    const ssize_t n = ::read(fd, buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return true;
}

std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

// " (a link to TARGET)" when `path` is a symbolic link, else "".
std::string leads_to(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return {};
  char* real = ::realpath(path.c_str(), nullptr);
  if (!real) return {};
  const std::string target(real);
  std::free(real);
  return " (a link to " + target + ")";
}

std::string too_big(const std::string& path, const std::string& size, std::size_t max_bytes) {
  return path + ": " + size + " bytes, more than the " + std::to_string(max_bytes) +
         " a file of its kind may hold";
}

std::string parent_dir(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

unsigned default_file_mode() {
  unsigned mask = 022;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Umask:", 0) == 0) {
      mask = static_cast<unsigned>(std::strtoul(line.c_str() + 6, nullptr, 8));
      break;
    }
  }
  return 0666u & ~mask;
}

std::string write_file_atomic(const std::string& path, std::string_view content) {
  std::string tmp = path + ".tmp-XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) return sys_error("cannot create a temporary file beside", path);
  ::fchmod(fd, static_cast<mode_t>(default_file_mode()));
  const char* p = content.data();
  size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string err = sys_error("cannot write", tmp);
      ::close(fd);
      ::unlink(tmp.c_str());
      return err;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    std::string err = sys_error("cannot flush", tmp);
    ::unlink(tmp.c_str());
    return err;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = sys_error("cannot rename the temporary file over", path);
    ::unlink(tmp.c_str());
    return err;
  }
  // Make the rename itself durable.
  int dfd = ::open(parent_dir(path).c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return {};
}

bool read_file(const std::string& path, std::string& out, std::string& error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = sys_error("cannot open", path);
    return false;
  }
  const bool ok = read_to_end(fd, SIZE_MAX, out);
  if (!ok) error = sys_error("cannot read", path);
  ::close(fd);
  return ok;
}

int open_regular_file(const std::string& path, std::string& error) {
  // O_NONBLOCK: opening a FIFO with no writer returns at once instead of waiting for one.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const int why = errno;
    error = sys_error("cannot open", path);
    errno = why;
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    error = sys_error("cannot read", path);
  else if (!S_ISREG(st.st_mode))
    error = path + ": " + file_kind(st.st_mode) + leads_to(path) + ", not a regular file";
  else
    return fd;
  ::close(fd);
  errno = EINVAL;
  return -1;
}

bool read_small_file(const std::string& path, std::size_t max_bytes, std::string& out,
                     std::string& error) {
  const int fd = open_regular_file(path, error);
  if (fd < 0) return false;
  struct stat st {};
  bool ok = false;
  if (::fstat(fd, &st) != 0)
    error = sys_error("cannot read", path);
  else if (static_cast<std::uintmax_t>(st.st_size) > max_bytes)
    error = too_big(path, std::to_string(st.st_size), max_bytes);
  else if (!read_to_end(fd, max_bytes, out))
    error = sys_error("cannot read", path);
  else if (out.size() > max_bytes)  // it grew while read
    error = too_big(path, "over " + std::to_string(max_bytes), max_bytes);
  else
    ok = true;
  ::close(fd);
  return ok;
}

}  // namespace studio
