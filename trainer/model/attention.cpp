// Block attention dispatch (ATen's FlashAttention: its CUDA kernels for fp16/bf16, its CPU
// kernel for fp32/bf16; the math path for everything else), the LocalAttention autograd Function
// and the default of the decoder's attention seam.
#include "studio/trainer/model/attention.h"

#include <atomic>
#include <limits>

#include "studio/trainer/tensors/torch_compat.h"

namespace studio::trainer {
namespace {

std::atomic<AttentionKernel> g_kernel{AttentionKernel::Auto};

// The masks ATen's flash kernels express: none, or causal between blocks at the same positions
// (their causal masks are aligned differently on CPU and CUDA; both equal ours only when the
// blocks coincide).
bool flash_mask_applies(const torch::Tensor& q, const torch::Tensor& k, const BlockMask& m) {
  if (m.segmented()) return false;  // packed samples: the math path's segment mask
  // Windows that cut and soft-capping: the math path (simplify() drops windows that do not).
  if (m.window > 0 || m.positioned() || m.softcap > 0) return false;
  return !m.causal || (q.size(2) == k.size(2) && m.q_start == m.k_start);
}

// ATen's CPU flash attention (torch >= 2.2): fp32 and bf16 (double stays on the math path, the
// tests' reference), any head_dim, Hkv < Hq directly, logsumexp fp32 [B, H, S]; its backward
// takes out and logsumexp as given, like the CUDA one, so a ring can pass the merged ones.
bool cpu_flash_applies(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       const BlockMask& m) {
  const auto t = q.scalar_type();
  return q.device().is_cpu() && (t == torch::kFloat || t == torch::kBFloat16) &&
         k.scalar_type() == t && v.scalar_type() == t && q.size(2) > 0 && k.size(2) > 0 &&
         flash_mask_applies(q, k, m);
}

// The flash backward ops return gradients in the inputs' dtype; the block API wants fp32
// unless the caller asked for them as they come (`native`).
AttnBlockGrads block_grads(const std::tuple<at::Tensor, at::Tensor, at::Tensor>& g, bool native) {
  if (native) return {std::get<0>(g), std::get<1>(g), std::get<2>(g)};
  return {std::get<0>(g).to(at::kFloat), std::get<1>(g).to(at::kFloat),
          std::get<2>(g).to(at::kFloat)};
}

AttnBlockOut cpu_flash_forward(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, bool causal, double scale) {
  auto r = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, /*dropout_p=*/0.0, causal,
                                                           /*attn_mask=*/{}, scale);
  return {std::get<0>(r), std::get<1>(r)};
}

AttnBlockGrads cpu_flash_backward(const torch::Tensor& dout, const torch::Tensor& q,
                                  const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& out, const torch::Tensor& lse, bool causal,
                                  double scale, bool native) {
  const auto t = q.scalar_type();
  return block_grads(at::_scaled_dot_product_flash_attention_for_cpu_backward(
      dout.to(t).contiguous(), q, k, v, out.to(t).contiguous(), lse.to(at::kFloat).contiguous(),
      /*dropout_p=*/0.0, causal, /*attn_mask=*/{}, scale), native);
}

#if STUDIO_WITH_TORCH_CUDA
// FlashAttention applies to fp16/bf16 CUDA tensors with a head_dim it has kernels for, and to
// masks it can express: none, or causal between blocks at the same positions (its causal mask
// is bottom-right aligned, which equals ours only when the blocks coincide).
bool flash_applies(const torch::Tensor& q, const torch::Tensor& k, const BlockMask& m) {
  const auto t = q.scalar_type();
  return q.is_cuda() && (t == torch::kHalf || t == torch::kBFloat16) && k.scalar_type() == t &&
         q.size(3) % 8 == 0 && q.size(3) <= 256 && flash_mask_applies(q, k, m);
}

// ATen's flash ops, torch >= 2.1 signatures. They take [B, H, S, D] (last dim contiguous) and
// support Hkv < Hq directly; logsumexp is fp32 [B, H, S]. Dropout is always 0 here, so the
// backward never reads the philox seed/offset: placeholders are passed instead of saving them.
AttnBlockOut flash_forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                           bool causal, double scale) {
  auto r = at::_scaled_dot_product_flash_attention(q, k, v, /*dropout_p=*/0.0, causal,
                                                   /*return_debug_mask=*/false, scale);
  return {std::get<0>(r), std::get<1>(r)};
}

