// The math path of block attention: chunked over query rows, fp32 (fp64) accumulation, grouped
// query heads folded into the rows so K/V are never repeated.
#include "studio/trainer/model/attention.h"

#include <algorithm>
#include <limits>

namespace studio::trainer {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Elements of one chunk's score matrix: 2^25 fp32 = 128 MiB (plus as much for P and dP).
constexpr int64_t kScoreBudget = int64_t(1) << 25;

struct Dims {
  int64_t batch, q_heads, kv_heads, group, q_len, k_len, head_dim;
};

Dims check_dims(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
              "attention: q, k, v must be [B, H, S, D], got ", q.sizes(), ", ", k.sizes(), ", ",
              v.sizes());
  TORCH_CHECK(k.sizes() == v.sizes(), "attention: k ", k.sizes(), " and v ", v.sizes(), " differ");
  TORCH_CHECK(q.size(0) == k.size(0) && q.size(3) == k.size(3),
              "attention: batch or head_dim of q ", q.sizes(), " and k ", k.sizes(), " differ");
  TORCH_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0, "attention: ", q.size(1),
              " query heads are not a multiple of ", k.size(1), " key/value heads");
  return {q.size(0), q.size(1), k.size(1), q.size(1) / k.size(1), q.size(2), k.size(2), q.size(3)};
}

torch::ScalarType accumulation_dtype(const torch::Tensor& q) {
  return q.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

int64_t chunk_rows(const Dims& d, int64_t query_chunk) {
  if (query_chunk > 0) return std::min(query_chunk, std::max<int64_t>(d.q_len, 1));
  const int64_t per_row = std::max<int64_t>(d.batch * d.q_heads * d.k_len, 1);
  return std::clamp<int64_t>(kScoreBudget / per_row, 1, std::max<int64_t>(d.q_len, 1));
}

// The keys [begin, end) that can be visible to query rows [row0, row_end): keys past the last
// row's position (causal) or before the first row's window are masked for all of them. With
// explicit positions every key may be.
struct KeyRange {
  int64_t begin, end;
  int64_t size() const { return end - begin; }
};
KeyRange visible_keys(const BlockMask& m, int64_t row0, int64_t row_end, int64_t k_len) {
  if (m.positioned()) return {0, k_len};
  const int64_t end =
      m.causal ? std::clamp<int64_t>(m.q_start + row_end - m.k_start, 0, k_len) : k_len;
  const int64_t begin =
      m.window > 0 ? std::clamp<int64_t>(m.q_start + row0 - m.window + 1 - m.k_start, 0, end) : 0;
  return {begin, end};
}

// Rows [row0, row0 + rows) of x [B, Hq, S, E] as [B, Hkv, G * rows, E] in `dtype`: the query heads
// sharing a k/v head become extra rows against that head.
torch::Tensor group_rows(const torch::Tensor& x, const Dims& d, int64_t row0, int64_t rows,
                         torch::ScalarType dtype) {
  return x.narrow(2, row0, rows).to(dtype).reshape({d.batch, d.kv_heads, d.group * rows, -1});
}

// The inverse of group_rows, written into rows [row0, row0 + rows) of dst [B, Hq, S, E].
void scatter_rows(torch::Tensor& dst, const torch::Tensor& grouped, const Dims& d, int64_t row0,
                  int64_t rows) {
  dst.narrow(2, row0, rows).copy_(grouped.reshape({d.batch, d.q_heads, rows, -1}));
}

// scale * q k^T for one chunk against keys [keys.begin, keys.end), soft-capped and masked:
// [B, Hkv, G * rows, keys]. With softcap, `tanh` receives tanh(s / softcap) (unmasked) for the
// backward.
torch::Tensor chunk_scores(const torch::Tensor& qc, const torch::Tensor& kc, const Dims& d,
                           const BlockMask& m, int64_t row0, int64_t rows, KeyRange keys,
                           double scale, torch::Tensor* tanh = nullptr) {
  torch::Tensor s = torch::matmul(qc, kc.transpose(-1, -2)) * scale;
  if (m.softcap > 0) {
    torch::Tensor t = torch::tanh(s / m.softcap);
    s = t * m.softcap;
    if (tanh) *tanh = std::move(t);
  }
  const int64_t n = keys.size();
  const bool causal_cut =
      m.causal && (m.positioned() || m.k_start + keys.end - 1 > m.q_start + row0);
  const bool window_cut =
      m.window > 0 &&
      (m.positioned() || m.q_start + row0 + rows - 1 - (m.k_start + keys.begin) >= m.window);
  if (!causal_cut && !window_cut && !m.segmented()) return s;  // nothing masked
  torch::Tensor hidden;  // [B or 1, 1, 1, rows, keys]: true where the key is not visible
  if (causal_cut || window_cut) {
    const auto opts = torch::TensorOptions().dtype(torch::kLong).device(s.device());
    const torch::Tensor q_pos =
        (m.positioned() ? m.q_pos.narrow(0, row0, rows).to(opts)
                        : torch::arange(row0, row0 + rows, opts).add_(m.q_start))
            .unsqueeze(1);
    const torch::Tensor k_pos =
        (m.positioned() ? m.k_pos.narrow(0, keys.begin, n).to(opts)
                        : torch::arange(keys.begin, keys.end, opts).add_(m.k_start))
            .unsqueeze(0);
    if (causal_cut) hidden = k_pos > q_pos;
    if (window_cut) {
      const torch::Tensor far = (q_pos - k_pos) >= m.window;
      hidden = hidden.defined() ? hidden.logical_or(far) : far;
    }
    hidden = hidden.view({1, 1, 1, rows, n});
  }
  if (m.segmented()) {
    // Another sample's key: [B, rows, 1] vs [B, 1, keys].
    const torch::Tensor other = m.q_segments.narrow(1, row0, rows).unsqueeze(2) !=
                                m.k_segments.narrow(1, keys.begin, n).unsqueeze(1);
    const torch::Tensor o = other.view({d.batch, 1, 1, rows, n});
    hidden = hidden.defined() ? hidden.logical_or(o) : o;
  }
  return s.view({d.batch, d.kv_heads, d.group, rows, n})
      .masked_fill(hidden, -kInf)
      .view({d.batch, d.kv_heads, d.group * rows, n});
}

// exp(s - lse), with rows whose lse is -inf (no visible key) giving 0 instead of NaN.
torch::Tensor probabilities(const torch::Tensor& s, const torch::Tensor& lse_rows) {
  const torch::Tensor safe = lse_rows.masked_fill(lse_rows == -kInf, kInf);
  return torch::exp(s - safe);
}

}  // namespace

