#include "studio/trainer/tensors/host_allocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>

namespace studio::trainer {
namespace {

thread_local bool g_offload = false;

class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* inner) : inner_(inner) {}

  c10::DataPtr allocate(size_t n) override {
    c10::DataPtr dp = inner_->allocate(n);
    void* data = dp.get();
    if (!data) return dp;
    // The context stays the data pointer (as the default allocator's), so that code checking
    // for a "simple" data pointer behaves the same; the original deleter is kept in the table.
    Entry e{static_cast<int64_t>(n), g_offload, dp.get_deleter(), dp.get_context()};
    dp.release_context();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      live_[data] = e;
      allocated_ += e.bytes;
      if (e.offload) offloaded_ += e.bytes;
      peak_ = std::max(peak_, allocated_);
      device_peak_ = std::max(device_peak_, allocated_ - offloaded_);
    }
    return {data, data, &CountingAllocator::free, dp.device()};
  }

  // raw_allocate / raw_deallocate (oneDNN's workspaces) need the plain deleter: the context is
  // the data pointer, so free() is one.
  c10::DeleterFnPtr raw_deleter() const override { return &CountingAllocator::free; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  static void free(void* data) {
    Entry e;
    {
      std::lock_guard<std::mutex> lock(self()->mutex_);
      auto it = self()->live_.find(data);
      if (it == self()->live_.end()) return;  // cannot happen: every pointer came from allocate
      e = it->second;
      self()->live_.erase(it);
      self()->allocated_ -= e.bytes;
      if (e.offload) self()->offloaded_ -= e.bytes;
    }
    if (e.deleter) e.deleter(e.context);
  }

  HostAllocatorStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return {allocated_, peak_, offloaded_, device_peak_};
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    peak_ = allocated_;
    device_peak_ = allocated_ - offloaded_;
  }

  static CountingAllocator*& self() {
    static CountingAllocator* instance = nullptr;
    return instance;
  }

 private:
  struct Entry {
    int64_t bytes = 0;
    bool offload = false;
    c10::DeleterFnPtr deleter = nullptr;
    void* context = nullptr;
  };
  c10::Allocator* inner_;
  std::mutex mutex_;
  std::unordered_map<void*, Entry> live_;
  int64_t allocated_ = 0, peak_ = 0, offloaded_ = 0, device_peak_ = 0;
};

}  // namespace

void install_counting_host_allocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Never destroyed: tensors may be freed during static destruction.
    auto* counting = new CountingAllocator(c10::GetCPUAllocator());
    CountingAllocator::self() = counting;
    c10::SetCPUAllocator(counting, /*priority=*/100);
  });
}

bool counting_host_allocator_installed() { return CountingAllocator::self() != nullptr; }

HostAllocatorStats host_allocator_stats() {
  auto* a = CountingAllocator::self();
  return a ? a->stats() : HostAllocatorStats{};
}

void reset_host_allocator_peak() {
  if (auto* a = CountingAllocator::self()) a->reset_peak();
}

OffloadScope::OffloadScope() : previous_(g_offload) { g_offload = true; }
OffloadScope::~OffloadScope() { g_offload = previous_; }

}  // namespace studio::trainer
