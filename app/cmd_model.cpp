// studio-train logprobs / init-model: looking into and creating model folders.
#include <cstdio>
#include <iostream>

#include "cli_args.h"
#include "commands.h"
#include "studio/trainer/batching/batch.h"
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

}  // namespace studio::app
