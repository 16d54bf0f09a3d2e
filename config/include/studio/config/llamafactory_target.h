#pragma once
// A run config given to LLaMA-Factory itself (`llamafactory-cli train`, issue #18): the keys of
// the studio's table that LLaMA-Factory 0.9.5 does not know (its HfArgumentParser refuses unknown
// keys), which the saved YAML leaves out while they are at their defaults and which a launch
// refuses otherwise. tests/ui/runs/tst_llamafactory_launch checks the list against the installed
// package's argument dataclasses.
#include <string>
#include <string_view>
#include <vector>

#include "studio/config/run_config.h"

namespace studio {

const std::vector<std::string_view>& llamafactory_unknown_keys();
bool llamafactory_knows(std::string_view key);

// "" when LLaMA-Factory can run `cfg`; else one sentence per key set to something it cannot do,
// naming the key, its value and what to do.
std::string llamafactory_refusal(const RunConfig& cfg);

}  // namespace studio
