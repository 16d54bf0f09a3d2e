// studio-train supervise: another trainer (LLaMA-Factory) run under studio-train's run-folder
// contract, status.json and stop handling included (studio/launch/supervise.h).
#include <atomic>
#include <csignal>
#include <iostream>

#include "commands.h"
#include "studio/launch/supervise.h"

namespace studio::app {
namespace {

std::atomic<bool> g_supervise_stop{false};

extern "C" void on_supervise_signal(int) { g_supervise_stop = true; }

}  // namespace

int cmd_supervise(const Argv& argv) {
  launch::SuperviseOptions opt;
  std::size_t i = 0;
  for (; i < argv.size() && argv[i] != "--"; ++i) {
    const std::string& a = argv[i];
    const bool has_value = i + 1 < argv.size() && argv[i + 1] != "--";
    if (a == "--output-dir" && has_value) {
      opt.output_dir = argv[++i];
    } else if (a == "--grace" && has_value) {
      try {
        opt.grace_s = std::stod(argv[++i]);
      } catch (const std::exception&) {
        return usage_error("supervise: --grace: '" + argv[i] + "' is not a number of seconds");
      }
    } else if (a == "--env" && has_value) {
      const std::string kv = argv[++i];
      const auto eq = kv.find('=');
      if (eq == std::string::npos || eq == 0)
        return usage_error("supervise: --env takes NAME=VALUE, got '" + kv + "'");
      opt.extra_env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    } else {
      return usage_error("supervise: unexpected '" + a +
                         "' (usage: supervise --output-dir DIR [--grace S] [--env K=V ...] -- "
                         "PROGRAM ARGS...)");
    }
  }
  if (opt.output_dir.empty()) return usage_error("supervise: needs --output-dir DIR");
  if (i >= argv.size() || i + 1 >= argv.size())
    return usage_error("supervise: give the program after --, e.g. -- llamafactory-cli train "
                       "CONFIG.yaml");
  opt.argv.assign(argv.begin() + static_cast<std::ptrdiff_t>(i) + 1, argv.end());
  std::signal(SIGINT, on_supervise_signal);
  std::signal(SIGTERM, on_supervise_signal);
  const launch::SuperviseResult r = launch::supervise(opt, &g_supervise_stop);
  if (!r.status_error.empty()) std::cerr << "studio-train supervise: " << r.status_error << '\n';
  if (r.state != "finished")
    std::cerr << "studio-train supervise: " << r.state << ": " << r.reason << '\n';
  return r.exit_code;
}

}  // namespace studio::app
