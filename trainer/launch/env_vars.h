#pragma once
// Reading launcher variables strictly: a variable that is set must hold what it claims, and a
// bad one is reported by name and value. Private to studio_launch.
#include <optional>
#include <string>
#include <vector>

#include "studio/launch/dist_env.h"

namespace studio::launch::detail {

// Throws std::invalid_argument: every launcher configuration error is one.
[[noreturn]] void fail(const std::string& message);

// The value of `name`; nullopt when unset or empty (`export MASTER_ADDR=` means unset).
std::optional<std::string> env_string(const Getenv& getenv, const char* name);

// Inside an srun job step (SLURM_STEP_ID or SLURM_STEPID set). A batch script carries
// SLURM_PROCID and SLURM_NTASKS too, but no step id.
bool in_slurm_step(const Getenv& getenv);

// An integer in [lo, hi]; nullopt when unset. Throws std::invalid_argument naming the variable,
// its value and the range, followed by `hint` when it is not empty.
std::optional<int> env_int(const Getenv& getenv, const char* name, int lo, int hi,
                           const std::string& hint = {});

// A whole-string decimal integer (optional sign, no spaces); nullopt when it is not one or does
// not fit in a long long.
std::optional<long long> parse_integer(const std::string& text);

// Slurm's per-node task counts: "4", "4,4", "4(x2),2" -> {4, 4, 2}. nullopt when malformed.
std::optional<std::vector<int>> parse_tasks_per_node(const std::string& text);

}  // namespace studio::launch::detail
