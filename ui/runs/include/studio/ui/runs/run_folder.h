#pragma once
// The layout of a run folder: what the engine writes (status.json, events.jsonl: docs/events.md)
// and what the studio adds when it launches a run (config.yaml, studio-launch.json, train.log).
#include <QString>

namespace studio::ui {

inline constexpr const char* kRunConfigFileName = "config.yaml";
inline constexpr const char* kLaunchRecordFileName = "studio-launch.json";
inline constexpr const char* kTrainLogFileName = "train.log";
// LLaMA-Factory's run folder: the log its web UI shows (written when LLAMABOARD_ENABLED), and the
// metrics files Hugging Face's Trainer saves when training completes.
inline constexpr const char* kLlamaFactoryLogFileName = "running_log.txt";
inline constexpr const char* kTrainResultsFileName = "train_results.json";
inline constexpr const char* kAllResultsFileName = "all_results.json";
// A LLaMA-Factory run that records no end is taken for running while its files were written
// this recently (seconds).
inline constexpr int kLlamaFactoryLiveSeconds = 15 * 60;

// The absolute, clean path by which a run folder is known (its key in RunStore and RunsModel).
QString runDirPath(const QString& dir);

// A run folder holds status.json or events.jsonl, or studio-launch.json (or studio-remote.json
// for a run on an SSH host): a run the studio has launched is one before its engine writes
// anything (Starting, or Failed if it never does). LLaMA-Factory's trainer_log.jsonl, or a
// Hugging Face trainer_state.json (hasTrainerState), make one too.
bool isRunFolder(const QString& dir);
// DIR/trainer_state.json or DIR/checkpoint-N/trainer_state.json exists, and DIR is not itself a
// checkpoint-N folder (whose file belongs to the run above it).
bool hasTrainerState(const QString& dir);

// RUN_DIR/<name>.
QString runFile(const QString& dir, const char* name);

// The last non-blank line of a log (at most 300 characters), for messages that tell the user
// why a run ended; "" when there is none.
QString lastLogLine(const QString& logPath);

}  // namespace studio::ui