AttnBlockOut math_block_forward(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& v, const BlockMask& mask, double scale,
                                int64_t query_chunk) {
  const Dims d = check_dims(q, k, v);
  const auto acc = accumulation_dtype(q);
  torch::Tensor out = torch::zeros({d.batch, d.q_heads, d.q_len, d.head_dim}, q.options());
  torch::Tensor lse = torch::full({d.batch, d.q_heads, d.q_len, 1}, -kInf, q.options().dtype(acc));
  const torch::Tensor ka = k.to(acc), va = v.to(acc);
  const int64_t step = chunk_rows(d, query_chunk);
  for (int64_t row0 = 0; row0 < d.q_len; row0 += step) {
    const int64_t rows = std::min(step, d.q_len - row0);
    const KeyRange keys = visible_keys(mask, row0, row0 + rows, d.k_len);
    if (keys.size() <= 0) continue;  // every row of the chunk sees no key: (0, -inf)
    const torch::Tensor qc = group_rows(q, d, row0, rows, acc);
    const torch::Tensor s = chunk_scores(qc, ka.narrow(2, keys.begin, keys.size()), d, mask, row0,
                                         rows, keys, scale);
    const torch::Tensor lse_c = torch::logsumexp(s, -1, /*keepdim=*/true);
    const torch::Tensor o =
        torch::matmul(probabilities(s, lse_c), va.narrow(2, keys.begin, keys.size()));
    scatter_rows(out, o, d, row0, rows);
    scatter_rows(lse, lse_c, d, row0, rows);
  }
  return {out, lse.squeeze(-1)};
}

