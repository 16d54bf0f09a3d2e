// studio-train logprobs / init-model: looking into and creating model folders.
#include <cstdio>
#include <iostream>

#include "cli_args.h"
#include "commands.h"
#include "studio/config/config_io.h"
#include "studio/config/validate.h"
#include "studio/trainer/batching/batch.h"
#include "studio/trainer/export_model.h"
#include "studio/trainer/loss.h"
#include "studio/trainer/model_folder.h"

namespace studio::app {
namespace {

bool parse_ids(const std::string& text, std::vector<int64_t>& ids, std::string& error) {
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? text.npos : comma - start);
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0)
      return error = "--ids: '" + item + "' is not a token id (give e.g. --ids 1,2,3)", false;
    ids.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return true;
}

}  // namespace

int cmd_logprobs(const Argv& argv) {
  cli::Args args(argv, {"--model", "--ids"}, {});
  if (!args.ok()) return usage_error("logprobs: " + args.error());
  const auto model_dir = args.value("--model");
  const auto ids_text = args.value("--ids");
  if (!model_dir || !ids_text) return usage_error("logprobs: needs --model DIR and --ids 1,2,3");
  std::vector<int64_t> ids;
  std::string error;
  if (!parse_ids(*ids_text, ids, error)) return usage_error("logprobs: " + error);
  if (ids.size() < 2) return usage_error("logprobs: needs at least two ids");

  auto model = trainer::load_model_folder(*model_dir);
  const int64_t vocab = model->info().vocab_size;
  for (int64_t id : ids)
    if (id >= vocab)
      return usage_error("logprobs: id " + std::to_string(id) + " is outside the vocabulary (" +
                         std::to_string(vocab) + " tokens)");
  torch::NoGradGuard no_grad;
  const auto n = static_cast<int64_t>(ids.size());
  auto input = torch::tensor(ids, torch::kLong).unsqueeze(0);
  auto targets = torch::full({1, n}, trainer::kIgnoreIndex, torch::kLong);
  targets.narrow(1, 0, n - 1).copy_(input.narrow(1, 1, n - 1));
  auto hidden = model->hidden_states(input, torch::arange(n, torch::kLong).unsqueeze(0));
  auto lp = trainer::lm_target_logprobs(hidden, model->lm_head_weight(), targets, 0,
                                        model->info().final_logit_softcapping);
  std::cout << '[';
  for (int64_t i = 0; i + 1 < n; ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", lp[0][i].item<double>());
    std::cout << (i ? "," : "") << buf;
  }
  std::cout << "]\n";
  return kExitOk;
}

int cmd_init_model(const Argv& argv) {
  cli::Args args(argv, {"--config", "--out", "--seed", "--dtype"}, {});
  if (!args.ok()) return usage_error("init-model: " + args.error());
  const auto config = args.value("--config");
  const auto out = args.value("--out");
  if (!config || !out) return usage_error("init-model: needs --config CONFIG.json and --out DIR");
  const int seed = args.positive_int("--seed", 1);
  const std::string dtype = args.value("--dtype").value_or("float32");
  if (!args.ok()) return usage_error("init-model: " + args.error());
  torch::Dtype dt = torch::kFloat;
  if (dtype == "bfloat16")
    dt = torch::kBFloat16;
  else if (dtype != "float32")
    return usage_error("init-model: --dtype is float32 or bfloat16, got '" + dtype + "'");
  trainer::init_model_folder(*config, *out, static_cast<uint64_t>(seed), dt);
  std::cout << *out << "\n";
  return kExitOk;
}

int cmd_export(const Argv& argv) {
  cli::Args args(argv, {"--set"}, {});
  if (!args.ok() || args.positional().size() != 1)
    return usage_error("export: " + (args.ok() ? std::string("expected one CONFIG.yaml")
                                               : args.error()));
  std::vector<std::string> sets;
  for (size_t i = 0; i + 1 < argv.size(); ++i)
    if (argv[i] == "--set") sets.push_back(argv[i + 1]);
  LoadResult loaded = load_config_file(args.positional().front());
  auto diags = loaded.diagnostics;
  if (loaded.ok()) {
    auto more = apply_overrides(loaded.config, sets);
    diags.insert(diags.end(), more.begin(), more.end());
  }
  // An export file is not a training file: only its loading problems (malformed lines, refused
  // keys such as export_quantization_bit) and the export's own keys are checked.
  std::cerr << format_all(diags);
  if (has_errors(diags)) return kExitInvalid;
  RunConfig cfg = loaded.config;
  if (cfg.model_name_or_path.empty()) return usage_error("export: model_name_or_path is not set");
  resolve_hub_models(cfg);
  try {
    const auto r = trainer::export_merged_model(cfg);
    std::cerr << "studio-train export: " << r.merged.size() << " adapter"
              << (r.merged.size() == 1 ? "" : "s") << " merged into " << cfg.model_name_or_path
              << ", " << r.weight_files.size() << " weight file"
              << (r.weight_files.size() == 1 ? "" : "s") << " ("
              << trainer::torch_dtype_name(r.dtype) << ", " << r.total_size << " bytes)\n";
    std::cout << *cfg.export_dir << "\n";
    return kExitOk;
  } catch (const std::invalid_argument& e) {
    std::cerr << "studio-train export: " << e.what() << "\n";
    return kExitInvalid;
  } catch (const std::exception& e) {
    std::cerr << "studio-train export: " << e.what() << "\n";
    return kExitFailed;
  }
}

}  // namespace studio::app
