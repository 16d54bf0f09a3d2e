#pragma once
// What a GPU session brings back for offline analysis (scripts/gpu-check.sh --perf): a Kineto
// trace of a few steps (LibTorch's C++ profiler: CPU ops, and on CUDA every kernel, copy and
// synchronisation; open it in Perfetto or summarise it with bench/profile/trace_table.py) and a
// CUDA caching-allocator snapshot with its allocation history (every alloc and free with its
// C++ stack; bench/profile/memory_table.py replays it to the peak, or PyTorch's memory_viz
// draws it).
#include <cstdint>
#include <functional>
#include <string>

#include <torch/torch.h>

namespace studio::trainer {

// Starts a trace of this process (CPU ops; with `cuda`, the CUDA activity too). One at a time.
void start_trace(bool cuda);
// Stops the trace started above and writes it as Chrome trace JSON to `path`.
void save_trace(const std::string& path);

// Starts recording the CUDA allocator's history (allocations and frees with C++ stacks, at most
// `max_entries`). Returns false with `error` set where that cannot be done (no CUDA build, no
// device).
bool start_cuda_memory_history(std::string& error, size_t max_entries = 200000);
// Writes the allocator's snapshot (its segments now, and the history since the start above) as
// PyTorch's pickled snapshot to `path` and stops recording. False with `error` set on failure.
bool save_cuda_memory_snapshot(const std::string& path, std::string& error);

// STUDIO_CUDA_MEMORY_SNAPSHOT=PATH (CUDA runs of studio-train): the allocator's history from
// construction until step `save_after` ends, saved as a snapshot at PATH (rank r > 0:
// PATH.rank<r>); without the variable, or not on CUDA, nothing. What happened is told to `log`
// (level, line), or to stderr once the run is over.
class CudaMemorySnapshot {
 public:
  using Log = std::function<void(const std::string& level, const std::string& line)>;
  CudaMemorySnapshot(const torch::Device& device, int rank, int64_t save_after, Log log);
  ~CudaMemorySnapshot();
  void after_step(int64_t step);

 private:
  void save(bool to_log);
  std::string path_;
  int64_t save_after_ = 0;
  Log log_;
};

}  // namespace studio::trainer
