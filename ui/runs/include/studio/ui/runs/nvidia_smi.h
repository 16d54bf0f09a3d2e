#pragma once
// Per-GPU memory, utilisation and power of a host, as `nvidia-smi` reports them: how the studio
// samples the GPUs of a run that does not report its own memory (a LLaMA-Factory run) while it
// lives, locally or on its SSH host.
#include <string>
#include <vector>

#include "studio/runs/events.h"

namespace studio {

// nvidia-smi's arguments: one CSV line per GPU, no header, no units.
const std::vector<std::string>& nvidia_smi_query_args();

// Parses that output into one GpuMemory per GPU: rank and device = the GPU's index,
// allocated_mib = memory.used (what every process holds on it), total_mib = memory.total,
// util_percent, power_w and power_limit_w; "[N/A]" and "[Not Supported]" read as NaN. Returns
// false with a reason (naming the line) when a line does not have the 7 fields or its index
// is not a number.
bool parse_nvidia_smi(const std::string& text, std::vector<GpuMemory>& out, std::string& error);

}  // namespace studio
