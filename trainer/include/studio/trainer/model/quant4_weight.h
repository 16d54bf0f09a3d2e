#pragma once
// QLoRA's frozen base weights: a linear layer's weight kept in bitsandbytes' blockwise 4-bit
// format (kernels/quant4.h: NF4 or FP4, optionally double-quantized), the bytes bitsandbytes
// itself would write, and dequantized on the fly where the layer runs (the CUDA kernel on a GPU,
// ATen ops elsewhere, both equal to the CPU reference). docs/ADAPTERS.md.
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "studio/kernels/quant4.h"

namespace studio::trainer {

struct Quant4Options {
  kernels::Quant4Type type = kernels::Quant4Type::kNf4;
  bool double_quant = true;
  std::int64_t blocksize = 64;
};

class Quant4Weight : public torch::CustomClassHolder {
 public:
  // Quantizes `w` (any dtype and device; its values as fp32, as bitsandbytes reads them) into
  // tensors on `device`.
  static c10::intrusive_ptr<Quant4Weight> quantize(const torch::Tensor& w, const Quant4Options& opt,
                                                   torch::Device device);

  // A weight bitsandbytes quantized itself (a checkpoint saved quantized): its tensors as stored,
  // on any device, moved to `device` (packed: the [(n + 1) / 2] bytes; absmax fp32 [blocks], or
  // with double quantization qabsmax uint8 [blocks], absmax2 fp32 [ceil(blocks / 256)], dynamic
  // fp32 [256] and offset). Throws std::invalid_argument naming the part whose size or dtype
  // does not fit `shape` and `opt`.
  static c10::intrusive_ptr<Quant4Weight> from_parts(const std::vector<std::int64_t>& shape,
                                                     const Quant4Options& opt,
                                                     const torch::Tensor& packed,
                                                     const torch::Tensor& absmax,
                                                     const torch::Tensor& qabsmax,
                                                     const torch::Tensor& absmax2,
                                                     const torch::Tensor& dynamic, double offset,
                                                     torch::Device device);

  // The weight in `dtype` (float32 or bfloat16; others through fp32) with the shape it had.
  torch::Tensor dequantize(torch::ScalarType dtype) const;
  // Bytes held (packed values and statistics).
  std::int64_t bytes() const;
  const std::vector<std::int64_t>& shape() const { return shape_; }
  const Quant4Options& options() const { return opt_; }

  torch::Tensor packed, absmax, qabsmax, absmax2, dynamic;  // as kernels/quant4_torch.h
  double offset = 0;

 private:
  std::vector<std::int64_t> shape_;
  std::int64_t n_ = 0;
  Quant4Options opt_;
};

// bitsandbytes' create_dynamic_map(signed=True) built as it builds it, with LibTorch's own
// linspace (the same kernels as the torch bitsandbytes runs on): fp32 [256] on the CPU.
const torch::Tensor& bnb_dynamic_map();

// y = x W^T with W = q's weight, which gets no gradient: the backward dequantizes again rather
// than keeping the dequantized weight from the forward (bitsandbytes' MatMul4Bit does the same).
torch::Tensor quant4_linear(const torch::Tensor& x, const c10::intrusive_ptr<Quant4Weight>& q);

}  // namespace studio::trainer