AttnBlockGrads math_block_backward(const torch::Tensor& dout, const torch::Tensor& q,
                                   const torch::Tensor& k, const torch::Tensor& v,
                                   const torch::Tensor& out, const torch::Tensor& lse,
                                   const BlockMask& mask, double scale, int64_t query_chunk) {
  const Dims d = check_dims(q, k, v);
  TORCH_CHECK(dout.sizes() == q.sizes() && out.sizes() == q.sizes(), "attention backward: dout ",
              dout.sizes(), " and out ", out.sizes(), " must be shaped like q ", q.sizes());
  TORCH_CHECK(lse.dim() == 3 && lse.sizes() == q.sizes().slice(0, 3),
              "attention backward: lse must be [B, Hq, S], got ", lse.sizes());
  const auto acc = accumulation_dtype(q);
  const auto opts = q.options().dtype(acc);
  torch::Tensor dq = torch::zeros(q.sizes(), opts);
  torch::Tensor dk = torch::zeros(k.sizes(), opts), dv = torch::zeros(v.sizes(), opts);
  const torch::Tensor ka = k.to(acc), va = v.to(acc), lse4 = lse.unsqueeze(-1);
  const int64_t step = chunk_rows(d, query_chunk);
  for (int64_t row0 = 0; row0 < d.q_len; row0 += step) {
    const int64_t rows = std::min(step, d.q_len - row0);
    const KeyRange keys = visible_keys(mask, row0, row0 + rows, d.k_len);
    if (keys.size() <= 0) continue;
    const torch::Tensor qc = group_rows(q, d, row0, rows, acc);
    const torch::Tensor doc = group_rows(dout, d, row0, rows, acc);
    const torch::Tensor delta = (doc * group_rows(out, d, row0, rows, acc)).sum(-1, true);
    const torch::Tensor kc = ka.narrow(2, keys.begin, keys.size());
    const torch::Tensor vc = va.narrow(2, keys.begin, keys.size());
    torch::Tensor tanh;
    const torch::Tensor s = chunk_scores(qc, kc, d, mask, row0, rows, keys, scale, &tanh);
    const torch::Tensor p = probabilities(s, group_rows(lse4, d, row0, rows, acc));
    dv.narrow(2, keys.begin, keys.size()).add_(torch::matmul(p.transpose(-1, -2), doc));
    // dS = P * (dP - D): the softmax backward with D = rowsum(dout * out) = rowsum(P * dP).
    torch::Tensor ds = p * (torch::matmul(doc, vc.transpose(-1, -2)) - delta);
    // Through the soft cap: d(c tanh(s / c))/ds = 1 - tanh^2 (masked entries have ds = 0).
    if (tanh.defined()) ds.mul_(1 - tanh.square());
    scatter_rows(dq, torch::matmul(ds, kc).mul_(scale), d, row0, rows);
    dk.narrow(2, keys.begin, keys.size())
        .add_(torch::matmul(ds.transpose(-1, -2), qc).mul_(scale));
  }
  return {dq, dk, dv};
}

void merge_attention_blocks(torch::Tensor& out, torch::Tensor& lse, const torch::Tensor& out_b,
                            const torch::Tensor& lse_b) {
  TORCH_CHECK(out.sizes() == out_b.sizes() && lse.sizes() == lse_b.sizes(),
              "merge_attention_blocks: shapes differ: out ", out.sizes(), " vs ", out_b.sizes(),
              ", lse ", lse.sizes(), " vs ", lse_b.sizes());
  const torch::Tensor new_lse = torch::logaddexp(lse, lse_b.to(lse.scalar_type()));
  // The new block's share exp(lse_b - new_lse) = sigmoid(lse_b - lse); 0 where neither block
  // saw a key (both -inf, where sigmoid would give NaN).
  const torch::Tensor share = torch::sigmoid(lse_b - lse).masked_fill(new_lse == -kInf, 0);
  out.sub_(share.unsqueeze(-1) * (out - out_b.to(out.scalar_type())));
  lse.copy_(new_lse);
}

}  // namespace studio::trainer