AttnBlockGrads flash_backward(const torch::Tensor& dout, const torch::Tensor& q,
                              const torch::Tensor& k, const torch::Tensor& v,
                              const torch::Tensor& out, const torch::Tensor& lse, bool causal,
                              double scale, bool native) {
  const at::Tensor none;  // cum_seq_q/k: only nested (varlen) batches have them
  const at::Tensor philox = at::zeros({}, q.options().dtype(at::kLong));
  // dout as it comes: the op reads it as [B, S, H, D] (a transpose) and copies it only when
  // that is not contiguous. The decoder's gradient arrives in that layout (the forward's output
  // is [B, S, H, D] in memory), so a .contiguous() here would make the op copy it back.
  const auto dt = dout.scalar_type() == q.scalar_type() ? dout : dout.to(q.scalar_type());
  return block_grads(at::_scaled_dot_product_flash_attention_backward(
      dt, q, k, v, out, lse.to(at::kFloat).contiguous(), none, none, q.size(2),
      k.size(2), /*dropout_p=*/0.0, causal, philox, philox, scale), native);
}
#endif

// A sliding window seen from one block: whether it hides every key from every row (`empty`),
// and otherwise the mask without it when it hides nothing here (the kernels then apply).
struct WindowedBlock {
  BlockMask mask;
  bool empty = false;
};
WindowedBlock simplify(const BlockMask& m, int64_t q_len, int64_t k_len) {
  if (m.window <= 0 || q_len == 0 || k_len == 0) return {m};
  int64_t q_lo = m.q_start, q_hi = m.q_start + q_len - 1;
  int64_t k_lo = m.k_start, k_hi = m.k_start + k_len - 1;
  if (m.positioned()) {
    q_lo = m.q_pos.min().item<int64_t>(), q_hi = m.q_pos.max().item<int64_t>();
    k_lo = m.k_pos.min().item<int64_t>(), k_hi = m.k_pos.max().item<int64_t>();
  }
  if (q_lo - k_hi >= m.window) return {m, true};
  if (q_hi - k_lo >= m.window) return {m};
  BlockMask plain = m;
  plain.window = 0;
  // Causal by position equals causal by index only for one increasing set of positions on both
  // sides (a ring's own block): positions stay otherwise.
  if (m.positioned() && (!m.causal || m.q_pos.is_same(m.k_pos)))
    plain.q_pos = plain.k_pos = torch::Tensor();
  return {plain};
}

// The one choice of kernel, made the same way for a block's forward and its backward.
enum class Kernel { Math, CpuFlash, CudaFlash };
Kernel pick_kernel(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                   const BlockMask& mask) {
  if (g_kernel.load() == AttentionKernel::Math) return Kernel::Math;
#if STUDIO_WITH_TORCH_CUDA
  if (flash_applies(q, k, mask)) return Kernel::CudaFlash;
#endif
  return cpu_flash_applies(q, k, v, mask) ? Kernel::CpuFlash : Kernel::Math;
}

}  // namespace

void set_attention_kernel(AttentionKernel kernel) { g_kernel.store(kernel); }

AttnBlockOut attention_block_forward(const torch::Tensor& q, const torch::Tensor& k,
                                     const torch::Tensor& v, const BlockMask& block_mask,
                                     double scale) {
  const WindowedBlock w = simplify(block_mask, q.size(2), k.size(2));
  if (w.empty) {  // no row sees a key: (0, -inf), as the math path gives
    const auto acc = q.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
    return {torch::zeros_like(q),
            torch::full({q.size(0), q.size(1), q.size(2)}, -std::numeric_limits<double>::infinity(),
                        q.options().dtype(acc))};
  }
  const BlockMask& mask = w.mask;
  switch (pick_kernel(q, k, v, mask)) {
#if STUDIO_WITH_TORCH_CUDA
    case Kernel::CudaFlash: return flash_forward(q, k, v, mask.causal, scale);
#endif
    case Kernel::CpuFlash: return cpu_flash_forward(q, k, v, mask.causal, scale);
    default: return math_block_forward(q, k, v, mask, scale);
  }
}

