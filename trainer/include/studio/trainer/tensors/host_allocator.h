#pragma once
// The CPU allocator's own count of the bytes that CPU tensors hold: what a CPU run reports per
// rank as "allocated" (beside RSS, which also counts code, mapped files and the allocator's
// cache), and what the memory estimate is held to in the tests. Allocations made while an
// OffloadScope lives on the allocating thread are counted apart: model states a GPU run would
// keep in host memory (optimizer offload), so that a CPU run can show the "device side" alone.
#include <cstdint>

namespace studio::trainer {

// Wraps LibTorch's CPU allocator with the counting one (once per process; later calls do
// nothing). Tensors allocated before are not counted, nor their frees.
void install_counting_host_allocator();
bool counting_host_allocator_installed();

struct HostAllocatorStats {
  int64_t allocated = 0;  // live bytes now
  int64_t peak = 0;       // the most live bytes since install or reset_host_allocator_peak()
  int64_t offloaded = 0;  // live bytes allocated under an OffloadScope (part of `allocated`)
  int64_t device_peak = 0;  // the most live bytes outside OffloadScopes (the "device side")
};
HostAllocatorStats host_allocator_stats();
void reset_host_allocator_peak();

class OffloadScope {
 public:
  OffloadScope();
  ~OffloadScope();
  OffloadScope(const OffloadScope&) = delete;
  OffloadScope& operator=(const OffloadScope&) = delete;

 private:
  bool previous_;
};

}  // namespace studio::trainer
