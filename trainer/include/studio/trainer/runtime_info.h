#pragma once
// What the engine reports about where it runs: the LibTorch it was built against, the CUDA
// devices it sees, and memory figures for the metrics stream (per-rank CUDA caching allocator,
// process RSS). CUDA figures exist only with a CUDA LibTorch; a CPU build reports none.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace studio::trainer {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  std::uint64_t total_memory_bytes = 0;
  int compute_major = 0;  // compute capability, e.g. 9.0 for H100/H200
  int compute_minor = 0;
};

struct RuntimeInfo {
  std::string torch_version;      // TORCH_VERSION of the LibTorch headers we were compiled with
  bool torch_cuda_build = false;  // LibTorch has CUDA support compiled in
  bool cuda_available = false;    // ... and a driver plus at least one device are usable
  int cuda_device_count = 0;
  std::vector<CudaDeviceInfo> devices;  // one per device; empty on a CPU build
};

RuntimeInfo query_runtime_info();

// A few lines for `studio-train --version`, e.g.
//   LibTorch 2.11.0 (CUDA build)
//   CUDA: 1 device(s)
//     cuda:0 NVIDIA H100 80GB HBM3, sm_90, 79.1 GiB
std::string format_runtime_info(const RuntimeInfo& info);
std::string format_runtime_info();

// Makes cuda:`local_rank` this process's current device (c10::cuda::set_device), before anything
// that allocates on or talks to a device (the model, NCCL, CUDA streams): without it every rank
// would use GPU 0. Returns the device index, or nullopt when CUDA is not available (CPU run).
// Throws std::runtime_error naming LOCAL_RANK and the device count when the rank has no device,
// unless `share_devices` (Gloo on CUDA only: NCCL refuses two ranks on one GPU), which gives rank
// r the device r mod count.
std::optional<int> select_cuda_device(int local_rank, bool share_devices = false);

// The CUDA caching allocator's view of one device, in MiB (1 MiB = 2^20 bytes).
struct CudaMemoryStats {
  int device = 0;
  double allocated_mib = 0;       // held by live tensors
  double reserved_mib = 0;        // held by the allocator (live + cached)
  double peak_allocated_mib = 0;  // since start or the last reset_cuda_peak_memory
  double peak_reserved_mib = 0;
  double total_mib = 0;           // the device's memory
};

// device -1 means the current device (a rank's own). nullopt on a CPU build, without a usable
// device, or for an index out of range.
std::optional<CudaMemoryStats> cuda_memory_stats(int device = -1);
// Starts a new peak window (e.g. per logging interval); does nothing where stats are unavailable.
void reset_cuda_peak_memory(int device = -1);

struct HostMemoryStats {
  double rss_mib = 0;       // VmRSS: resident now
  double peak_rss_mib = 0;  // VmHWM: the high-water mark of the resident set
};

// From /proc/self/status; nullopt where it cannot be read (not Linux).
std::optional<HostMemoryStats> host_memory_stats();
// The parser behind it, for any text in /proc/<pid>/status format; nullopt unless both VmRSS and
// VmHWM are present with a kB unit.
std::optional<HostMemoryStats> parse_proc_status(std::string_view text);

}  // namespace studio::trainer
