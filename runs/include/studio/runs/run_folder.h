#pragma once
// What a run folder holds, by name: the one list of its files (docs/events.md says what each
// one's lines mean). A run folder is the engine's OUTPUT_DIR, or the folder the studio launches
// a run in (its OUTPUT_DIR inside it, or the same folder), or LLaMA-Factory's output_dir.
//
//   written by the engine        events.jsonl, status.json (events.h), checkpoint-N/
//   written by the studio        config.yaml (the run's config), train.log (the engine's stdout
//                                and stderr), studio-launch.json (launch_record.h: a run started
//                                here), studio-remote.json (remote_record.h: a run on an SSH host
//                                or under Slurm, in the remote folder and its local mirror)
//   LLaMA-Factory and the Trainer trainer_log.jsonl, trainer_state.json (events.h),
//                                running_log.txt, train_results.json, all_results.json
//
// The launcher (run_outcome.h) completes events.jsonl and status.json for a run whose rank 0
// could not. No Qt, no Torch.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "studio/runs/events.h"

namespace studio {

inline constexpr const char* kRunConfigFileName = "config.yaml";
inline constexpr const char* kLaunchRecordFileName = "studio-launch.json";
inline constexpr const char* kRemoteRecordFileName = "studio-remote.json";
inline constexpr const char* kTrainLogFileName = "train.log";
// LLaMA-Factory's run folder: the log its web UI shows (written when LLAMABOARD_ENABLED), and the
// metrics files Hugging Face's Trainer saves when training completes.
inline constexpr const char* kLlamaFactoryLogFileName = "running_log.txt";
inline constexpr const char* kTrainResultsFileName = "train_results.json";
inline constexpr const char* kAllResultsFileName = "all_results.json";
// A run that records no end and leaves no process to look at (LLaMA-Factory's, or a folder the
// studio did not start) is taken for running while its files were written this recently
// (seconds).
inline constexpr int kRunFolderLiveSeconds = 15 * 60;

// DIR/<name>.
std::string run_file(const std::string& dir, const char* name);

// "checkpoint-N", N digits only within int64's range -> N; nullopt for any other name.
std::optional<std::int64_t> checkpoint_number(std::string_view name);
// The last component of a path, trailing slashes left out ("a/b/" -> "b").
std::string base_name(std::string path);

// DIR/trainer_state.json or DIR/checkpoint-N/trainer_state.json exists, and DIR is not itself a
// checkpoint-N folder (whose file belongs to the run above it).
bool has_trainer_state(const std::string& dir);

// A run folder holds status.json or events.jsonl, or studio-launch.json (or studio-remote.json
// for a run on an SSH host): a run the studio has launched is one before its engine writes
// anything. LLaMA-Factory's trainer_log.jsonl, or a Hugging Face trainer_state.json
// (has_trainer_state), make one too.
bool is_run_folder(const std::string& dir);

}  // namespace studio
