// studio-train validate / print-config: the run config checks.
#include <iostream>

#include "cli_args.h"
#include "commands.h"
#include "studio/config/config_io.h"
#include "studio/config/validate.h"

namespace studio::app {
namespace {
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

std::string summary(const studio::CheckResult& res, const studio::ValidateOptions& opt) {
  const studio::RunConfig& c = res.config;
  std::string s = c.is_v1() ? "LLaMA-Factory v1, " : "";
  s += "stage " + std::string(studio::to_string(c.stage));
  if (opt.world_size() > 0)
    s += ", world size " + std::to_string(opt.world_size()) + " (" +
         std::to_string(opt.nproc_per_node) + " x " + std::to_string(opt.nnodes) + ")";
  s += ", sequence parallel " + std::to_string(c.sequence_parallel_size);
  if (c.sequence_parallel_size > 1)
    s += " (" + std::string(studio::to_string(c.sequence_parallel_mode)) + ")";
  s += ", cutoff_len " + std::to_string(c.cutoff_len);
  if (res.model)
    s += ", model " + res.model->architecture + " " +
         studio::format_size(*res.model);
  return s;
}

}  // namespace

bool print_check(const studio::CheckResult& res, const std::string& path) {
  std::cerr << studio::format_all(res.diagnostics);
  if (res.ok()) return true;
  size_t errors = 0;
  for (const auto& d : res.diagnostics) errors += d.severity == studio::Severity::Error;
  std::cerr << path << ": " << errors << (errors == 1 ? " error" : " errors") << "\n";
  return false;
}

int cmd_validate(const std::vector<std::string>& argv) {
  std::string path, error;
  studio::ValidateOptions opt;
  if (!read_check_args(argv, path, opt, error)) return usage_error("validate: " + error);
  const studio::CheckResult res = studio::check_config_file(path, opt);
  if (!print_check(res, path)) return kExitInvalid;
  std::cout << path << ": valid: " << summary(res, opt) << "\n";
  return kExitOk;
}

int cmd_print_config(const std::vector<std::string>& argv) {
  std::string path, error;
  studio::ValidateOptions opt;
  if (!read_check_args(argv, path, opt, error)) return usage_error("print-config: " + error);
  const studio::CheckResult res = studio::check_config_file(path, opt);
  std::cerr << studio::format_all(res.diagnostics);
  if (!res.ok()) return kExitInvalid;
  std::cout << studio::to_yaml(studio::normalized(res.config), studio::YamlStyle::Full);
  return kExitOk;
}

}  // namespace studio::app
