#pragma once
// GPU utilisation and power of a rank's device, from NVML (libnvidia-ml.so.1, the driver's
// library, opened at run time: the engine neither links nor needs it, and reports nothing where it
// is missing). The device is found by its PCI bus id, so CUDA_VISIBLE_DEVICES renumbering does not
// matter.
#include <optional>
#include <string>

namespace studio::trainer {

struct GpuActivity {
  double util_percent = 0;   // share of the last sample period (1/6 s to 1 s) a kernel ran
  double power_w = 0;        // board power draw now
  double power_limit_w = 0;  // the enforced power limit
};

// nullopt on a CPU run, a CPU build, or without NVML (the reason: nvml_unavailable_reason()).
std::optional<GpuActivity> gpu_activity(int cuda_device);
// Why gpu_activity() returns nothing, once asked ("" when NVML works).
std::string nvml_unavailable_reason();

// "0000:17:00.0" from the PCI domain, bus and device numbers (NVML's bus id form).
std::string pci_bus_id(int domain, int bus, int device);

}  // namespace studio::trainer
