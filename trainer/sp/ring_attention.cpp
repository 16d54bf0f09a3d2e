// Zigzag ring attention over the block functions of model/attention.h. The block schedule is
// the one of docs/SEQUENCE_PARALLEL.md ("Attention"); forward and backward walk it identically, so every block's
// gradient is computed from the global (merged) out and lse and is exact.
#include "studio/trainer/sp/ring_attention.h"

#include <cstdint>

#include "studio/trainer/model/attention.h"
#include "studio/trainer/sp/layout.h"

namespace studio::trainer::sp {
namespace {

constexpr int kKvTag = 0x5a10;    // K/V around the ring (forward and backward)
constexpr int kGradTag = 0x5a20;  // dK/dV of the visiting block (backward)

torch::ScalarType accumulation_dtype(const torch::Tensor& q) {
  return q.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

// One hop of a ring in flight: `sent` goes to the next rank while the previous rank's tensor
// arrives in `received`. The sent tensor is kept alive until wait().
struct RingHop {
  torch::Tensor sent, received;
  dist::Pending send, recv;

  void wait() {
    if (recv.valid()) recv.wait();
    if (send.valid()) send.wait();
  }
};

RingHop start_hop(dist::Group& ring, const torch::Tensor& t, int tag, const std::string& what) {
  RingHop h;
  h.sent = t;
  h.received = torch::empty_like(t);
  auto shift = ring.ring_shift(h.sent, h.received, tag, what);
  h.send = std::move(shift.send);
  h.recv = std::move(shift.recv);
  return h;
}

// Which local query rows meet which leading rows of the visiting K/V at ring step `step`, with
// `len` local rows = two chunks [early; late] of c = len / 2.
struct StepBlock {
  int64_t q_begin, q_len, kv_len;
  bool causal;
};

StepBlock step_block(int step, int rank, int64_t len) {
  const int64_t c = len / 2;
  if (step == 0) return {0, len, len, true};  // own K/V: causal (local order is global order)
  // The sender (rank - step) has a lower index: its early chunk precedes both of ours and its
  // late chunk follows both.
  if (step <= rank) return {0, len, c, false};
  // A higher index: both its chunks lie between our early and our late chunk.
  return {c, c, len, false};
}

// Ring rank r's tokens of a sequence (dim 1): its zigzag chunks r and 2n-1-r, as the SP split.
torch::Tensor ring_piece(const torch::Tensor& x, int n, int r) {
  return split_sequence(x, 1, make_sp_layout(SpMode::ZigzagRing, n, r));
}

// The block mask at ring step `step`: the step's causality and, with segments, the samples of
// the query rows (`own`: this rank's piece) and of the visiting K/V's rows (the sender's piece).
// The global positions of the whole sequence the ring shares, [1, n * len] on `device`: a
// sliding window needs them (zigzag pieces are not contiguous); ring_piece cuts a rank's.
torch::Tensor ring_sequence_positions(int n, int64_t len, const torch::Device& device) {
  return torch::arange(int64_t(n) * len,
                       torch::TensorOptions().dtype(torch::kLong).device(device))
      .unsqueeze(0);
}

// The per-call state every step mask derives from.
struct RingMaskInputs {
  torch::Tensor segments, own;  // neat packing: the whole sequence's and this rank's piece
  ScoreShape shape;
  torch::Tensor all_pos, own_pos;  // with a window: all global positions, this rank's
  int64_t len = 0;
};

BlockMask step_mask(const StepBlock& b, const RingMaskInputs& in, int n, int rank, int step) {
  BlockMask m{b.causal};
  m.softcap = in.shape.softcap;
  m.window = in.shape.window;
  if (m.window > 0) {
    if (step == 0) {
      m.q_pos = m.k_pos = in.own_pos;  // one tensor: attention.cpp may drop both (causal by index)
    } else {
      m.q_pos = in.own_pos.narrow(0, b.q_begin, b.q_len);
      m.k_pos = ring_piece(in.all_pos, n, (rank - step + n) % n).squeeze(0).narrow(0, 0, b.kv_len);
    }
  }
  const torch::Tensor& segments = in.segments;
  const torch::Tensor& own = in.own;
  if (!segments.defined()) return m;
  m.q_segments = own.narrow(1, b.q_begin, b.q_len);
  m.k_segments = ring_piece(segments, n, (rank - step + n) % n).narrow(1, 0, b.kv_len);
  return m;
}

struct RingAttention : torch::autograd::Function<RingAttention> {
  static RingMaskInputs mask_inputs(const torch::Tensor& q, const torch::Tensor& segments,
                                    ScoreShape shape, int n, int rank) {
    RingMaskInputs in;
    in.segments = segments;
    in.own = segments.defined() ? ring_piece(segments, n, rank) : segments;
    in.shape = shape;
    in.len = q.size(2);
    if (shape.window > 0) {
      in.all_pos = ring_sequence_positions(n, in.len, q.device());
      in.own_pos = ring_piece(in.all_pos, n, rank).squeeze(0);
    }
    return in;
  }

  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q,
                               const torch::Tensor& k, const torch::Tensor& v, double scale,
                               dist::Group* ring, const std::optional<torch::Tensor>& seg,
                               int64_t window, double softcap) {
    const torch::Tensor segments = seg.value_or(torch::Tensor());
    const int n = ring->size(), rank = ring->rank();
    const RingMaskInputs in = mask_inputs(q, segments, ScoreShape{window, softcap}, n, rank);
    const int64_t len = q.size(2);
    const auto acc = accumulation_dtype(q);
    torch::Tensor kv = torch::stack({k, v});
    torch::Tensor out, lse;
    for (int step = 0; step < n; ++step) {
      RingHop hop;
      if (step + 1 < n) hop = start_hop(*ring, kv, kKvTag, "zigzag ring attention: K/V");
      const StepBlock b = step_block(step, rank, len);
      AttnBlockOut o =
          attention_block_forward(q.narrow(2, b.q_begin, b.q_len), kv[0].narrow(2, 0, b.kv_len),
                                  kv[1].narrow(2, 0, b.kv_len),
                                  step_mask(b, in, n, rank, step), scale);
      if (step == 0) {
        out = o.out.to(acc);
        lse = o.lse.to(acc);
      } else {
        torch::Tensor out_rows = out.narrow(2, b.q_begin, b.q_len);
        torch::Tensor lse_rows = lse.narrow(2, b.q_begin, b.q_len);
        merge_attention_blocks(out_rows, lse_rows, o.out, o.lse);
      }
      hop.wait();
      if (step + 1 < n) kv = hop.received;
    }
    out = out.to(q.scalar_type());
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["segments"] = segments;
    ctx->saved_data["window"] = window;
    ctx->saved_data["softcap"] = softcap;
    // The group outlives the graph (the Communicator lives for the whole run).
    ctx->saved_data["ring"] = static_cast<int64_t>(reinterpret_cast<std::intptr_t>(ring));
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3],
                        &lse = saved[4];
    const double scale = ctx->saved_data["scale"].toDouble();
    auto* ring =
        reinterpret_cast<dist::Group*>(static_cast<std::intptr_t>(ctx->saved_data["ring"].toInt()));
    const torch::Tensor& dout = grads[0];
    const auto& seg_value = ctx->saved_data["segments"];
    const torch::Tensor segments = seg_value.isTensor() ? seg_value.toTensor() : torch::Tensor();
    const int n = ring->size(), rank = ring->rank();
    const RingMaskInputs in = mask_inputs(
        q, segments,
        ScoreShape{ctx->saved_data["window"].toInt(), ctx->saved_data["softcap"].toDouble()}, n,
        rank);
    const int64_t len = q.size(2);
    const auto acc_opts = q.options().dtype(accumulation_dtype(q));

    torch::Tensor dq = torch::zeros(q.sizes(), acc_opts);
    torch::Tensor kv = torch::stack({k, v});
    torch::Tensor dkv;  // dK/dV of the visiting block, accumulated along its tour
    RingHop grad_hop;
    for (int step = 0; step < n; ++step) {
      RingHop kv_hop;
      if (step + 1 < n) kv_hop = start_hop(*ring, kv, kKvTag, "zigzag ring attention: K/V");
      const StepBlock b = step_block(step, rank, len);
      const auto rows = [&](const torch::Tensor& t) { return t.narrow(2, b.q_begin, b.q_len); };
      const AttnBlockGrads g = attention_block_backward(
          rows(dout), rows(q), kv[0].narrow(2, 0, b.kv_len), kv[1].narrow(2, 0, b.kv_len),
          rows(out), rows(lse), step_mask(b, in, n, rank, step), scale);
      rows(dq).add_(g.dq);
      if (step == 0) {
        dkv = torch::zeros(kv.sizes(), acc_opts);
      } else {
        grad_hop.wait();
        dkv = grad_hop.received;
      }
      dkv[0].narrow(2, 0, b.kv_len).add_(g.dk);
      dkv[1].narrow(2, 0, b.kv_len).add_(g.dv);
      // Forward to the rank that sees this K/V next; after the last step that is its owner.
      if (n > 1) grad_hop = start_hop(*ring, dkv, kGradTag, "zigzag ring attention: dK/dV");
      kv_hop.wait();
      if (step + 1 < n) kv = kv_hop.received;
    }
    if (n > 1) {
      grad_hop.wait();
      dkv = grad_hop.received;
    }
    return {dq.to(q.scalar_type()), dkv[0].to(k.scalar_type()), dkv[1].to(v.scalar_type()),
            torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor zigzag_ring_attention(const torch::Tensor& q, const torch::Tensor& k,
                                    const torch::Tensor& v, double scale, dist::Group& ring,
                                    const torch::Tensor& segments, ScoreShape shape) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && k.sizes() == v.sizes(),
              "zigzag ring attention: q must be [B, Hq, S, D] and k, v [B, Hkv, S, D], got ",
              q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  TORCH_CHECK(k.size(2) == q.size(2), "zigzag ring attention: q holds ", q.size(2),
              " tokens but k/v hold ", k.size(2));
  TORCH_CHECK(ring.size() == 1 || q.size(2) % 2 == 0, "zigzag ring attention: rank ", ring.rank(),
              " of ring ", ring.name(), " holds ", q.size(2),
              " tokens, not two equal chunks; pad the batch to sp_pad_multiple()");
  TORCH_CHECK(!segments.defined() ||
                  (segments.dim() == 2 && segments.size(0) == q.size(0) &&
                   segments.size(1) == q.size(2) * ring.size()),
              "zigzag ring attention: segments must be [B, ", q.size(2) * ring.size(), "], got ",
              segments.sizes());
  return RingAttention::apply(
      q, k, v, scale, &ring,
      segments.defined() ? std::optional<torch::Tensor>(segments) : std::nullopt, shape.window,
      shape.softcap);
}

}  // namespace studio::trainer::sp
