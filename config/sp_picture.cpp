#include "studio/config/sp_picture.h"

#include <algorithm>

#include "studio/config/validate.h"

namespace studio {
namespace {

// The part [from, to) of ring rank r's piece c_r ++ c_{2g-1-r} (piece fractions in [0, 1)) as
// sequence spans.
std::vector<SeqSpan> piece_part(int r, int g, double from, double to) {
  const double chunk = 1.0 / (2.0 * g);
  // The piece: first half c_r, second half c_{2g-1-r}.
  const SeqSpan halves[2] = {{r * chunk, (r + 1) * chunk},
                             {(2 * g - 1 - r) * chunk, (2 * g - r) * chunk}};
  std::vector<SeqSpan> out;
  for (int h = 0; h < 2; ++h) {
    const double lo = std::max(from, 0.5 * h), hi = std::min(to, 0.5 * (h + 1));
    if (hi <= lo) continue;
    const double a = halves[h].begin + (lo - 0.5 * h) * 2 * chunk;
    const double b = halves[h].begin + (hi - 0.5 * h) * 2 * chunk;
    if (!out.empty() && std::abs(out.back().end - a) < 1e-12)
      out.back().end = b;  // contiguous halves (g = 1: the whole sequence)
    else
      out.push_back({a, b});
  }
  return out;
}

}  // namespace

SpPicture sp_picture(const RunConfig& cfg, const ModelInfo& model, int gpus_per_node, int nodes) {
  SpPicture p;
  p.gpus_per_node = std::max(1, gpus_per_node);
  p.nodes = std::max(1, nodes);
  p.world = p.gpus_per_node * p.nodes;
  p.mode = cfg.sequence_parallel_mode;
  p.sp = static_cast<int>(std::max<int64_t>(1, cfg.sequence_parallel_size));
  if (p.world % p.sp != 0) {
    p.problem = "sequence_parallel_size " + std::to_string(p.sp) + " does not divide the " +
                std::to_string(p.world) + " GPUs";
    return p;
  }
  p.ulysses = p.mode == SpMode::Ulysses ? p.sp
              : p.mode == SpMode::Usp ? static_cast<int>(std::max<int64_t>(1, cfg.sequence_parallel_ulysses_degree))
                                      : 1;
  if (p.sp % p.ulysses != 0) {
    p.problem = "the Ulysses degree " + std::to_string(p.ulysses) + " does not divide " +
                std::to_string(p.sp);
    return p;
  }
  p.ring = p.sp / p.ulysses;
  p.replicas = p.world / p.sp;
  if (p.ulysses > 1 && ulysses_heads(model, p.ulysses) != UlyssesHeads::Ok)
    p.problem = "the model's " + std::to_string(model.num_heads) + " heads over " +
                std::to_string(model.num_kv_heads) + " KV heads cannot be split " +
                std::to_string(p.ulysses) + " ways";
  const int64_t multiple = p.sp == 1 ? 1 : p.ring > 1 ? 2 * p.sp : p.sp;
  p.tokens = (std::max<int64_t>(1, cfg.cutoff_len) + multiple - 1) / multiple * multiple;
  p.tokens_per_rank = p.tokens / p.sp;
  const int64_t H = std::max<int64_t>(1, model.num_heads);
  const int64_t KV = std::max<int64_t>(1, model.num_kv_heads);
  for (int g = 0; g < std::min(p.world, std::max(kMaxPictureRanks, p.sp)); ++g) {
    SpRankPicture r;
    r.global_rank = g;
    r.sp_rank = g % p.sp;
    r.ring_index = r.sp_rank / p.ulysses;
    r.ulysses_index = r.sp_rank % p.ulysses;
    if (p.sp == 1) {
      r.tokens = {{0.0, 1.0}};
    } else {
      const double from = double(r.ulysses_index) / p.ulysses, to = double(r.ulysses_index + 1) / p.ulysses;
      r.tokens = piece_part(r.ring_index, p.ring, from, to);
    }
    // Ulysses rank j computes attention for heads j*H/u..; KV heads split when they can, else
    // each rank takes the one its query heads use (replicated).
    r.heads_begin = r.ulysses_index * H / p.ulysses;
    r.heads_end = (r.ulysses_index + 1) * H / p.ulysses;
    if (KV >= p.ulysses) {
      r.kv_heads_begin = r.ulysses_index * KV / p.ulysses;
      r.kv_heads_end = (r.ulysses_index + 1) * KV / p.ulysses;
    } else {
      r.kv_heads_begin = r.heads_begin * KV / H;
      r.kv_heads_end = r.kv_heads_begin + 1;
    }
    p.ranks.push_back(std::move(r));
  }
  // One layer's traffic per rank, bf16 (2 bytes) unless the run is fp32.
  const int64_t e = cfg.bf16 || cfg.fp16 || cfg.pure_bf16 ? 2 : 4;
  const int64_t b = std::max<int64_t>(1, cfg.per_device_train_batch_size);
  const int64_t d = model.head_dim > 0 ? model.head_dim : model.hidden_size / H;
  const int64_t t = p.tokens_per_rank;
  if (p.ulysses > 1) {
    const int64_t kv_after = std::max<int64_t>(KV, p.ulysses);  // replicated when fewer
    const int64_t share = p.ulysses - 1;                        // the part that leaves the rank
    const int64_t qkv = b * t * (H + 2 * kv_after) * d * e * share / p.ulysses;
    const int64_t out = b * t * H * d * e * share / p.ulysses;
    p.per_layer.push_back({"all-to-all of q, k and v among the " + std::to_string(p.ulysses) +
                               " Ulysses ranks (sequence slices in, head groups out)",
                           qkv, 1, "the same all-to-alls in reverse for the gradients"});
    p.per_layer.push_back({"all-to-all of the attention output back to sequence slices", out, 1,
                           "its gradient, the same size"});
  }
  if (p.ring > 1) {
    // Each ring rank's K and V (its tokens after any Ulysses all-to-all, its KV heads).
    const int64_t ring_tokens = t * p.ulysses;
    const int64_t kv_heads_here = std::max<int64_t>(1, std::max<int64_t>(KV, p.ulysses) / p.ulysses);
    const int64_t block = b * ring_tokens * kv_heads_here * d * e * 2;
    p.per_layer.push_back({"K/V block passed to the next of the " + std::to_string(p.ring) +
                               " ring ranks",
                           block, p.ring - 1,
                           "the K/V blocks again, and their dK/dV (fp32) passed back round the ring"});
  }
  return p;
}

}  // namespace studio
