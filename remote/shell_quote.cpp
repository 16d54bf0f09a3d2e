#include "studio/remote/shell_quote.h"

#include <array>
#include <stdexcept>

namespace studio::remote {
namespace {

bool is_ascii_alpha(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}
bool is_ascii_digit(char c) {
  return c >= '0' && c <= '9';
}

// Bytes that no POSIX-family shell treats specially anywhere inside a word. '~', '#', '!', '{',
// '}', '[', ']', '^' and all quoting, expansion and operator characters are missing on purpose.
bool is_bare_byte(char c) {
  constexpr std::string_view kBarePunctuation = "_/.,:+@%=-";
  return is_ascii_alpha(c) || is_ascii_digit(c) ||
         kBarePunctuation.find(c) != std::string_view::npos;
}

// Reserved words of sh, bash, ksh and zsh. They only act as keywords in command position, but
// shell_quote cannot know the position, and quoting them costs two bytes.
bool is_reserved_word(std::string_view word) {
  static constexpr std::array<std::string_view, 22> kWords = {
      "case",   "coproc", "do",      "done",     "elif",  "else", "end",       "esac",
      "fi",     "for",    "foreach", "function", "if",    "in",   "nocorrect", "noglob",
      "repeat", "select", "then",    "time",     "until", "while"};
  for (std::string_view w : kWords) {
    if (w == word) return true;
  }
  return false;
}

// A bare NAME=... in command position is an assignment, not a command; a leading '=' runs zsh's
// "=cmd" path expansion. Both must be quoted to stay literal.
bool has_assignment_meaning(std::string_view word) {
  auto eq = word.find('=');
  if (eq == std::string_view::npos) return false;
  return eq == 0 || is_valid_env_name(word.substr(0, eq));
}

bool can_stay_bare(std::string_view arg) {
  if (arg.empty()) return false;
  for (char c : arg) {
    if (!is_bare_byte(c)) return false;
  }
  return !is_reserved_word(arg) && !has_assignment_meaning(arg);
}

void reject_nul(std::string_view text, const char* what) {
  auto pos = text.find('\0');
  if (pos == std::string_view::npos) return;
  throw std::invalid_argument(std::string(what) + " contains a NUL byte at offset " +
                              std::to_string(pos) + "; a shell word cannot hold NUL");
}

std::string join_words(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    if (!out.empty()) out += ' ';
    out += w;
  }
  return out;
}

void require_command(const std::vector<std::string>& argv) {
  if (argv.empty()) throw std::invalid_argument("shell command: argv is empty");
}

}  // namespace

std::string shell_quote(std::string_view arg) {
  reject_nul(arg, "shell argument");
  if (can_stay_bare(arg)) return std::string(arg);
  std::string out;
  out.reserve(arg.size() + 2);
  out += '\'';
  for (char c : arg) {
    // Nothing escapes inside single quotes, so a quote closes them, is added escaped, and
    // reopens them.
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += '\'';
  return out;
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& arg : argv) {
    if (!out.empty()) out += ' ';
    out += shell_quote(arg);
  }
  return out;
}

bool is_valid_env_name(std::string_view name) {
  if (name.empty() || is_ascii_digit(name.front())) return false;
  for (char c : name) {
    if (!is_ascii_alpha(c) && !is_ascii_digit(c) && c != '_') return false;
  }
  return true;
}

std::string shell_env_assignment(const EnvVar& var) {
  reject_nul(var.name, "environment variable name");
  if (!is_valid_env_name(var.name)) {
    throw std::invalid_argument("invalid environment variable name '" + var.name +
                                "': it must match [A-Za-z_][A-Za-z0-9_]*");
  }
  // The value is quoted on its own, so even a bare-looking "A=B" value stays literal.
  return var.name + "=" + shell_quote(var.value);
}

std::string shell_command(const std::vector<std::string>& argv, const std::vector<EnvVar>& env) {
  require_command(argv);
  std::vector<std::string> words;
  for (const EnvVar& var : env) words.push_back(shell_env_assignment(var));
  words.push_back(shell_join(argv));
  return join_words(words);
}

std::string shell_command_in_dir(std::string_view dir, const std::vector<std::string>& argv,
                                 const std::vector<EnvVar>& env) {
  reject_nul(dir, "directory");
  if (dir.empty()) throw std::invalid_argument("shell command: directory is empty");
  require_command(argv);
  // "./" keeps cd from searching CDPATH (which would also print the directory) and from reading
  // a leading '-' as an option or "-" as OLDPWD.
  std::string path = dir.front() == '/' ? std::string(dir) : "./" + std::string(dir);
  std::string line = "cd " + shell_quote(path) + " && ";
  if (!env.empty()) {
    // Assignments before the special builtin exec are not reliably exported across shells,
    // so they are exported explicitly.
    std::vector<std::string> words{"export"};
    for (const EnvVar& var : env) words.push_back(shell_env_assignment(var));
    line += join_words(words) + " && ";
  }
  return line + "exec " + shell_join(argv);
}

}  // namespace studio::remote
