// Adapts tensors to the 4-bit dequantization kernel: checks what the core cannot see (device,
// dtype, sizes, contiguity) and enqueues on PyTorch's current stream.
#include "studio/kernels/quant4_torch.h"

#include "studio/kernels/quant4.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace studio::kernels {
namespace {

void check(const at::Tensor& t, const char* name, at::ScalarType dtype, std::int64_t numel,
           const at::Tensor& like) {
  TORCH_CHECK(t.defined(), "dequantize4: ", name, " is undefined");
  TORCH_CHECK(t.is_cuda() && t.device() == like.device(), "dequantize4: ", name,
              " must be on ", like.device(), ", got ", t.device());
  TORCH_CHECK(t.scalar_type() == dtype, "dequantize4: ", name, " must be ", dtype, ", got ",
              t.scalar_type());
  TORCH_CHECK(t.is_contiguous(), "dequantize4: ", name, " must be contiguous");
  TORCH_CHECK(t.numel() == numel, "dequantize4: ", name, " has ", t.numel(), " values, expected ",
              numel);
}

}  // namespace

at::Tensor dequantize4(const Quant4Tensors& q, at::ScalarType dtype) {
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kBFloat16,
              "dequantize4: the output must be float32 or bfloat16, got ", dtype);
  const std::int64_t blocks = quant4_blocks(q.n, q.blocksize);
  check(q.packed, "packed", at::kByte, (q.n + 1) / 2, q.packed);
  const bool nested = q.qabsmax.defined();
  if (nested) {
    check(q.qabsmax, "qabsmax", at::kByte, blocks, q.packed);
    check(q.absmax2, "absmax2", at::kFloat, quant4_blocks(blocks, 256), q.packed);
    check(q.dynamic, "dynamic", at::kFloat, 256, q.packed);
  } else {
    check(q.absmax, "absmax", at::kFloat, blocks, q.packed);
  }
  const c10::cuda::CUDAGuard guard(q.packed.device());
  auto out = at::empty({q.n}, q.packed.options().dtype(dtype));
  Dequant4Params p;
  p.packed = q.packed.data_ptr<std::uint8_t>();
  if (nested) {
    p.qabsmax = q.qabsmax.data_ptr<std::uint8_t>();
    p.absmax2 = q.absmax2.data_ptr<float>();
    p.dynamic_code = q.dynamic.data_ptr<float>();
    p.offset = static_cast<float>(q.offset);
  } else {
    p.absmax = q.absmax.data_ptr<float>();
  }
  p.out = out.data_ptr();
  p.n = q.n;
  p.blocksize = q.blocksize;
  p.type = static_cast<Quant4Type>(q.type);
  p.dtype = dtype == at::kFloat ? DType::kFloat32 : DType::kBFloat16;
  dequantize4_cuda(p, at::cuda::getCurrentCUDAStream().stream());
  return out;
}

}  // namespace studio::kernels
