#pragma once
// Per-GPU memory estimate of a run before it starts: what the wizard's memory page draws as a
// stacked bar and what `studio-train estimate CONFIG.yaml` prints. Formulas and their sources:
// ../shared/reference/performance-anchors.md ("Memory per GPU"); docs/MEMORY_ESTIMATE.md says
// which the estimate uses for which config keys. Plain C++ (no Qt, no Torch).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "studio/config/run_config.h"
#include "studio/config/validate.h"
#include "studio/model_facts/model_info.h"

namespace studio {

struct EstimateOptions {
  int nproc_per_node = 1;  // GPUs per node
  int nnodes = 1;
  // The ZeRO request of cfg.deepspeed; nullopt: none (the caller reads the JSON, so the estimate
  // itself never touches files).
  std::optional<DeepSpeedRequest> deepspeed;  // with the config's own zero_stage/offload keys
  // The GPU's memory in bytes; 0 = unknown (fits() is then always true).
  double gpu_capacity_bytes = 0;
  // A run on the CPU (tests, the CPU demonstration) instead of CUDA: ATen's CPU flash-attention
  // kernel serves fp32 too (CUDA's math path copies the attention output for o_proj), and
  // offloaded activations are plain host buffers (CUDA's pinned ones are rounded up to a power
  // of two by LibTorch's host allocator).
  bool cpu = false;
  int world_size() const { return nproc_per_node * nnodes; }
};

// Bytes per GPU, by what holds them.
struct MemoryBreakdown {
  double weights = 0;       // trained weights on the GPU: whole below ZeRO-3; at stage 3 the
                            // layers gathered at a time (the pieces are the fp32 masters)
  double gradients = 0;     // fp32: whole at stages 0-1, this rank's pieces at 2-3
  double optimizer = 0;     // fp32 master weights (separate ones) + AdamW m and v
  double reference = 0;     // DPO's frozen reference model (0 when precompute_ref_logps)
  double activations = 0;   // saved for backward (per local token and layer), incl. recompute
  double logits = 0;        // the fused LM head + loss (the head's fp32 gradient, the hidden
                            // states' gradient and their copy, one chunk's logits): what its
                            // peak needs beyond the layers' backward working set, which comes
                            // after it (LongContextCosts::loss_peak is the whole peak)
  double sp_buffers = 0;    // ring K/V receive buffers and fp32 out/lse accumulators; Ulysses
                            // all-to-all buffers
  double zero_buffers = 0;  // gradient reductions in flight during the backward (one decoder
                            // layer's buffers, at most three at a time)
  // What the optimizer step needs beyond the backward's working set (activations, logits and SP
  // buffers, all freed by then): fp32 gradient copies and AdamW temporaries. 0 when the backward
  // is the peak, so that total() is the peak of both phases and the parts still add up to it.
  double optimizer_step = 0;
  double total() const {
    return weights + gradients + optimizer + reference + activations + logits + sp_buffers +
           zero_buffers + optimizer_step;
  }
};

// One part of a breakdown, in the order the table and the wizard's bar show them.
struct MemoryPart {
  const char* key;    // e.g. "sp_buffers": the JSON name
  const char* label;  // e.g. "SP buffers"
  double bytes;
};
std::vector<MemoryPart> memory_parts(const MemoryBreakdown& bytes);

// The long-sequence costs behind the parts (docs/LONG_CONTEXT.md), per rank: what
// tst_long_context_memory holds to the engine's measured allocations.
struct LongContextCosts {
  int64_t loss_chunk_tokens = 0;  // rows per chunk of the fused LM head and loss
  double loss_held = 0;           // SFT: what the fused loss keeps from its forward to its backward
  double loss_peak = 0;           // the loss's peak above what was held before it (= logits part)
  double checkpoints = 0;  // checkpointed layer inputs on the device at the end of the forward
  double offloaded_activations = 0;  // offload_activations: the same in host memory
  double outside = 0;  // outside the layers: RoPE tables, final norm, the hidden states
  double layer = 0;    // one decoder layer's saved activations (tiled MLP: without its MLP)
  int64_t mlp_tile_tokens = 0;  // tiled_mlp: rows per tile (0: untiled)
  double mlp_tile = 0;          // tiled_mlp: one tile's recomputed activations and gradients
  // CUDA: FlashAttention-2's backward workspace while one layer's attention backward runs (its
  // fp32 dq accumulator, K and V gradients expanded to every query head under GQA, softmax_d).
  double attention_backward = 0;
};

struct MemoryEstimate {
  MemoryBreakdown bytes;
  LongContextCosts long_context;
  int world_size = 1;
  int sp_size = 1;
  int ulysses_degree = 1;  // sp_size = ulysses_degree x ring_degree
  int ring_degree = 1;
  int64_t tokens_per_rank = 0;  // local tokens of one micro-batch (DPO: chosen + rejected)
  double bytes_per_param = 0;   // model states per parameter on one GPU
  int zero_stage = 0;           // as the engine applies the config (studio::zero_request)
  // The model states a rank holds between steps (weights or their pieces, masters, gradients,
  // AdamW states, DPO reference): on the GPU, and in host memory by offload. What the engine
  // measures at its first step (events: gpus[].model_states_mib, offloaded_mib).
  double model_state_bytes = 0;
  double offloaded_bytes = 0;
  // offload_activations: the checkpointed layer inputs in host memory (beside offloaded_bytes).
  double host_activation_bytes = 0;
  // While a checkpoint is written in the background (trainer/train_saving.cpp), the host copies it
  // is written from: on rank 0 the fp32 model (finetuning_type lora: the adapter's trained
  // tensors) and its optimizer states; on every other rank its optimizer states (none at ZeRO
  // stage 0, none with save_only_model). What the engine logs as "the copies hold".
  double checkpoint_host_bytes_rank0 = 0;
  double checkpoint_host_bytes_other = 0;
  // Host memory each process holds beyond its tensors (kProcessHostBytes): not in `bytes`.
  double process_host_bytes = 0;
  double capacity_bytes = 0;       // EstimateOptions::gpu_capacity_bytes
  std::vector<std::string> notes;  // the assumptions made, one sentence each
  bool fits() const { return capacity_bytes <= 0 || bytes.total() <= capacity_bytes; }
};

// The resident memory a studio-train process holds beyond its tensors, in host memory: LibTorch's
// libraries (code, relocated data) and operator registry, Gloo's and OpenMP's threads, and what
// the C library keeps for reuse after frees. Measured on CPU runs with torch 2.11's CUDA build
// (docs/PERFORMANCE.md, "Host memory of a sharded CPU run"): 0.34 GiB resident when main()
// starts, 0.37-0.50 GiB beyond the allocator's live bytes between steps; tst_zero holds a run's
// peak RSS to the estimate plus this.
inline constexpr double kProcessHostBytes = 512.0 * 1024 * 1024;

// The estimate for `cfg` (cutoff_len, batch size, stage, precision, gradient_checkpointing, SP
// size and mode) on `model`.
MemoryEstimate estimate_memory(const RunConfig& cfg, const ModelInfo& model,
                               const EstimateOptions& opt);

// The longest cutoff_len whose estimate fits the GPU, everything else as in cfg (a multiple
// of 1024, or of the SP padding when that is larger); nullopt when the capacity is unknown or
// not even the shortest fits. Searched up to 2^26 tokens.
std::optional<int64_t> longest_fitting_cutoff(const RunConfig& cfg, const ModelInfo& model,
                                              const EstimateOptions& opt);

// The fused loss's chunk rule (kernels/fused_linear_ce.h, fused_linear_ce_chunk_tokens, which a
// test keeps equal): about as many logits per chunk as the hidden states have values, but at
// least as many rows as fill kLossChunkLogitsFloorBytes of fp32 logits, a power of two, at most
// `tokens`.
inline constexpr int64_t kLossChunkLogitsFloorBytes = int64_t{1} << 30;
int64_t loss_chunk_tokens(int64_t tokens, int64_t hidden, int64_t vocab);

// SP sizes the world allows for `cfg`'s mode on `model`: divisors of the world size whose head
// constraints hold (ulysses: heads divisible, kv heads split or replicated; usp: some
// ulysses x ring factorisation does). Ascending; always contains 1.
std::vector<int> valid_sp_sizes(const RunConfig& cfg, const ModelInfo& model, int world_size);

// The smallest of valid_sp_sizes whose estimate fits the GPU (for usp, with the largest Ulysses
// degree that works); nullopt when none does or the capacity is unknown.
std::optional<int> smallest_fitting_sp(const RunConfig& cfg, const ModelInfo& model,
                                       const EstimateOptions& opt);

// tiled_mlp (trainer/model/decoder.cpp): the tokens of one MLP tile when `tokens` rows go
// through a layer's MLP: as many as fit `budget_bytes` at 4 x intermediate values per token
// (gate, up, SiLU's output and their product: what a tile keeps for its backward); budget 0:
// tokens x hidden values, what the layer's input takes. Between 1 and tokens.
int64_t tiled_mlp_tile_tokens(int64_t tokens, int64_t hidden, int64_t intermediate, int value_bytes,
                              double budget_bytes);

// A table in GiB, one row per part, with the total against the capacity and the notes.
std::string format_estimate_text(const MemoryEstimate& estimate);

// "12.34 GiB" (1 GiB = 2^30 bytes)
std::string format_gib(double bytes);

}  // namespace studio
