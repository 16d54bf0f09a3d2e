#include "studio/config/atomic_file.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace studio {
namespace {

std::string sys_error(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
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
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = sys_error("cannot open", path);
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    error = sys_error("cannot read", path);
    return false;
  }
  out = ss.str();
  return true;
}

}  // namespace studio
