#include "studio/trainer/metrics/profile_capture.h"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <stdexcept>

#if STUDIO_WITH_TORCH_CUDA
#include <torch/csrc/cuda/memory_snapshot.h>
#include <torch/cuda.h>
#endif

namespace studio::trainer {

namespace prof = torch::profiler::impl;

void start_trace(bool cuda) {
  std::set<prof::ActivityType> activities{prof::ActivityType::CPU};
  if (cuda) activities.insert(prof::ActivityType::CUDA);
  // Input shapes on: the trace table groups GEMMs by shape, which says which layer they are.
  const prof::ProfilerConfig config(prof::ProfilerState::KINETO, /*report_input_shapes=*/true,
                                    /*profile_memory=*/false, /*with_stack=*/false);
  torch::autograd::profiler::prepareProfiler(config, activities);
  torch::autograd::profiler::enableProfiler(config, activities);
}

void save_trace(const std::string& path) {
  auto result = torch::autograd::profiler::disableProfiler();
  if (!result) throw std::runtime_error("save_trace: no trace was being recorded");
  result->save(path);
}

bool start_cuda_memory_history(std::string& error, size_t max_entries) {
#if STUDIO_WITH_TORCH_CUDA
  if (!torch::cuda::is_available()) {
    error = "no CUDA device";
    return false;
  }
  try {
    // Strings through std::optional: a bare "all" would pick the bool overload.
    torch::cuda::_record_memory_history(std::optional<std::string>("all"),
                                        std::optional<std::string>("all"), "cpp", max_entries);
    return true;
  } catch (const std::exception& e) {
    error = e.what();
    return false;
  }
#else
  (void)max_entries;
  error = "this build has no CUDA (LibTorch without CUDA)";
  return false;
#endif
}

bool save_cuda_memory_snapshot(const std::string& path, std::string& error) {
#if STUDIO_WITH_TORCH_CUDA
  try {
    const std::string pickled = torch::cuda::_memory_snapshot_pickled();
    torch::cuda::_record_memory_history(std::optional<std::string>());
    const std::string tmp = path + ".part";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(pickled.data(), static_cast<std::streamsize>(pickled.size()));
      if (!out) {
        error = "cannot write " + tmp;
        return false;
      }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      error = "cannot rename " + tmp + " to " + path;
      return false;
    }
    return true;
  } catch (const std::exception& e) {
    error = e.what();
    return false;
  }
#else
  (void)path;
  error = "this build has no CUDA (LibTorch without CUDA)";
  return false;
#endif
}

CudaMemorySnapshot::CudaMemorySnapshot(const torch::Device& device, int rank, int64_t save_after,
                                       Log log)
    : save_after_(save_after), log_(std::move(log)) {
  const char* path = std::getenv("STUDIO_CUDA_MEMORY_SNAPSHOT");
  if (!path || !*path || !device.is_cuda()) return;
  path_ = std::string(path) + (rank > 0 ? ".rank" + std::to_string(rank) : std::string());
  std::string error;
  if (!start_cuda_memory_history(error)) {
    std::fprintf(stderr, "STUDIO_CUDA_MEMORY_SNAPSHOT: not recorded: %s\n", error.c_str());
    path_.clear();
  }
}

CudaMemorySnapshot::~CudaMemorySnapshot() { save(/*to_log=*/false); }

void CudaMemorySnapshot::after_step(int64_t step) {
  if (step >= save_after_) save(/*to_log=*/true);
}

void CudaMemorySnapshot::save(bool to_log) {
  if (path_.empty()) return;
  std::string error;
  const bool ok = save_cuda_memory_snapshot(path_, error);
  const std::string line = ok ? "CUDA allocator snapshot written to " + path_
                              : "CUDA allocator snapshot not written: " + error;
  if (to_log && log_)
    log_(ok ? "info" : "warning", line);
  else
    std::fprintf(stderr, "%s\n", line.c_str());
  path_.clear();
}

}  // namespace studio::trainer
