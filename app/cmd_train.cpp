// studio-train train / eval: a run config in, a trained model (or a loss) out.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>

#include <unistd.h>

#include "cli_args.h"
#include "commands.h"
#include "studio/config/config_io.h"
#include "studio/config/validate.h"
#include "studio/data/dataset.h"
#include "studio/data/tokenizer.h"
#include "studio/trainer/train_loop.h"

namespace studio::app {
namespace {

std::atomic<bool> g_stop{false};

extern "C" void on_stop_signal(int) { g_stop = true; }

// Loads CONFIG.yaml, applies --set overrides and validates for a run on this machine. Returns
// false after printing every problem.
bool load_for_run(const Argv& argv, const char* cmd, RunConfig& cfg, int& exit_code) {
  cli::Args args(argv, {"--set"}, {});
  if (!args.ok() || args.positional().size() != 1) {
    exit_code = usage_error(std::string(cmd) + ": " +
                            (args.ok() ? "expected one CONFIG.yaml" : args.error()));
    return false;
  }
  std::vector<std::string> sets;
  for (size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == "--set") sets.push_back(argv[i + 1]);
  for (const auto& a : argv)
    if (a.rfind("--set=", 0) == 0) sets.push_back(a.substr(6));
  LoadResult loaded = load_config_file(args.positional().front());
  auto diags = loaded.diagnostics;
  if (loaded.ok()) {
    auto more = apply_overrides(loaded.config, sets);
    diags.insert(diags.end(), more.begin(), more.end());
    ValidateOptions opt;
    opt.nproc_per_node = 1;
    opt.for_training = true;
    more = validate_config(loaded.config, opt);
    diags.insert(diags.end(), more.begin(), more.end());
  }
  std::cerr << format_all(diags);
  if (has_errors(diags)) {
    exit_code = kExitInvalid;
    return false;
  }
  cfg = normalized(loaded.config);
  return true;
}

}  // namespace

int cmd_train(const Argv& argv) {
  RunConfig cfg;
  int code = kExitOk;
  if (!load_for_run(argv, "train", cfg, code)) return code;
  if (cfg.stage != Stage::Sft)
    return usage_error("train: stage " + std::string(to_string(cfg.stage)) +
                       " is not implemented yet; studio-train trains stage: sft");
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);

  const auto tokenizer = data::Tokenizer::load(cfg.model_name_or_path);
  data::DatasetOptions dopt;
  dopt.on_warning = [](const std::string& w) { std::cerr << "warning: " << w << "\n"; };
  auto sft = data::load_sft_data(cfg, tokenizer, dopt);
  std::string error;
  auto info = read_model_info(cfg.model_name_or_path, error);
  if (!info) throw std::runtime_error(error);

  trainer::TrainInputs in;
  in.config = cfg;
  in.model_dir = cfg.model_name_or_path;
  in.model = *info;
  in.train = std::move(sft.train);
  in.eval = std::move(sft.eval);
  in.pad_id = tokenizer.pad_id().value_or(tokenizer.eos_id().value_or(0));
  in.terminal = ::isatty(STDERR_FILENO) != 0;
  std::cerr << "studio-train: " << in.train.size() << " training samples, " << in.eval.size()
            << " evaluation samples, output in " << cfg.output_dir << "\n";
  const auto result = trainer::Trainer(std::move(in)).run(&g_stop);
  std::cerr << "studio-train: " << result.final_state << " at step " << result.steps;
  if (!result.step_losses.empty())
    std::cerr << ", loss " << result.step_losses.front() << " -> " << result.step_losses.back();
  std::cerr << "\n";
  return kExitOk;
}

int cmd_eval(const Argv& argv) {
  RunConfig cfg;
  int code = kExitOk;
  if (!load_for_run(argv, "eval", cfg, code)) return code;
  const auto tokenizer = data::Tokenizer::load(cfg.model_name_or_path);
  auto sft = data::load_sft_data(cfg, tokenizer, {});
  const bool held_out = !sft.eval.empty();
  if (!held_out)
    std::cerr << "studio-train eval: no val_size or eval_dataset: evaluating on the training "
                 "data\n";
  const double loss = trainer::evaluate_model(
      cfg.model_name_or_path, held_out ? sft.eval : sft.train, cfg.per_device_eval_batch_size,
      tokenizer.pad_id().value_or(tokenizer.eos_id().value_or(0)));
  std::printf("%.6f\n", loss);
  return kExitOk;
}

}  // namespace studio::app
