// studio-train tokenize / preview: looking at what the engine will train on.
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "cli_args.h"
#include "commands.h"
#include "studio/config/validate.h"
#include "studio/config/config_io.h"
#include "studio/config/llamafactory_v1.h"
#include "studio/data/preview.h"
#include "studio/data/tokenizer.h"

namespace studio::app {

int cmd_tokenize(const Argv& argv) {
  cli::Args args(argv, {"--tokenizer"}, {"--decode"});
  const auto path = args.value("--tokenizer");
  if (!args.ok() || !path || !args.positional().empty())
    return usage_error("tokenize: " + (args.ok() ? std::string("needs --tokenizer FILE_OR_DIR")
                                                 : args.error()));
  const auto tok = data::Tokenizer::load(*path);
  std::string line;
  for (int64_t n = 1; std::getline(std::cin, line); ++n) {
    if (!args.flag("--decode")) {
      std::cout << nlohmann::json(tok.encode(line)).dump() << '\n';
      continue;
    }
    std::vector<int32_t> ids;
    try {
      ids = nlohmann::json::parse(line).get<std::vector<int32_t>>();
    } catch (const nlohmann::json::exception&) {
      std::cerr << "studio-train tokenize: stdin:" << n << ": expected a JSON array of ids\n";
      return kExitInvalid;
    }
    std::cout << tok.decode(ids) << '\n';
  }
  return kExitOk;
}

int cmd_preview(const Argv& argv) {
  cli::Args args(argv, {"--n"}, {"--skip-bad-rows"});
  const int n = args.positive_int("--n", 3);
  if (!args.ok() || args.positional().size() != 1)
    return usage_error("preview: " + (args.ok() ? std::string("expected one CONFIG.yaml")
                                                : args.error()));
  LoadResult loaded = load_config_file(args.positional().front());
  std::cerr << format_all(loaded.diagnostics);
  if (!loaded.ok()) return kExitInvalid;
  if (loaded.config.is_v1()) {  // its template and stage come from the model and the data
    resolve_llamafactory_v1(loaded.config, {});
    if (loaded.config.template_name.empty()) {  // validate says why none was chosen
      std::cerr << format_all(validate_config(loaded.config, {}));
      return kExitInvalid;
    }
  }
  resolve_hub_models(loaded.config);
  const auto tok = data::Tokenizer::load(loaded.config.model_name_or_path);
  data::DatasetOptions opt;
  opt.skip_bad_rows = args.flag("--skip-bad-rows");
  opt.on_warning = [](const std::string& w) { std::cerr << "warning: " << w << "\n"; };
  const auto report = data::preview(loaded.config, tok, n, opt);
  data::PreviewStyle style;
  if (::isatty(STDOUT_FILENO)) style = {"\033[2m", "\033[0m"};  // masked spans dimmed
  std::cout << data::format_preview_text(report, style);
  return kExitOk;
}

}  // namespace studio::app
