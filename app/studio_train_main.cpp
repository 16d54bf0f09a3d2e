// studio-train: the training engine's command line.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli_args.h"
#include "studio/config/config_io.h"
#include "studio/config/config_schema.h"
#include "studio/config/validate.h"
#include "studio/trainer/runtime_info.h"
#include "studio/version.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitInvalid = 2;

const char* kUsage = R"(usage: studio-train COMMAND [OPTIONS]

Commands:
  validate CONFIG.yaml [--nproc N] [--nnodes M] [--for-training]
      Check a LLaMA-Factory training YAML. Every problem is printed on stderr as
      FILE:LINE:COL: key: message (allowed: ...). The world size is N x M
      (processes per node x nodes); sequence_parallel_size must divide it.
      Exit 0 when the config is valid (warnings allowed), 2 otherwise.
      --for-training  treat missing local paths as errors, as a training run does.
  print-config CONFIG.yaml [--nproc N] [--nnodes M]
      Print the config as the engine runs it: every key, defaults filled in,
      cutoff_len rounded for sequence parallelism, unknown keys kept at the end.

  config-keys
      Print every run-config key with its default, valid values and meaning
      (Markdown; docs/config.md is this output).

Options:
  -h, --help     show this help
  --version      show the version and where the engine runs (LibTorch, CUDA devices)
)";

int usage_error(const std::string& message) {
  std::cerr << "studio-train: " << message << "\nRun 'studio-train --help' for usage.\n";
  return kExitInvalid;
}

// Reads the common CONFIG [--nproc N] [--nnodes M] arguments of validate and print-config.
bool read_check_args(const std::vector<std::string>& argv, std::string& path,
                     studio::ValidateOptions& opt, std::string& error) {
  studio::cli::Args args(argv, {"--nproc", "--nnodes"}, {"--for-training"});
  opt.nproc_per_node = args.positive_int("--nproc", 0);
  opt.nnodes = args.positive_int("--nnodes", 1);
  opt.for_training = args.flag("--for-training");
  if (!args.ok()) return error = args.error(), false;
  if (args.positional().size() != 1) return error = "expected one CONFIG.yaml", false;
  if (args.value("--nnodes") && !args.value("--nproc"))
    return error = "--nnodes needs --nproc (processes per node)", false;
  path = args.positional().front();
  return true;
}

void print_diagnostics(const std::vector<studio::Diagnostic>& diags) {
  std::cerr << studio::format_all(diags);
}

std::string summary(const studio::CheckResult& res, const studio::ValidateOptions& opt) {
  const studio::RunConfig& c = res.config;
  std::string s = "stage " + std::string(studio::to_string(c.stage));
  if (opt.world_size() > 0)
    s += ", world size " + std::to_string(opt.world_size()) + " (" +
         std::to_string(opt.nproc_per_node) + " x " + std::to_string(opt.nnodes) + ")";
  s += ", sequence parallel " + std::to_string(c.sequence_parallel_size);
  if (c.sequence_parallel_size > 1)
    s += " (" + std::string(studio::to_string(c.sequence_parallel_mode)) + ")";
  s += ", cutoff_len " + std::to_string(c.effective_cutoff_len());
  if (res.model)
    s += ", model " + res.model->architecture + " " +
         studio::format_count(res.model->parameter_count());
  return s;
}

int cmd_validate(const std::vector<std::string>& argv) {
  std::string path, error;
  studio::ValidateOptions opt;
  if (!read_check_args(argv, path, opt, error)) return usage_error("validate: " + error);
  const studio::CheckResult res = studio::check_config_file(path, opt);
  print_diagnostics(res.diagnostics);
  if (!res.ok()) {
    size_t errors = 0;
    for (const auto& d : res.diagnostics) errors += d.severity == studio::Severity::Error;
    std::cerr << path << ": " << errors << (errors == 1 ? " error" : " errors") << "\n";
    return kExitInvalid;
  }
  std::cout << path << ": valid: " << summary(res, opt) << "\n";
  return kExitOk;
}

int cmd_print_config(const std::vector<std::string>& argv) {
  std::string path, error;
  studio::ValidateOptions opt;
  if (!read_check_args(argv, path, opt, error)) return usage_error("print-config: " + error);
  const studio::CheckResult res = studio::check_config_file(path, opt);
  print_diagnostics(res.diagnostics);
  if (!res.ok()) return kExitInvalid;
  std::cout << studio::to_yaml(studio::normalized(res.config), studio::YamlStyle::Full);
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << kUsage;
    return kExitInvalid;
  }
  const std::string cmd = args.front();
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  try {
    if (cmd == "-h" || cmd == "--help" || cmd == "help") return std::cout << kUsage, kExitOk;
    if (cmd == "--version") {
      std::cout << "studio-train " << studio::kVersion << "\n"
                << studio::trainer::format_runtime_info();
      return kExitOk;
    }
    if (cmd == "validate") return cmd_validate(rest);
    if (cmd == "print-config") return cmd_print_config(rest);
    if (cmd == "config-keys") return std::cout << studio::config_keys_markdown(), kExitOk;
  } catch (const std::exception& e) {
    std::cerr << "studio-train: internal error: " << e.what() << "\n";
    return 1;
  }
  return usage_error("unknown command '" + cmd + "'");
}
