#pragma once
// `studio submit|attach|cancel|runs`: the headless remote subcommands (see cmd_remote.cpp's
// usage text). They run before any Qt application object exists, so they work without a display.
#include <optional>

namespace studio::cli {

// The exit code when argv[1] is one of the subcommands; nullopt otherwise.
std::optional<int> run_remote_command(int argc, char** argv);

}  // namespace studio::cli
