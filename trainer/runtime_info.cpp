#include "studio/trainer/runtime_info.h"

#include "studio/trainer/tensors/torch_compat.h"

#include <torch/cuda.h>

#if STUDIO_WITH_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include <charconv>
#include <cstdlib>
#include <stdexcept>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace studio::trainer {
namespace {

constexpr double kBytesPerMiB = 1024.0 * 1024.0;

std::string fixed1(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  const auto last = s.find_last_not_of(" \t\r");
  return s.substr(first, last - first + 1);
}

// Value of a "Key:   12345 kB" line in MiB, or nullopt if it is not in that form.
std::optional<double> parse_kib_value(std::string_view value) {
  value = trim(value);
  std::uint64_t kib = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), kib);
  if (ec != std::errc() || end == value.data()) return std::nullopt;
  if (trim(std::string_view(end, value.data() + value.size() - end)) != "kB") return std::nullopt;
  return static_cast<double>(kib) / 1024.0;
}

#if STUDIO_WITH_TORCH_CUDA

std::vector<CudaDeviceInfo> list_devices(int count) {
  std::vector<CudaDeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    const cudaDeviceProp* prop = at::cuda::getDeviceProperties(i);
    devices.push_back({i, prop->name, static_cast<std::uint64_t>(prop->totalGlobalMem), prop->major,
                       prop->minor});
  }
  return devices;
}

// The device a stats call refers to, after making sure the allocator exists (querying an
// allocator that was never initialised is an error in 2.x and out of bounds in 1.13).
std::optional<int> resolve_device(int device) {
  if (device < -1 || !torch::cuda::is_available()) return std::nullopt;
  compat::lazy_init_cuda();
  if (device == -1) device = c10::cuda::current_device();
  if (device >= static_cast<int>(c10::cuda::device_count())) return std::nullopt;
  return device;
}

#else

std::vector<CudaDeviceInfo> list_devices(int) {
  return {};
}

#endif

}  // namespace

RuntimeInfo query_runtime_info() {
  RuntimeInfo info;
  info.torch_version = TORCH_VERSION;
  info.torch_cuda_build = STUDIO_WITH_TORCH_CUDA != 0;
  info.cuda_available = torch::cuda::is_available();
  if (info.cuda_available) {
    info.cuda_device_count = static_cast<int>(torch::cuda::device_count());
    info.devices = list_devices(info.cuda_device_count);
  }
  return info;
}

std::string format_runtime_info(const RuntimeInfo& info) {
  std::ostringstream out;
  out << "LibTorch " << info.torch_version
      << (info.torch_cuda_build ? " (CUDA build)\n" : " (CPU build)\n");
  if (!info.cuda_available) {
    out << "CUDA: not available\n";
    return out.str();
  }
  out << "CUDA: " << info.cuda_device_count << " device(s)\n";
  for (const auto& d : info.devices) {
    out << "  cuda:" << d.index << ' ' << d.name << ", sm_" << d.compute_major << d.compute_minor
        << ", " << fixed1(static_cast<double>(d.total_memory_bytes) / kBytesPerMiB / 1024.0)
        << " GiB\n";
  }
  return out.str();
}

std::string format_runtime_info() {
  return format_runtime_info(query_runtime_info());
}

std::optional<int> select_cuda_device(int local_rank, bool share_devices) {
  if (!torch::cuda::is_available()) return std::nullopt;
#if STUDIO_WITH_TORCH_CUDA
  const int count = static_cast<int>(torch::cuda::device_count());
  if (share_devices && count > 0 && local_rank >= 0) local_rank %= count;
  if (local_rank < 0 || local_rank >= count)
    throw std::runtime_error("LOCAL_RANK=" + std::to_string(local_rank) + " has no GPU: this node has " +
                             std::to_string(count) + " visible CUDA device(s) (CUDA_VISIBLE_DEVICES=" +
                             (std::getenv("CUDA_VISIBLE_DEVICES") ? std::getenv("CUDA_VISIBLE_DEVICES")
                                                                  : "unset") +
                             "); start at most that many processes per node (--nproc)");
  compat::lazy_init_cuda();
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(local_rank));
  return local_rank;
#else
  (void)local_rank;
  (void)share_devices;
  return std::nullopt;
#endif
}

std::optional<CudaMemoryStats> cuda_memory_stats(int device) {
#if STUDIO_WITH_TORCH_CUDA
  const auto resolved = resolve_device(device);
  if (!resolved) return std::nullopt;
  namespace alloc = c10::cuda::CUDACachingAllocator;
  const auto stats = alloc::getDeviceStats(static_cast<c10::DeviceIndex>(*resolved));
  const auto& allocated = stats.allocated_bytes[compat::kAggregateStat];
  const auto& reserved = stats.reserved_bytes[compat::kAggregateStat];
  CudaMemoryStats out;
  out.device = *resolved;
  out.allocated_mib = static_cast<double>(allocated.current) / kBytesPerMiB;
  out.reserved_mib = static_cast<double>(reserved.current) / kBytesPerMiB;
  out.peak_allocated_mib = static_cast<double>(allocated.peak) / kBytesPerMiB;
  out.peak_reserved_mib = static_cast<double>(reserved.peak) / kBytesPerMiB;
  out.total_mib = static_cast<double>(at::cuda::getDeviceProperties(*resolved)->totalGlobalMem) /
                  kBytesPerMiB;
  return out;
#else
  return std::nullopt;
#endif
}

void reset_cuda_peak_memory(int device) {
#if STUDIO_WITH_TORCH_CUDA
  if (const auto resolved = resolve_device(device)) {
    c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(*resolved));
  }
#endif
}

std::optional<HostMemoryStats> parse_proc_status(std::string_view text) {
  std::optional<double> rss;
  std::optional<double> hwm;
  while (!text.empty()) {
    const auto eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, colon);
    if (key == "VmRSS") rss = parse_kib_value(line.substr(colon + 1));
    if (key == "VmHWM") hwm = parse_kib_value(line.substr(colon + 1));
  }
  if (!rss || !hwm) return std::nullopt;
  return HostMemoryStats{*rss, *hwm};
}

std::optional<HostMemoryStats> host_memory_stats() {
  std::ifstream in("/proc/self/status");
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return parse_proc_status(text.str());
}

}  // namespace studio::trainer
