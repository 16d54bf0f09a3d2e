#include "studio/trainer/metrics/gpu_activity.h"

#include <dlfcn.h>

#include <cstdio>
#include <mutex>

#if STUDIO_WITH_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace studio::trainer {

std::string pci_bus_id(int domain, int bus, int device) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.0", domain, bus, device);
  return buf;
}

namespace {

// The few NVML entry points used, with the C ABI of nvml.h (stable since NVML 2.285).
using NvmlDevice = void*;
struct NvmlUtilization {
  unsigned int gpu;
  unsigned int memory;
};
using InitFn = int (*)();
using HandleByBusIdFn = int (*)(const char*, NvmlDevice*);
using UtilizationFn = int (*)(NvmlDevice, NvmlUtilization*);
using PowerFn = int (*)(NvmlDevice, unsigned int*);

struct Nvml {
  HandleByBusIdFn handle_by_bus_id = nullptr;
  UtilizationFn utilization = nullptr;
  PowerFn power_usage = nullptr;
  PowerFn power_limit = nullptr;
  std::string error;  // "" when usable
};

const Nvml& nvml() {
  static Nvml lib;
  static std::once_flag once;
  std::call_once(once, [] {
    void* handle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      lib.error = std::string("cannot open libnvidia-ml.so.1 (the NVIDIA driver's NVML): ") +
                  dlerror();
      return;
    }
    const auto init = reinterpret_cast<InitFn>(dlsym(handle, "nvmlInit_v2"));
    lib.handle_by_bus_id =
        reinterpret_cast<HandleByBusIdFn>(dlsym(handle, "nvmlDeviceGetHandleByPciBusId_v2"));
    lib.utilization =
        reinterpret_cast<UtilizationFn>(dlsym(handle, "nvmlDeviceGetUtilizationRates"));
    lib.power_usage = reinterpret_cast<PowerFn>(dlsym(handle, "nvmlDeviceGetPowerUsage"));
    lib.power_limit = reinterpret_cast<PowerFn>(dlsym(handle, "nvmlDeviceGetEnforcedPowerLimit"));
    if (!init || !lib.handle_by_bus_id || !lib.utilization || !lib.power_usage ||
        !lib.power_limit) {
      lib.error = "libnvidia-ml.so.1 lacks the NVML functions used (an old driver?)";
      return;
    }
    if (const int rc = init(); rc != 0)
      lib.error = "nvmlInit_v2 failed with NVML error " + std::to_string(rc);
  });
  return lib;
}

}  // namespace

std::string nvml_unavailable_reason() {
#if STUDIO_WITH_TORCH_CUDA
  return nvml().error;
#else
  return "this engine was built without CUDA";
#endif
}

std::optional<GpuActivity> gpu_activity(int cuda_device) {
#if STUDIO_WITH_TORCH_CUDA
  if (cuda_device < 0) return std::nullopt;
  const Nvml& lib = nvml();
  if (!lib.error.empty()) return std::nullopt;
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(cuda_device);
  NvmlDevice dev = nullptr;
  const std::string bus = pci_bus_id(prop->pciDomainID, prop->pciBusID, prop->pciDeviceID);
  if (lib.handle_by_bus_id(bus.c_str(), &dev) != 0) return std::nullopt;
  NvmlUtilization util{};
  unsigned int power = 0, limit = 0;
  if (lib.utilization(dev, &util) != 0 || lib.power_usage(dev, &power) != 0) return std::nullopt;
  GpuActivity out;
  out.util_percent = util.gpu;
  out.power_w = power / 1000.0;
  out.power_limit_w = lib.power_limit(dev, &limit) == 0 ? limit / 1000.0 : 0.0;
  return out;
#else
  (void)cuda_device;
  return std::nullopt;
#endif
}

}  // namespace studio::trainer
