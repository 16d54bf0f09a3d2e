#include "studio/trainer/model/rope.h"

#include <cmath>
#include <stdexcept>

namespace studio::trainer {
namespace {

constexpr double kPi = 3.14159265358979323846;

// Each formula below uses the same tensor operations in the same order as
// transformers/modeling_rope_utils.py, so that the fp32 results agree bit for bit
// (e.g. Python's `1.0 / t` is t.reciprocal() * 1.0, and `base ** t` is pow(Scalar, Tensor)).

// base ** (arange(0, dim, 2).float() / dim)
torch::Tensor position_frequencies(double base, int64_t dim) {
  const torch::Tensor exponent = torch::arange(0, dim, 2, torch::kLong).to(torch::kFloat) / dim;
  return torch::pow(base, exponent);
}

torch::Tensor default_inv_freq(double base, int64_t dim) {
  return torch::reciprocal(position_frequencies(base, dim));
}

// Llama 3.1: long wavelengths (beyond original/low_freq_factor) are interpolated by `factor`,
// short ones (below original/high_freq_factor) kept, and the band between blended smoothly.
torch::Tensor llama3_inv_freq(const studio::ModelInfo& info, int64_t dim) {
  const auto& r = info.rope;
  const torch::Tensor inv_freq = default_inv_freq(info.rope_theta, dim);
  const double old_context = double(r.original_max_position_embeddings);
  const double low_freq_wavelen = old_context / r.low_freq_factor;
  const double high_freq_wavelen = old_context / r.high_freq_factor;
  const torch::Tensor wavelen = torch::reciprocal(inv_freq) * (2 * kPi);
  torch::Tensor scaled = torch::where(wavelen > low_freq_wavelen, inv_freq / r.factor, inv_freq);
  const torch::Tensor smooth = (torch::reciprocal(wavelen) * old_context - r.low_freq_factor) /
                               (r.high_freq_factor - r.low_freq_factor);
  const torch::Tensor smoothed = (1 - smooth) * scaled / r.factor + smooth * scaled;
  const torch::Tensor medium =
      (wavelen >= high_freq_wavelen).logical_and(wavelen <= low_freq_wavelen);
  return torch::where(medium, smoothed, scaled);
}

double yarn_get_mscale(double scale, double mscale) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

// The dimension index at which a frequency completes `rotations` turns over `context` tokens.
double yarn_correction_dim(double rotations, int64_t dim, double base, double context) {
  return (double(dim) * std::log(context / (rotations * 2 * kPi))) / (2 * std::log(base));
}

// YaRN: dimensions that rotate more than beta_fast times over the original context keep their
// frequency (extrapolation), those below beta_slow are divided by factor (interpolation), and a
// linear ramp blends the ones between.
RopeFrequencies yarn(const studio::ModelInfo& info, int64_t dim) {
  const auto& r = info.rope;
  const double base = info.rope_theta;
  const double context =
      double(r.original_max_position_embeddings > 0 ? r.original_max_position_embeddings
                                                    : info.max_position_embeddings);
  double attention = 0;
  if (r.attention_factor)
    attention = *r.attention_factor;
  else if (r.mscale != 0 && r.mscale_all_dim != 0)
    attention = yarn_get_mscale(r.factor, r.mscale) / yarn_get_mscale(r.factor, r.mscale_all_dim);
  else
    attention = yarn_get_mscale(r.factor, 1.0);

  double low = yarn_correction_dim(r.beta_fast, dim, base, context);
  double high = yarn_correction_dim(r.beta_slow, dim, base, context);
  if (r.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;  // HF: prevent a division by zero

  const torch::Tensor pos_freqs = position_frequencies(base, dim);
  const torch::Tensor extrapolation = torch::reciprocal(pos_freqs);
  const torch::Tensor interpolation = torch::reciprocal(r.factor * pos_freqs);
  const torch::Tensor ramp =
      ((torch::arange(dim / 2, torch::kFloat) - low) / (high - low)).clamp(0, 1);
  const torch::Tensor extrapolation_factor = 1 - ramp;
  return {interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor,
          attention};
}

// Dynamic NTK: the base grows with the sequence length past max_position_embeddings.
torch::Tensor dynamic_inv_freq(const studio::ModelInfo& info, int64_t dim, int64_t seq_len) {
  const double max_pos = double(info.max_position_embeddings);
  const double len = std::max(double(seq_len), max_pos);
  const double factor = info.rope.factor;
  const double base = info.rope_theta * std::pow((factor * len / max_pos) - (factor - 1),
                                                 double(dim) / double(dim - 2));
  return default_inv_freq(base, dim);
}

// Phi-3's longrope: the base frequencies divided per frequency by the long factors when the
// sequence is longer than the pretraining context, else by the short ones; cos/sin scaled by
// the attention factor either way.
RopeFrequencies longrope(const studio::ModelInfo& info, int64_t dim, int64_t seq_len) {
  const auto& r = info.rope;
  const double original = double(r.original_max_position_embeddings);
  double attention = 1.0;
  if (r.attention_factor)
    attention = *r.attention_factor;
  else if (r.factor > 1.0)
    attention = std::sqrt(1 + std::log(r.factor) / std::log(original));
  const std::vector<double>& ext =
      seq_len > r.original_max_position_embeddings ? r.long_factor : r.short_factor;
  TORCH_CHECK(int64_t(ext.size()) * 2 == dim, "rope: longrope has ", ext.size(),
              " factors for ", dim, " rotary dimensions");
  const torch::Tensor factors =
      torch::tensor(std::vector<float>(ext.begin(), ext.end()), torch::kFloat);
  return {torch::reciprocal(factors * position_frequencies(info.rope_theta, dim)), attention};
}

}  // namespace

RopeFrequencies rope_frequencies(const studio::ModelInfo& info, int64_t seq_len) {
  const int64_t dim = info.rotary_dim();
  if (dim <= 0 || dim % 2 != 0)
    throw std::invalid_argument("rope: the rotary dimensions (head_dim x partial_rotary_factor) "
                                "must be positive and even, got " +
                                std::to_string(dim));
  const std::string& type = info.rope_scaling;
  if (type.empty()) return {default_inv_freq(info.rope_theta, dim), 1.0};
  if (type == "linear") return {default_inv_freq(info.rope_theta, dim).div_(info.rope.factor), 1.0};
  if (type == "dynamic") {
    if (info.max_position_embeddings <= 0)
      throw std::invalid_argument("rope: dynamic scaling needs max_position_embeddings");
    return {dynamic_inv_freq(info, dim, seq_len), 1.0};
  }
  if (type == "llama3") return {llama3_inv_freq(info, dim), 1.0};
  if (type == "yarn") return yarn(info, dim);
  if (type == "longrope") return longrope(info, dim, seq_len);
  throw std::invalid_argument(
      "rope: rope_scaling type " + type +
      " is not supported (allowed: default, linear, dynamic, llama3, yarn, longrope)");
}

RopeFrequencies rope_local_frequencies(const studio::ModelInfo& info) {
  return {default_inv_freq(info.rope_local_theta, info.rotary_dim()), 1.0};
}

bool rope_depends_on_length(const studio::ModelInfo& info) {
  return info.rope_scaling == "dynamic" || info.rope_scaling == "longrope";
}

std::pair<torch::Tensor, torch::Tensor> rope_cos_sin(const RopeFrequencies& freqs,
                                                     const torch::Tensor& position_ids) {
  TORCH_CHECK(position_ids.dim() == 2, "rope_cos_sin: position_ids must be [B, S], got ",
              position_ids.sizes());
  const int64_t batch = position_ids.size(0);
  // HF: inv_freq[None, :, None] @ position_ids[:, None, :] in fp32, then transposed.
  const torch::Tensor inv = freqs.inv_freq.to(position_ids.device(), torch::kFloat)
                                .view({1, -1, 1})
                                .expand({batch, -1, 1});
  const torch::Tensor pos = position_ids.to(torch::kFloat).unsqueeze(1);
  const torch::Tensor angles = torch::matmul(inv, pos).transpose(1, 2);
  const torch::Tensor emb = torch::cat({angles, angles}, -1);
  return {emb.cos() * freqs.attention_scaling, emb.sin() * freqs.attention_scaling};
}

torch::Tensor rotate_half(const torch::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

torch::Tensor rotate_pairs(const torch::Tensor& x) {
  const torch::Tensor even = x.slice(-1, 0, x.size(-1), 2), odd = x.slice(-1, 1, x.size(-1), 2);
  return torch::stack({-odd, even}, -1).flatten(-2);
}

torch::Tensor interleave_cos_sin(const torch::Tensor& cos_or_sin) {
  const int64_t rotary = cos_or_sin.size(-1);
  return cos_or_sin.narrow(-1, 0, rotary / 2).repeat_interleave(2, -1);
}

torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                         bool interleaved) {
  TORCH_CHECK(x.dim() == 4 && cos.dim() == 3 && x.size(0) == cos.size(0) &&
                  x.size(2) == cos.size(1) && cos.size(2) <= x.size(3) && cos.size(2) % 2 == 0,
              "apply_rope: x must be [B, H, S, D] and cos/sin [B, S, R] with R <= D even, got ",
              x.sizes(), " and ", cos.sizes());
  // Computed on [B, S, H, D], the projections' own layout (x is normally its transposed view),
  // and handed back as the same view: whatever the path, the result keeps that layout, so the
  // attention's output is laid out [B, S, H, D] too and o_proj reads it without a copy.
  const torch::Tensor xs = x.transpose(1, 2);
  const torch::Tensor c = cos.to(x.scalar_type()).unsqueeze(2);
  const torch::Tensor s = sin.to(x.scalar_type()).unsqueeze(2);
  const int64_t rotary = c.size(-1);
  const auto rotate = [interleaved](const torch::Tensor& t) {
    return interleaved ? rotate_pairs(t) : rotate_half(t);
  };
  if (rotary == x.size(-1)) return (xs * c + rotate(xs) * s).transpose(1, 2);
  const torch::Tensor rot = xs.narrow(-1, 0, rotary);
  return torch::cat({rot * c + rotate(rot) * s, xs.narrow(-1, rotary, x.size(-1) - rotary)}, -1)
      .transpose(1, 2);
}

}  // namespace studio::trainer