AttnBlockGrads attention_block_backward(const torch::Tensor& dout, const torch::Tensor& q,
                                        const torch::Tensor& k, const torch::Tensor& v,
                                        const torch::Tensor& out, const torch::Tensor& lse,
                                        const BlockMask& block_mask, double scale, bool native) {
  const WindowedBlock w = simplify(block_mask, q.size(2), k.size(2));
  if (w.empty) {
    const auto opts = q.options().dtype(q.scalar_type() == torch::kDouble ? torch::kDouble
                                                                          : torch::kFloat);
    return {torch::zeros(q.sizes(), opts), torch::zeros(k.sizes(), opts),
            torch::zeros(v.sizes(), opts)};
  }
  const BlockMask& mask = w.mask;
  switch (pick_kernel(q, k, v, mask)) {
#if STUDIO_WITH_TORCH_CUDA
    case Kernel::CudaFlash:
      return flash_backward(dout, q, k, v, out, lse, mask.causal, scale, native);
#endif
    case Kernel::CpuFlash:
      return cpu_flash_backward(dout, q, k, v, out, lse, mask.causal, scale, native);
    default: return math_block_backward(dout, q, k, v, out, lse, mask, scale);
  }
}

torch::Tensor LocalAttention::forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& q,
                                      const torch::Tensor& k, const torch::Tensor& v, bool causal,
                                      double scale,
                                      const std::optional<torch::Tensor>& segments,
                                      int64_t window, double softcap) {
  // An optional, not a Tensor argument: autograd records every Tensor argument as an input and
  // cannot record an undefined one.
  const torch::Tensor seg = segments.value_or(torch::Tensor());
  BlockMask mask{causal, 0, 0, seg, seg};
  mask.window = window;
  mask.softcap = softcap;
  AttnBlockOut r = attention_block_forward(q, k, v, mask, scale);
  ctx->save_for_backward({q, k, v, r.out, r.lse});
  ctx->saved_data["segments"] = seg;
  ctx->saved_data["causal"] = causal;
  ctx->saved_data["scale"] = scale;
  ctx->saved_data["window"] = window;
  ctx->saved_data["softcap"] = softcap;
  return r.out;
}

torch::autograd::variable_list LocalAttention::backward(torch::autograd::AutogradContext* ctx,
                                                        torch::autograd::variable_list grads) {
  const auto saved = ctx->get_saved_variables();
  const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2];
  const auto& seg_value = ctx->saved_data["segments"];
  const torch::Tensor segments = seg_value.isTensor() ? seg_value.toTensor() : torch::Tensor();
  BlockMask mask{ctx->saved_data["causal"].toBool(), 0, 0, segments, segments};
  mask.window = ctx->saved_data["window"].toInt();
  mask.softcap = ctx->saved_data["softcap"].toDouble();
  // In the kernel's dtype: they leave in q's anyway (no fp32 round trip for bf16).
  const AttnBlockGrads g = attention_block_backward(grads[0], q, k, v, saved[3], saved[4], mask,
                                                    ctx->saved_data["scale"].toDouble(),
                                                    /*native=*/true);
  return {g.dq.to(q.scalar_type()), g.dk.to(k.scalar_type()), g.dv.to(v.scalar_type()),
          torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
}

torch::Tensor local_attention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, bool causal, double scale,
                              const torch::Tensor& segments, ScoreShape shape) {
  return LocalAttention::apply(
      q, k, v, causal, scale,
      segments.defined() ? std::optional<torch::Tensor>(segments) : std::nullopt, shape.window,
      shape.softcap);
}

AttentionFn default_attention() {
  return
      [](const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
         const AttentionCall& call) {
        return local_attention(q, k, v, call.causal, call.scale, call.segments, call.shape);
      };
}

}  // namespace studio::trainer
