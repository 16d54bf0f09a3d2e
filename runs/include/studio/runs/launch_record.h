#pragma once
// RUN_DIR/studio-launch.json: how the studio started a run on this machine. The run is detached
// from the studio, so this file is what a later studio session (or a crash-restarted one) knows
// of it: which process to stop, which engine and config it runs, where it logs. No Qt.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace studio {

struct LaunchRecord {
  std::vector<std::string> command;  // the command line as started, program first
  std::string cwd;                   // its working directory
  std::string engine;                // the studio-train it runs
  std::string config;                // the config.yaml it was given
  std::optional<double> started;     // when the studio started it: seconds since the epoch
  std::int64_t pid = 0;  // the engine's pid (its session and process group id too)
  int nproc = 1;         // processes per node asked for
  std::string host;      // the machine it runs on

  // The file's text: a JSON object, keys sorted, indented by 4.
  std::string to_json() const;
  // Writes RUN_DIR/studio-launch.json atomically. Returns "" or an error naming the file.
  std::string write(const std::string& run_dir) const;

  // Reads the text of `path` (for messages). Only `pid` is required (a positive integer): a
  // string where another string or number belongs reads as empty, a missing or non-integral
  // nproc as 1, a started that is not a finite number as unknown. False with an error naming
  // `path` otherwise.
  static bool from_json(const std::string& text, const std::string& path, LaunchRecord& out,
                        std::string& error);
  // Reads RUN_DIR/studio-launch.json; false with an error naming the file and the problem when
  // it is missing or malformed.
  static bool read(const std::string& run_dir, LaunchRecord& out, std::string& error);
};

}  // namespace studio
