#pragma once
// bitsandbytes' blockwise 4-bit weight format (QLoRA: NF4 and FP4, with or without double
// quantization), byte for byte as bitsandbytes 0.50 writes it, and the dequantization kernel.
//
// A weight of n values is cut into blocks of `blocksize` consecutive values (row-major order; the
// last block may be short). Each block keeps absmax = max |x| and every value becomes the 4-bit
// index of the code value nearest to x / absmax (ties to the lower code: bitsandbytes'
// bucketize over the midpoints of the sorted code). Two indices per byte, the first in the high
// nibble: byte i holds values 2i (bits 7-4) and 2i + 1 (bits 3-0); an odd n pads a zero index.
// Double quantization (bnb_4bit_use_double_quant) stores the absmax values themselves in 8 bits:
// offset = mean(absmax); absmax - offset is quantized blockwise (blocks of 256) with the
// 256-value signed dynamic map, keeping an fp32 absmax2 per block of 256. Dequantized:
// x = code4[index] * absmax, absmax = dynamic[qabsmax] * absmax2 + offset.
//
// No CUDA headers here (the stream type is the driver's opaque handle, as in rmsnorm.h).

#include <array>
#include <cstddef>
#include <cstdint>

#include "studio/kernels/rmsnorm.h"  // DType, Stream, STUDIO_KERNELS_WITH_CUDA

namespace studio::kernels {

enum class Quant4Type : int { kNf4 = 0, kFp4 = 1 };

const char* quant4_type_name(Quant4Type type);  // "nf4", "fp4"

// The 16 values of a 4-bit code, by index, normalised to [-1, 1] (bitsandbytes' get_4bit_type).
const std::array<float, 16>& quant4_code(Quant4Type type);

// The signed dynamic map of create_dynamic_map(signed=True): the 256 sorted values double
// quantization stores the absmax values in, its fp32 linspace computed point by point.
// bitsandbytes builds it with torch.linspace, whose vectorised CPU kernel rounds some points
// differently (by one ulp, depending on the vector width): the engine builds bitsandbytes' own
// with LibTorch's linspace (trainer/model/quant4_weight.h, bnb_dynamic_map) and passes it in.
const std::array<float, 256>& dynamic_map();

// Blocks of `blocksize` over n values: ceil(n / blocksize).
std::int64_t quant4_blocks(std::int64_t n, std::int64_t blocksize);

// Dequantization of n values into `out` (dtype kFloat32 or kBFloat16; the product is formed in
// fp32 and rounded once). Without double quantization `absmax` is fp32 [blocks] and the qabsmax
// fields are null; with it `qabsmax` [blocks] uint8, `absmax2` [ceil(blocks / 256)] fp32 and
// `offset` describe the absmax values.
struct Dequant4Params {
  const std::uint8_t* packed = nullptr;  // [(n + 1) / 2]
  const float* absmax = nullptr;
  const std::uint8_t* qabsmax = nullptr;
  const float* absmax2 = nullptr;
  float offset = 0;
  const float* dynamic_code = nullptr;   // [256] on the device (double quantization only)
  void* out = nullptr;
  std::int64_t n = 0;
  std::int64_t blocksize = 64;
  std::int64_t blocksize2 = 256;
  Quant4Type type = Quant4Type::kNf4;
  DType dtype = DType::kFloat32;
};

// Throws std::invalid_argument naming the field for null pointers, n < 0, a blocksize that is
// not a positive even number, or an unknown type or dtype.
void check_dequant4_params(const Dequant4Params& p);

#if STUDIO_KERNELS_WITH_CUDA
// One launch on `stream`; every pointer on the device. Throws KernelError on a launch failure.
void dequantize4_cuda(const Dequant4Params& p, Stream stream);
#endif

}  // namespace studio::kernels
