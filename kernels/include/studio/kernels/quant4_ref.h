#pragma once
// CPU reference of bitsandbytes' blockwise formats (quant4.h says the layout): quantization, the
// double quantization of the absmax values, and dequantization. Plain loops, no CUDA, no Torch;
// what the kernel and bitsandbytes itself are checked against.

#include <cstdint>
#include <vector>

#include "studio/kernels/quant4.h"

namespace studio::kernels {

// A quantized weight: `packed` [(n + 1) / 2] and either `absmax` [blocks] (plain) or
// `qabsmax` [blocks] + `absmax2` [ceil(blocks / 256)] + `offset` (double quantization).
struct Quant4Data {
  std::vector<std::uint8_t> packed;
  std::vector<float> absmax;
  std::vector<std::uint8_t> qabsmax;
  std::vector<float> absmax2;
  float offset = 0;
  std::vector<float> dynamic;  // the map qabsmax indexes (double quantization)
  std::int64_t n = 0;
  std::int64_t blocksize = 64;
  Quant4Type type = Quant4Type::kNf4;
  bool double_quant = false;
};

// bitsandbytes' quantize_4bit (its default backend, which the CPU runs) of `n` values; with
// double_quant, then its quantize_blockwise of absmax - mean(absmax) (blocks of 256, the dynamic
// map). Throws std::invalid_argument for a blocksize that is not a positive even number.
// `dynamic` ([256], sorted): the double quantization's map (null: dynamic_map()).
Quant4Data quantize4_ref(const float* x, std::int64_t n, std::int64_t blocksize, Quant4Type type,
                         bool double_quant, const float* dynamic = nullptr);

// Double quantization of a plain `q` (its absmax values) with `offset` (bitsandbytes: torch's fp32
// mean of the absmax values, which sums in an order of its own: the engine passes torch's) and
// the sorted 256-value map `dynamic`, rounded as bitsandbytes' CPU library rounds (kCpuLut; its
// CUDA kernel's binary search may pick the other neighbour of a value next to a midpoint).
void double_quantize_ref(Quant4Data& q, float offset, const float* dynamic);

// The absmax of every block (double quantization undone).
std::vector<float> quant4_absmax_ref(const Quant4Data& q);

// x[i] = code[index_i] * absmax[block of i], in fp32.
std::vector<float> dequantize4_ref(const Quant4Data& q);

// How bitsandbytes' blockwise 8-bit quantization picks a value's code index.
enum class Blockwise8Rounding {
  // Its ATen path: the bucket of x / absmax among the code's midpoints (ties to the lower index).
  kMidpoints,
  // Its CPU library (0.50): x * (1 / absmax) to one of 65536 bins over [-1, 1], each bin's index
  // the code value nearest the bin's centre; values within ~1.5e-5 of a midpoint can land on the
  // farther neighbour. What bitsandbytes' double quantization does on a machine without a GPU.
  kCpuLut,
};

// bitsandbytes' blockwise 8-bit quantization with `code` (sorted, 256 values): per block of
// `blocksize` absmax = max |x| and each value's index as `rounding` says. `q` [n], `absmax`
// [ceil(n / blocksize)].
void quantize_blockwise8_ref(const float* x, std::int64_t n, std::int64_t blocksize,
                             const float* code, std::uint8_t* q, float* absmax,
                             Blockwise8Rounding rounding = Blockwise8Rounding::kMidpoints);

}  // namespace studio::kernels
