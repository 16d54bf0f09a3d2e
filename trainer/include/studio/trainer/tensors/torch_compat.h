#pragma once
// The one place that knows which LibTorch we build against. Everywhere it is PyTorch 2.11 built for
// CUDA 13: the torch wheel pinned in scripts/python-requirements.txt on development machines and
// CI (no GPU), and the lent GPU machines' own PyTorch 2.11 (shared/device/README.md). What would
// differ between them is decided here, so the rest of the engine has no version checks of its
// own; today only whether CUDA is compiled in, which is a build fact, not a version one.

#include <cstddef>

#include <torch/version.h>

#include <ATen/Context.h>

// The engine uses 2.11's API (c10d::Backend, the CPU and CUDA flash-attention ops with an explicit
// scale, lazyInitDevice). An older LibTorch is refused here rather than by a wall of errors.
static_assert(TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 11),
              "SeqStudio builds against LibTorch 2.11 or newer: run scripts/setup.sh (the torch "
              "wheel) or point STUDIO_PYTHON / CMAKE_PREFIX_PATH at a PyTorch 2.11");

// Set by CMake (PUBLIC on studio_trainer): 1 when LibTorch was built with CUDA.
#ifndef STUDIO_WITH_TORCH_CUDA
#define STUDIO_WITH_TORCH_CUDA 0
#endif

// c10d's Gloo process group: set by CMake when the Gloo headers were found.
#ifndef STUDIO_HAVE_C10D_GLOO
#define STUDIO_HAVE_C10D_GLOO 0
#endif

namespace studio::trainer::compat {

// Index of the whole-device entry in the caching allocator's per-pool stat arrays
// (c10::CachingAllocator::StatType::AGGREGATE).
constexpr std::size_t kAggregateStat = 0;

// Initialises CUDA in ATen (device count, caching allocator) once.
inline void lazy_init_cuda() { at::globalContext().lazyInitDevice(c10::DeviceType::CUDA); }

}  // namespace studio::trainer::compat
