#pragma once
// What a remote host offers for training, read with ONE exec of a fixed POSIX sh script: GPUs
// (nvidia-smi), CPUs, memory, host name and OS, the studio-train engine's version, and the Slurm
// partitions when sinfo exists. The script prints one delimited section per question, and every
// section says whether its tool was missing or failed, so a host without GPUs or Slurm is an
// answer, not an error. The only user text (the engine path) travels as a quoted positional
// argument, never inside the script.
#include <string>
#include <vector>

#include "studio/remote/ssh_session.h"

namespace studio::remote {

struct GpuInfo {
  int index = 0;
  std::string name;  // "NVIDIA H100 80GB HBM3"
  long long memory_total_mib = 0;
  long long memory_used_mib = 0;
};

struct SlurmPartition {
  std::string name;          // without sinfo's '*' default marker
  bool is_default = false;   // sinfo printed "name*"
  std::string availability;  // "up", "down", "drain", "inact"
  int nodes = 0;             // summed over sinfo's lines for this partition
  std::string gres;          // "gpu:h100:8"; "(null)" -> ""; distinct values joined by ", "
  std::string time_limit;    // "2-00:00:00", "infinite"
};

struct HostInventory {
  std::string hostname;
  std::string os;  // `uname -sr`, e.g. "Linux 6.1.0-18-amd64"
  int cpu_count = 0;
  long long mem_total_kib = 0;
  long long mem_available_kib = 0;

  std::vector<GpuInfo> gpus;
  std::string gpu_note;  // set when gpus is empty: "no GPUs: nvidia-smi not found" or its error

  bool engine_found = false;
  std::string engine_path;     // where the engine was found
  std::string engine_version;  // "0.1.0" from "studio-train 0.1.0"
  std::string engine_details;  // the lines after the first: LibTorch build, CUDA devices
  std::string engine_note;     // when not usable: "not found ..." naming where it looked, or why

  bool slurm = false;  // sinfo exists and answered
  std::vector<SlurmPartition> partitions;
  std::string slurm_note;  // "sinfo not found", or sinfo's error when it failed
};

// The remote command line: `sh -c SCRIPT studio-inventory ENGINE`, ENGINE quoted. `engine` is a
// path (absolute, "~/...", or relative to the login directory) or a name looked up in PATH.
std::string inventory_command(const std::string& engine);

// Reads what the script printed. Throws std::runtime_error naming the section for output that
// the script cannot have printed (a missing section, a malformed nvidia-smi or meminfo line),
// which usually means the login shell printed something else or the exec was cut short.
HostInventory parse_inventory_output(const std::string& output);

// `nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv,noheader,nounits`.
// Throws std::runtime_error quoting the line that is not four fields with numbers.
std::vector<GpuInfo> parse_nvidia_smi_gpus(const std::string& output);

// `sinfo -h -o "%P|%a|%D|%G|%l"`; lines of the same partition (sinfo splits a partition whose
// nodes differ) are merged. Throws std::runtime_error quoting a line that is not five fields.
std::vector<SlurmPartition> parse_sinfo_partitions(const std::string& output);

// Runs inventory_command on the session and parses it. Throws what exec throws (RemoteError,
// SshError), and std::runtime_error naming the host when the script fails or its output does
// not parse.
HostInventory probe_inventory(const SshSession& session, const std::string& engine);

}  // namespace studio::remote
