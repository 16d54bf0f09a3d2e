#pragma once
// The shell command that starts a wizard's run by hand, for "Copy command line":
//   cd BASE_DIR && studio-train train CONFIG.yaml --nproc N
// Relative paths in the YAML resolve against the working directory (as in LLaMA-Factory), hence
// the cd. More than one node adds --nnodes M and the per-node values as shell variables
// (NODE_RANK, MASTER_ADDR, MASTER_PORT) to set on each node. An SSH target wraps the line in
// `ssh [-p PORT] [USER@]HOST '...'`, the remote part ending in exec. With the LLaMA-Factory
// trainer the program is `env FORCE_TORCHRUN=1 NPROC_PER_NODE=N [NNODES=M] llamafactory-cli
// train CONFIG.yaml` (several nodes: NODE_RANK, MASTER_ADDR, MASTER_PORT exported on each).
#include <QString>

#include "studio/ui/runs/launch_target.h"

namespace studio::ui {

QString trainCommandLine(const QString& engine, const QString& configFile, const QString& workDir,
                         const LaunchTarget& target);

}  // namespace studio::ui
