#pragma once
// The one place that knows which LibTorch we build against: Debian's 1.13 (CPU) on developer
// machines and CI, PyTorch 2.x's LibTorch with CUDA on the GPU machines. Everything that differs
// between them is decided here, so the rest of the engine has no version checks of its own.

#include <cstddef>

#include <torch/version.h>

#include <ATen/Context.h>

// Set by CMake (PUBLIC on studio_trainer): 1 when LibTorch was built with CUDA.
#ifndef STUDIO_WITH_TORCH_CUDA
#define STUDIO_WITH_TORCH_CUDA 0
#endif

#define STUDIO_TORCH_VERSION_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||                 \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// at::scaled_dot_product_attention exists from 2.0 on (1.13 has no fused attention at all).
#define STUDIO_TORCH_HAS_SDPA STUDIO_TORCH_VERSION_AT_LEAST(2, 0)
// Its FlashAttention backend needs both that and CUDA; whether the device supports it is a
// runtime question (sm80+), answered by the dispatcher, not here.
// The flash-attention ops take an explicit `scale` from 2.1 on; the engine needs it.
#define STUDIO_TORCH_HAS_FLASH_SDPA (STUDIO_TORCH_VERSION_AT_LEAST(2, 1) && STUDIO_WITH_TORCH_CUDA)

// c10d: from 2.0 on the Gloo/NCCL process groups derive from c10d::Backend (ProcessGroup became
// a dispatcher over backends); in 1.13 they derive from c10d::ProcessGroup. Both have the same
// collective methods. STUDIO_HAVE_C10D_GLOO is set by CMake when the Gloo headers were found.
#ifndef STUDIO_HAVE_C10D_GLOO
#define STUDIO_HAVE_C10D_GLOO 0
#endif
#define STUDIO_TORCH_C10D_BACKEND_BASE STUDIO_TORCH_VERSION_AT_LEAST(2, 0)

namespace studio::trainer::compat {

// Index of the whole-device entry in the caching allocator's per-pool stat arrays. The enum
// naming it (StatType::AGGREGATE) moved between namespaces across 2.x, its value never did.
constexpr std::size_t kAggregateStat = 0;

// Initialises CUDA in ATen (device count, caching allocator) once. 2.6 replaced lazyInitCUDA()
// with the device-generic lazyInitDevice() and deprecated the old name.
inline void lazy_init_cuda() {
#if STUDIO_TORCH_VERSION_AT_LEAST(2, 6)
  at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
#else
  at::globalContext().lazyInitCUDA();
#endif
}

}  // namespace studio::trainer::compat
