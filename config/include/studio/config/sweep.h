#pragma once
// Sweeps: one base config trained at several values of some keys (learning rate, SP size and
// mode, cutoff_len, ZeRO stage, any key of the key table). A grid takes every combination of
// the axes' values; a list takes the i-th value of every axis together (all axes the same
// length). Each point is the base config with its values set as `--set key=value` would
// (apply_overrides), checked like any config before anything runs, and trained in a folder of
// its own under the sweep's folder (docs/SWEEPS.md):
//
//   SWEEP_DIR/sweep.json            the spec, the points and their folders (this file's format);
//                                   written last, so whoever sees it finds every point's folder
//   SWEEP_DIR/base.yaml             the base config as given
//   SWEEP_DIR/NN-key=value,.../     one run folder per point: config.yaml, events.jsonl, ...
//   SWEEP_DIR/sweep-status.json     the process that runs the queue on this machine: its pid,
//                                   host and state (status.json's format), for a stop
//   SWEEP_DIR/sweep.lock            held (flock) by that process while it runs the queue
//
// Plain C++: the engine's `studio-train sweep` runs the queue, the studio draws and opens it.
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "studio/config/diagnostic.h"
#include "studio/config/run_config.h"
#include "studio/config/validate.h"

namespace studio {

inline constexpr const char* kSweepFileName = "sweep.json";
// Written by `studio-train sweep` when it runs the whole queue (not by a Slurm array task's
// --point I): RunStatus's format, "running" with its pid and host, then how the queue ended.
inline constexpr const char* kSweepStatusFileName = "sweep-status.json";
// Held with flock(LOCK_EX) by that process from start to end: a second `--resume` of the same
// sweep is refused instead of training the same points twice, and a stop can tell the process
// that runs the queue from another that took its pid (it holds this file open).
inline constexpr const char* kSweepLockFileName = "sweep.lock";

enum class SweepMode { Grid, List };

struct SweepAxis {
  std::string key;
  std::vector<std::string> values;  // as written (YAML scalars), typed by the key table
};

struct SweepSpec {
  SweepMode mode = SweepMode::Grid;
  std::vector<SweepAxis> axes;
};

struct SweepPoint {
  int index = 0;                    // 0-based, the queue's (and a Slurm array's) order
  std::vector<std::string> sets;    // "key=value", one per axis, in axis order
  std::string name;                 // "03-learning_rate=3e-4,sequence_parallel_size=2"
};

// Reads one axis from "key=v1,v2,v3" (the CLI's --sweep). Values are split on the commas
// outside brackets and quotes, so a YAML list or a quoted string holding a comma is one value:
// "lora_target=[q_proj, v_proj],all". Throws std::invalid_argument naming the text when it is
// not "key=values" or has an empty value.
SweepAxis parse_sweep_axis(const std::string& text);

// The points, in order: a grid varies the last axis fastest. Throws std::invalid_argument for
// no axes, a key given twice, a list whose axes differ in length, or more than kMaxSweepPoints.
inline constexpr std::size_t kMaxSweepPoints = 1024;
std::vector<SweepPoint> expand_sweep(const SweepSpec& spec);

// A point's folder name: "NN-" then its sets joined by ","; characters a file name should not
// hold become '_', and the whole is kept under 120 bytes.
std::string sweep_point_name(int index, std::size_t count, const std::vector<std::string>& sets);

// The base config with a point's values set (apply_overrides) and output_dir set to
// `output_dir`, and every problem the config has (validate_config's errors and warnings, and
// the overrides'): a point with errors is reported before anything is trained.
struct SweepPointConfig {
  RunConfig config;
  std::vector<Diagnostic> diagnostics;
};
// `validate` says the world the point runs in (its nproc_per_node x nnodes).
SweepPointConfig sweep_point_config(const RunConfig& base, const SweepPoint& point,
                                    const std::string& output_dir,
                                    const ValidateOptions& validate = {});

// sweep.json: the sweep's name, the spec, the processes each point runs on (nproc) and the
// points with their folders (relative to the sweep folder). read_sweep throws
// std::runtime_error naming the file and what is wrong.
struct SweepFile {
  std::string name;
  SweepSpec spec;
  int nproc = 1;
  std::vector<SweepPoint> points;
};
nlohmann::json sweep_to_json(const SweepFile& sweep);
SweepFile read_sweep(const std::string& sweep_dir);

}  // namespace studio
