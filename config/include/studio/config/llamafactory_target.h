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

// The keys LLaMA-Factory knows whose default there (its own or transformers'
// TrainingArguments') is not studio-train's: do_train (false there: nothing would train),
// finetuning_type (lora there, full here), the batch sizes (8 there, 1 here), logging_steps (500
// there) and gradient_checkpointing (false in TrainingArguments; LLaMA-Factory turns it on
// itself unless disable_gradient_checkpointing, so writing it changes nothing there). A LLaMA-Factory-style file writes them
// even at studio-train's default, or LLaMA-Factory would read another run from it.
// tests/ui/tst_llamafactory_runs checks the list against the installed package's defaults.
const std::vector<std::string_view>& llamafactory_different_defaults();

// "" when LLaMA-Factory can run `cfg`; else one sentence per key set to something it cannot do,
// naming the key, its value and what to do.
std::string llamafactory_refusal(const RunConfig& cfg);

}  // namespace studio
