#pragma once
// Quoting for command lines that a POSIX shell will parse: the remote login shell that sshd
// runs as `$SHELL -c LINE`. The results are safe for sh, dash, bash, ksh and zsh. They are NOT
// safe for csh/tcsh or fish, whose single quotes follow other rules; wrap the line for those.
//
// Quoting only stops the shell from reinterpreting bytes. An argument that starts with '-' is
// still passed as-is and the program will read it as an option: callers put "--" before
// operands when the program supports it.
//
// Every function throws std::invalid_argument for a NUL byte: no shell argument, environment
// value or path can hold one, so silently truncating would run a different command.
#include <string>
#include <string_view>
#include <vector>

namespace studio::remote {

// One argument as a single shell word. Words made only of [A-Za-z0-9_/.,:+@%=-] stay bare when
// no shell can read them as anything but a literal (so not reserved words like "if", NAME=...
// assignments, or words starting with '='); everything else is single-quoted, with each '
// written as '\''. The empty string becomes ''. Quoting cannot change how a shell treats the
// command name itself: bash reads a first word starting with '%' as a job even when quoted.
std::string shell_quote(std::string_view arg);

// The arguments quoted and joined with single spaces; empty for an empty argv.
std::string shell_join(const std::vector<std::string>& argv);

// True for a name the shell accepts in an assignment: [A-Za-z_][A-Za-z0-9_]*.
bool is_valid_env_name(std::string_view name);

struct EnvVar {
  std::string name;
  std::string value;
};

// NAME=VALUE as one word with VALUE quoted; throws std::invalid_argument for a bad name.
std::string shell_env_assignment(const EnvVar& var);

// "NAME=VALUE ... CMD ARGS...": the variables are set for CMD only. Throws for an empty argv.
std::string shell_command(const std::vector<std::string>& argv,
                          const std::vector<EnvVar>& env = {});

// "cd DIR && export NAME=VALUE... && exec CMD ARGS...": runs CMD in DIR, replacing the shell so
// signals and the exit status reach CMD directly. A relative DIR is taken from the shell's
// starting directory (the home directory for ssh) and never looked up in CDPATH. '~' is not
// expanded: pass an absolute path or one relative to the home directory. Throws for an empty
// DIR or argv.
std::string shell_command_in_dir(std::string_view dir, const std::vector<std::string>& argv,
                                 const std::vector<EnvVar>& env = {});

}  // namespace studio::remote
