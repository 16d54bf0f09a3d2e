#pragma once
// studio-train's subcommands, one function each; main() only dispatches.
#include <string>
#include <vector>

namespace studio {
struct CheckResult;
}

namespace studio::app {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitInvalid = 2;

using Argv = std::vector<std::string>;

int usage_error(const std::string& message);
// Prints a checked config's diagnostics on stderr, and the error count when there are errors,
// as `validate` does; returns whether the config is valid.
bool print_check(const CheckResult& res, const std::string& path);

int cmd_validate(const Argv& argv);
int cmd_print_config(const Argv& argv);
int cmd_logprobs(const Argv& argv);
int cmd_init_model(const Argv& argv);
int cmd_export(const Argv& argv);
int cmd_train(const Argv& argv);
int cmd_eval(const Argv& argv);
int cmd_tokenize(const Argv& argv);
int cmd_preview(const Argv& argv);
int cmd_estimate(const Argv& argv);
int cmd_chat(const Argv& argv);
int cmd_supervise(const Argv& argv);
int cmd_sweep(const Argv& argv);

}  // namespace studio::app
