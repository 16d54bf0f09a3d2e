#pragma once
// For tests that run the ranks of a Communicator as threads: a socket already listening on a
// port the kernel picked, handed to rank 0 as CommOptions::store_listen_fd, as studio-train's
// launcher does. No other process can take the port before rank 0's store serves on it (a port
// only chosen and closed could be taken by another test meanwhile).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace test_store {

struct Listening {
  int fd = -1;  // taken over (and closed) by rank 0's store
  int port = 0;
};

// {-1, 0} when no socket could be had.
inline Listening listening_socket() {
  Listening s;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return s;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return s;
  }
  s.fd = fd;
  s.port = ntohs(addr.sin_port);
  return s;
}

}  // namespace test_store
