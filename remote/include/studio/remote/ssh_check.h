#pragma once
// The check macros for libssh calls. Each evaluates the call once and yields its result, or
// throws SshError carrying the statement text, file:line and ssh_get_error(session):
//
//   STUDIO_SSH_CHECK(session, call)              throws on SSH_ERROR and on SSH_AGAIN
//   STUDIO_SSH_CHECK_NONBLOCKING(session, call)  throws on SSH_ERROR; SSH_AGAIN is returned
//   STUDIO_SSH_CHECK_PTR(session, call)          throws when the call returns a null pointer
//
// In a blocking session SSH_AGAIN means the call timed out, so the plain check treats it as an
// error; nonblocking code retries on it instead. Other results pass through for the caller to
// inspect: SSH_EOF, byte counts, and the ssh_userauth_* codes (SSH_AUTH_DENIED, _PARTIAL,
// _AGAIN are positive; only SSH_AUTH_ERROR equals SSH_ERROR). For ssh_channel_* calls pass
// ssh_channel_get_session(channel), which holds the channel's error text.
#include <stdexcept>
#include <string>
#include <type_traits>

#include <libssh/libssh.h>

namespace studio::remote {

class SshError : public std::runtime_error {
 public:
  // code: SSH_ERROR or SSH_AGAIN as returned, or SSH_ERROR for a null pointer.
  SshError(std::string statement, std::string location, std::string ssh_message, int code);

  const std::string& statement() const noexcept { return statement_; }
  const std::string& location() const noexcept { return location_; }  // "file.cpp:42"
  const std::string& ssh_message() const noexcept { return ssh_message_; }
  int code() const noexcept { return code_; }

 private:
  std::string statement_;
  std::string location_;
  std::string ssh_message_;
  int code_;
};

namespace detail {

[[noreturn]] void throw_ssh_error(ssh_session session, int code, const char* statement,
                                  const char* file, int line);

template <typename Rc>
Rc check_ssh_rc(ssh_session session, Rc rc, bool again_ok, const char* statement, const char* file,
                int line) {
  static_assert(std::is_integral_v<Rc> && std::is_signed_v<Rc>,
                "STUDIO_SSH_CHECK expects a call returning a signed libssh status");
  if (rc == SSH_ERROR || (rc == SSH_AGAIN && !again_ok)) {
    throw_ssh_error(session, static_cast<int>(rc), statement, file, line);
  }
  return rc;
}

template <typename T>
T* check_ssh_ptr(ssh_session session, T* ptr, const char* statement, const char* file, int line) {
  if (ptr == nullptr) throw_ssh_error(session, SSH_ERROR, statement, file, line);
  return ptr;
}

}  // namespace detail
}  // namespace studio::remote

// Variadic so calls with top-level commas in template arguments or braces still pass through.
#define STUDIO_SSH_CHECK(session, ...)                                                            \
  ::studio::remote::detail::check_ssh_rc((session), (__VA_ARGS__), false, #__VA_ARGS__, __FILE__, \
                                         __LINE__)
#define STUDIO_SSH_CHECK_NONBLOCKING(session, ...)                                               \
  ::studio::remote::detail::check_ssh_rc((session), (__VA_ARGS__), true, #__VA_ARGS__, __FILE__, \
                                         __LINE__)
#define STUDIO_SSH_CHECK_PTR(session, ...)                                                  \
  ::studio::remote::detail::check_ssh_ptr((session), (__VA_ARGS__), #__VA_ARGS__, __FILE__, \
                                          __LINE__)
