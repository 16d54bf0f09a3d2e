#include "terminal_prompts.h"

#include <fcntl.h>
#include <termios.h>
#include <unistd.h>

#include <optional>
#include <string>

namespace studio::cli {
namespace {

// The controlling terminal, opened for one question; closed (and echo restored) on scope exit.
class Tty {
 public:
  Tty() : fd_(::open("/dev/tty", O_RDWR | O_CLOEXEC)) {}
  ~Tty() {
    if (restore_) ::tcsetattr(fd_, TCSAFLUSH, &saved_);
    if (fd_ >= 0) ::close(fd_);
  }
  Tty(const Tty&) = delete;
  Tty& operator=(const Tty&) = delete;

  bool ok() const { return fd_ >= 0; }

  void write(const std::string& text) const {
    std::size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
      if (n <= 0) return;
      done += static_cast<std::size_t>(n);
    }
  }

  // One line without its newline; nullopt at end of input (Ctrl+D).
  std::optional<std::string> read_line(bool echo) {
    if (!echo && ::tcgetattr(fd_, &saved_) == 0) {
      termios quiet = saved_;
      quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
      restore_ = ::tcsetattr(fd_, TCSAFLUSH, &quiet) == 0;
    }
    std::string line;
    char c = 0;
    bool any = false;
    while (::read(fd_, &c, 1) == 1) {
      any = true;
      if (c == '\n') break;
      line += c;
    }
    if (restore_) {
      ::tcsetattr(fd_, TCSAFLUSH, &saved_);
      restore_ = false;
      write("\n");
    }
    if (!any) return std::nullopt;
    return line;
  }

 private:
  int fd_;
  termios saved_{};
  bool restore_ = false;
};

}  // namespace

studio::remote::HostKeyPolicy terminal_host_key_policy(bool batch) {
  if (batch) return studio::remote::reject_unknown_host_keys();
  const auto refuse = studio::remote::reject_unknown_host_keys();
  return [refuse](const studio::remote::HostKeyInfo& key) {
    Tty tty;
    if (!tty.ok()) return refuse(key);
    tty.write("The authenticity of host '" + key.host + "' (port " + std::to_string(key.port) +
              ") can't be established.\n" + key.key_type + " key fingerprint is " +
              key.fingerprint + ".\n");
    for (;;) {
      tty.write("Are you sure you want to continue connecting (yes/once/no)? ");
      const auto answer = tty.read_line(true);
      if (!answer || *answer == "no") return studio::remote::HostKeyDecision::RejectKey;
      if (*answer == "yes") return studio::remote::HostKeyDecision::AcceptAndSave;
      if (*answer == "once") return studio::remote::HostKeyDecision::AcceptOnce;
      tty.write("Please type 'yes', 'once' or 'no'.\n");
    }
  };
}

studio::remote::SecretPrompt terminal_secret_prompt(bool batch) {
  if (batch) return {};
  return [](const studio::remote::SecretRequest& request) -> std::optional<std::string> {
    Tty tty;
    if (!tty.ok()) return std::nullopt;
    std::string prompt = request.prompt;
    if (prompt.empty()) {
      prompt = request.kind == studio::remote::SecretRequest::Kind::KeyPassphrase
                   ? "Enter passphrase for key '" + request.subject + "': "
                   : request.subject + "'s password: ";
    }
    tty.write(prompt);
    return tty.read_line(request.echo);
  };
}

}  // namespace studio::cli
