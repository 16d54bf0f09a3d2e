#pragma once
// Per-GPU memory estimate of a run before it starts: what the wizard's memory page draws as a
// stacked bar and what `studio-train estimate CONFIG.yaml` prints. Formulas and their sources:
// ../shared/reference/performance-anchors.md ("Memory per GPU"); docs/MEMORY_ESTIMATE.md says
// which the estimate uses for which config keys. Plain C++ (no Qt, no Torch).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "studio/config/model_info.h"
#include "studio/config/run_config.h"
#include "studio/config/validate.h"

namespace studio {

struct EstimateOptions {
  int nproc_per_node = 1;  // GPUs per node
  int nnodes = 1;
  // The ZeRO request of cfg.deepspeed; nullopt: none (the caller reads the JSON, so the estimate
  // itself never touches files).
  std::optional<DeepSpeedRequest> deepspeed;  // with the config's own zero_stage/offload keys
  // The GPU's memory in bytes; 0 = unknown (fits() is then always true).
  double gpu_capacity_bytes = 0;
  int world_size() const { return nproc_per_node * nnodes; }
};

// Bytes per GPU, by what holds them.
struct MemoryBreakdown {
  double weights = 0;      // trained weights on the GPU: whole below ZeRO-3; at stage 3 the
                           // layers gathered at a time (the pieces are the fp32 masters)
  double gradients = 0;    // fp32: whole at stages 0-1, this rank's pieces at 2-3
  double optimizer = 0;    // fp32 master weights (separate ones) + AdamW m and v
  double reference = 0;    // DPO's frozen reference model (0 when precompute_ref_logps)
  double activations = 0;  // saved for backward (per local token and layer), incl. recompute
  double logits = 0;       // the loss's fp32 log-softmax of every token, plus one chunk's
                           // logits, fp32 copy and gradients (the loss is chunked, not fused)
  double sp_buffers = 0;   // ring K/V receive buffers and fp32 out/lse accumulators; Ulysses
                           // all-to-all buffers
  double zero_buffers = 0; // gradient reductions in flight during the backward (one decoder
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

struct MemoryEstimate {
  MemoryBreakdown bytes;
  int world_size = 1;
  int sp_size = 1;
  int ulysses_degree = 1;         // sp_size = ulysses_degree x ring_degree
  int ring_degree = 1;
  int64_t tokens_per_rank = 0;    // local tokens of one micro-batch (DPO: chosen + rejected)
  double bytes_per_param = 0;     // model states per parameter on one GPU
  int zero_stage = 0;             // as the engine applies the config (studio::zero_request)
  // The model states a rank holds between steps (weights or their pieces, masters, gradients,
  // AdamW states, DPO reference): on the GPU, and in host memory by offload. What the engine
  // measures at its first step (events: gpus[].model_states_mib, offloaded_mib).
  double model_state_bytes = 0;
  double offloaded_bytes = 0;
  double capacity_bytes = 0;      // EstimateOptions::gpu_capacity_bytes
  std::vector<std::string> notes; // the assumptions made, one sentence each
  bool fits() const { return capacity_bytes <= 0 || bytes.total() <= capacity_bytes; }
};

// The estimate for `cfg` (cutoff_len, batch size, stage, precision, gradient_checkpointing, SP
// size and mode) on `model`.
MemoryEstimate estimate_memory(const RunConfig& cfg, const ModelInfo& model,
                               const EstimateOptions& opt);

// SP sizes the world allows for `cfg`'s mode on `model`: divisors of the world size whose head
// constraints hold (ulysses: heads divisible, kv heads split or replicated; usp: some
// ulysses x ring factorisation does). Ascending; always contains 1.
std::vector<int> valid_sp_sizes(const RunConfig& cfg, const ModelInfo& model, int world_size);

// The smallest of valid_sp_sizes whose estimate fits the GPU (for usp, with the largest Ulysses
// degree that works); nullopt when none does or the capacity is unknown.
std::optional<int> smallest_fitting_sp(const RunConfig& cfg, const ModelInfo& model,
                                       const EstimateOptions& opt);

// A table in GiB, one row per part, with the total against the capacity and the notes.
std::string format_estimate_text(const MemoryEstimate& estimate);

// "12.34 GiB" (1 GiB = 2^30 bytes)
std::string format_gib(double bytes);

}  // namespace studio
