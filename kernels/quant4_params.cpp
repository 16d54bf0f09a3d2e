#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "studio/kernels/quant4.h"

namespace studio::kernels {

const char* quant4_type_name(Quant4Type type) {
  switch (type) {
    case Quant4Type::kNf4:
      return "nf4";
    case Quant4Type::kFp4:
      return "fp4";
  }
  return "unknown";
}

const std::array<float, 16>& quant4_code(Quant4Type type) {
  // NF4 (QLoRA, Dettmers et al. 2023, appendix E): the quantiles of N(0, 1) normalised to
  // [-1, 1], with an exact 0; sorted, so that index = rank.
  static const std::array<float, 16> nf4 = {
      -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
      -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
      0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
      0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f};
  // FP4 (1 sign, 2 exponent, 1 mantissa bit, bias 2) in bit-pattern order, divided by its
  // largest magnitude (12) in fp32.
  static const std::array<float, 16> fp4 = [] {
    const float raw[16] = {0.0f,  0.0625f,  8.0f,  12.0f,  4.0f,  6.0f,  2.0f,  3.0f,
                           -0.0f, -0.0625f, -8.0f, -12.0f, -4.0f, -6.0f, -2.0f, -3.0f};
    std::array<float, 16> v{};
    for (size_t i = 0; i < 16; ++i) v[i] = raw[i] / 12.0f;
    return v;
  }();
  return type == Quant4Type::kNf4 ? nf4 : fp4;
}

namespace {

// torch.linspace(start, end, steps) in fp32 (ATen's CPU kernel: the first half counts up from
// start, the second half down from end, with an fp32 step).
std::vector<float> linspace_f32(float start, float end, int steps) {
  std::vector<float> out(static_cast<size_t>(steps));
  if (steps == 1) {
    out[0] = start;
    return out;
  }
  const float step = (end - start) / static_cast<float>(steps - 1);
  const int halfway = steps / 2;
  for (int i = 0; i < steps; ++i)
    out[static_cast<size_t>(i)] = i < halfway ? start + step * static_cast<float>(i)
                                              : end - step * static_cast<float>(steps - i - 1);
  return out;
}

}  // namespace

const std::array<float, 256>& dynamic_map() {
  // The dynamic data type of Dettmers (2016) as bitsandbytes builds it (signed, at most 7
  // exponent bits, 8 bits in all): for exponent i = 0..6 the 2^i midpoints of an fp32 linspace
  // over [0.1, 1] with 2^i + 1 points, times 10^(i - 6) (both signs), then 0 and 1, sorted.
  static const std::array<float, 256> map = [] {
    std::vector<float> data;
    for (int i = 0; i < 7; ++i) {
      const auto bounds = linspace_f32(0.1f, 1.0f, (1 << i) + 1);
      const float scale = static_cast<float>(std::pow(10.0, i - 6));
      for (size_t k = 0; k + 1 < bounds.size(); ++k) {
        const float mean = (bounds[k] + bounds[k + 1]) / 2.0f;
        data.push_back(scale * mean);
        data.push_back(-scale * mean);
      }
    }
    data.push_back(0.0f);
    data.push_back(1.0f);
    std::array<float, 256> out{};
    std::sort(data.begin(), data.end());
    for (size_t i = 0; i < 256; ++i) out[i] = data[i];
    return out;
  }();
  return map;
}

std::int64_t quant4_blocks(std::int64_t n, std::int64_t blocksize) {
  return blocksize > 0 ? (n + blocksize - 1) / blocksize : 0;
}

void check_dequant4_params(const Dequant4Params& p) {
  auto fail = [](const std::string& what) {
    throw std::invalid_argument("dequantize4: " + what);
  };
  if (p.n < 0) fail("n must not be negative");
  if (p.blocksize <= 0 || p.blocksize % 2 != 0) fail("blocksize must be a positive even number");
  if (p.type != Quant4Type::kNf4 && p.type != Quant4Type::kFp4) fail("unknown quantization type");
  if (p.dtype != DType::kFloat32 && p.dtype != DType::kBFloat16) fail("unknown output dtype");
  if (p.n == 0) return;
  if (!p.packed) fail("packed is null");
  if (!p.out) fail("out is null");
  const bool nested = p.qabsmax != nullptr;
  if (!nested && !p.absmax) fail("absmax is null (and no qabsmax for double quantization)");
  if (nested && (!p.absmax2 || !p.dynamic_code)) fail("double quantization needs absmax2 and dynamic_code");
  if (nested && p.blocksize2 <= 0) fail("blocksize2 must be positive");
  if (!std::isfinite(p.offset)) fail("offset is not finite");
}

}  // namespace studio::kernels
