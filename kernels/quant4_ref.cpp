#include "studio/kernels/quant4_ref.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace studio::kernels {
namespace {

// The code's values in ascending order, with each one's index in the code, and the midpoints
// between neighbours (what bitsandbytes bucketizes the scaled values over).
struct SortedCode {
  std::vector<float> midpoints;
  std::vector<int> index_of_sorted;
};

SortedCode sorted_code(const float* code, int size) {
  std::vector<int> order(static_cast<size_t>(size));
  std::iota(order.begin(), order.end(), 0);
  // torch.argsort (not stable, but the codes have no equal values except FP4's 0 and -0, whose
  // order decides nothing: the midpoint between them is 0 either way... and bnb's code has them
  // at indices 0 and 8: argsort puts the one it meets first first, as a stable sort does).
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return code[a] < code[b]; });
  SortedCode s;
  s.index_of_sorted = order;
  for (int i = 0; i + 1 < size; ++i)
    s.midpoints.push_back((code[order[static_cast<size_t>(i)]] +
                           code[order[static_cast<size_t>(i) + 1]]) /
                          2.0f);
  return s;
}

// torch.bucketize(x, bounds, right=False): how many bounds lie strictly below x.
int bucket(float x, const std::vector<float>& bounds) {
  return static_cast<int>(std::lower_bound(bounds.begin(), bounds.end(), x) - bounds.begin());
}

void check_blocksize(std::int64_t blocksize) {
  if (blocksize <= 0 || blocksize % 2 != 0)
    throw std::invalid_argument("quantize4: blocksize must be a positive even number, got " +
                                std::to_string(blocksize));
}

// Scaled values of one block as bitsandbytes forms them: whole blocks multiply by the fp32
// reciprocal of their absmax, the short last block divides by it.
void scale_block(const float* x, std::int64_t len, bool whole, float absmax, float* out) {
  const float floor = std::max(absmax, 1e-38f);
  const float recip = 1.0f / floor;
  for (std::int64_t i = 0; i < len; ++i) {
    const float v = whole ? x[i] * recip : x[i] / floor;
    out[i] = std::clamp(v, -1.0f, 1.0f);
  }
}

}  // namespace

namespace {

// bitsandbytes' CPU lookup table: bin i of 65536 over [-1, 1] (centre -1 + 2i / 65535) holds the
// index of the first code value whose upper midpoint is not below the centre.
const std::vector<std::uint8_t>& cpu_lut(const float* code) {
  static thread_local std::vector<float> cached_code;
  static thread_local std::vector<std::uint8_t> lut;
  if (cached_code.size() == 256 && std::equal(cached_code.begin(), cached_code.end(), code))
    return lut;
  cached_code.assign(code, code + 256);
  float midpoints[255];
  for (int i = 0; i < 255; ++i) midpoints[i] = 0.5f * (code[i] + code[i + 1]);
  lut.assign(65536, 0);
  int index = 0;
  for (int i = 0; i < 65536; ++i) {
    const float centre = -1.0f + (2.0f * static_cast<float>(i)) / static_cast<float>(65535);
    while (index < 255 && midpoints[index] < centre) ++index;
    lut[static_cast<size_t>(i)] = static_cast<std::uint8_t>(index);
  }
  return lut;
}

}  // namespace

void quantize_blockwise8_ref(const float* x, std::int64_t n, std::int64_t blocksize,
                             const float* code, std::uint8_t* q, float* absmax,
                             Blockwise8Rounding rounding) {
  if (blocksize <= 0)
    throw std::invalid_argument("quantize_blockwise8: blocksize must be positive");
  // The code is sorted: its midpoints are the bounds, its positions the indices.
  std::vector<float> bounds;
  for (int i = 0; i + 1 < 256; ++i) bounds.push_back((code[i] + code[i + 1]) / 2.0f);
  std::vector<float> scaled(static_cast<size_t>(blocksize));
  for (std::int64_t b = 0, start = 0; start < n; ++b, start += blocksize) {
    const std::int64_t len = std::min(blocksize, n - start);
    float m = 0;
    for (std::int64_t i = 0; i < len; ++i) m = std::max(m, std::abs(x[start + i]));
    absmax[b] = m;
    if (rounding == Blockwise8Rounding::kCpuLut) {
      const auto& lut = cpu_lut(code);
      const float inv = 1.0f / m;
      for (std::int64_t i = 0; i < len; ++i) {
        if (m == 0.0f) {
          q[start + i] = 0;
          continue;
        }
        const float v = std::clamp(x[start + i] * inv, -1.0f, 1.0f);
        const float bin = (v + 1.0f) * 0.5f * static_cast<float>(65535) + 0.5f;
        q[start + i] = lut[static_cast<size_t>(static_cast<std::uint16_t>(bin))];
      }
      continue;
    }
    scale_block(x + start, len, len == blocksize, m, scaled.data());
    for (std::int64_t i = 0; i < len; ++i)
      q[start + i] = static_cast<std::uint8_t>(bucket(scaled[static_cast<size_t>(i)], bounds));
  }
}

