#include "studio/remote/ssh_check.h"

#include <cstring>
#include <utility>

namespace studio::remote {
namespace {

std::string code_name(int code) {
  switch (code) {
    case SSH_ERROR:
      return "SSH_ERROR";
    case SSH_AGAIN:
      return "SSH_AGAIN";
    default:
      return std::to_string(code);
  }
}

std::string describe(const std::string& statement, const std::string& location,
                     const std::string& ssh_message, int code) {
  std::string text =
      "libssh call failed with " + code_name(code) + " at " + location + ": " + statement + ": ";
  // Not every libssh failure records a message (some option setters only log), and saying so
  // beats a message that ends in a colon.
  text += ssh_message.empty() ? "(libssh gave no error message)" : ssh_message;
  return text;
}

const char* base_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

}  // namespace

SshError::SshError(std::string statement, std::string location, std::string ssh_message, int code)
    : std::runtime_error(describe(statement, location, ssh_message, code)),
      statement_(std::move(statement)),
      location_(std::move(location)),
      ssh_message_(std::move(ssh_message)),
      code_(code) {}

namespace detail {

void throw_ssh_error(ssh_session session, int code, const char* statement, const char* file,
                     int line) {
  const char* message = session ? ssh_get_error(session) : nullptr;
  std::string location = std::string(base_name(file)) + ":" + std::to_string(line);
  throw SshError(statement, std::move(location), message ? message : "", code);
}

}  // namespace detail
}  // namespace studio::remote