Quant4Data quantize4_ref(const float* x, std::int64_t n, std::int64_t blocksize, Quant4Type type,
                         bool double_quant, const float* dynamic) {
  check_blocksize(blocksize);
  if (n < 0) throw std::invalid_argument("quantize4: n must not be negative");
  const auto& code = quant4_code(type);
  const SortedCode sorted = sorted_code(code.data(), 16);
  Quant4Data q;
  q.n = n;
  q.blocksize = blocksize;
  q.type = type;
  q.double_quant = double_quant;
  const std::int64_t blocks = quant4_blocks(n, blocksize);
  q.absmax.resize(static_cast<size_t>(blocks));
  std::vector<std::uint8_t> index(static_cast<size_t>(n + (n % 2)), 0);
  std::vector<float> scaled(static_cast<size_t>(blocksize));
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t start = b * blocksize, len = std::min(blocksize, n - start);
    float m = 0;
    for (std::int64_t i = 0; i < len; ++i) m = std::max(m, std::abs(x[start + i]));
    q.absmax[static_cast<size_t>(b)] = m;
    scale_block(x + start, len, len == blocksize, m, scaled.data());
    for (std::int64_t i = 0; i < len; ++i) {
      const int pos = bucket(scaled[static_cast<size_t>(i)], sorted.midpoints);
      index[static_cast<size_t>(start + i)] = static_cast<std::uint8_t>(
          type == Quant4Type::kNf4 ? pos : sorted.index_of_sorted[static_cast<size_t>(pos)]);
    }
  }
  // An odd count pads a 0.0 value, which bitsandbytes bucketizes like any other.
  if (n % 2) {
    const int pos = bucket(0.0f, sorted.midpoints);
    index.back() = static_cast<std::uint8_t>(
        type == Quant4Type::kNf4 ? pos : sorted.index_of_sorted[static_cast<size_t>(pos)]);
  }
  q.packed.resize(index.size() / 2);
  for (size_t i = 0; i < q.packed.size(); ++i)
    q.packed[i] = static_cast<std::uint8_t>((index[2 * i] << 4) | index[2 * i + 1]);
  if (!double_quant) return q;
  // The mean in double, rounded once (torch's fp32 mean, which bitsandbytes takes, sums in a
  // tree of its own and may differ in the last bits: double_quantize_ref takes it as given).
  double sum = 0;
  for (float a : q.absmax) sum += a;
  const float offset = blocks > 0 ? static_cast<float>(sum / static_cast<double>(blocks)) : 0.0f;
  double_quantize_ref(q, offset, dynamic ? dynamic : dynamic_map().data());
  return q;
}

void double_quantize_ref(Quant4Data& q, float offset, const float* dynamic) {
  const auto blocks = static_cast<std::int64_t>(q.absmax.size());
  q.double_quant = true;
  q.offset = offset;
  std::vector<float> centred(q.absmax.size());
  for (size_t i = 0; i < centred.size(); ++i) centred[i] = q.absmax[i] - q.offset;
  q.qabsmax.resize(centred.size());
  q.absmax2.resize(static_cast<size_t>(quant4_blocks(blocks, 256)));
  q.dynamic.assign(dynamic, dynamic + 256);
  quantize_blockwise8_ref(centred.data(), blocks, 256, dynamic, q.qabsmax.data(), q.absmax2.data(),
                          Blockwise8Rounding::kCpuLut);
  q.absmax.clear();
}

std::vector<float> quant4_absmax_ref(const Quant4Data& q) {
  if (!q.double_quant) return q.absmax;
  const auto& dyn = q.dynamic;
  std::vector<float> out(q.qabsmax.size());
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = dyn[q.qabsmax[i]] * q.absmax2[i / 256] + q.offset;
  return out;
}

std::vector<float> dequantize4_ref(const Quant4Data& q) {
  const auto& code = quant4_code(q.type);
  const std::vector<float> absmax = quant4_absmax_ref(q);
  std::vector<float> out(static_cast<size_t>(q.n));
  for (std::int64_t i = 0; i < q.n; ++i) {
    const std::uint8_t byte = q.packed[static_cast<size_t>(i / 2)];
    const int index = (i % 2 == 0) ? byte >> 4 : byte & 0xF;
    out[static_cast<size_t>(i)] = code[static_cast<size_t>(index)] *
                                  absmax[static_cast<size_t>(i / q.blocksize)];
  }
  return out;
}

}  // namespace studio::kernels
