#pragma once
// Model FLOPs and utilisation (MFU), the way the long-context literature counts them
// (docs/events.md "MFU" gives the formula and the peak table):
//   forward FLOPs of one sequence of S tokens =
//       2 * N_matmul * S                          (every linear layer and the LM head)
//     + 2 * L * Hq * D * S * (S + 1)              (causal q.k^T and p.v: token i sees i keys)
//   training = 3 x forward (the backward costs two forwards); DPO adds one forward for the
//   reference model unless its log-probs are precomputed. Recomputation (gradient
//   checkpointing) is not counted: this is model FLOPs utilisation, not hardware FLOPs.
//   MFU = training FLOPs of the tokens of a window / (window seconds x ranks x peak FLOP/s).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "studio/model_facts/model_info.h"

namespace studio {

// Weights that take part in matrix products per token: q/k/v/o, gate/up/down of every layer and
// the LM head (vocab x hidden, tied or not). Embedding lookups, norms and biases are left out.
double matmul_parameters(const ModelInfo& info);

// Sum over attention spans of S * (S + 1): the causal attention term of the formula. A packed
// row whose samples are isolated (neat_packing) counts each sample as its own span. With
// `model` and its sliding windows, the mean over its layers of that sum, a layer with window
// w < S counting w (w + 1) + 2 w (S - w) (token i sees min(i + 1, w) keys).
double attention_span_term(const std::vector<int64_t>& span_lengths,
                           const ModelInfo* model = nullptr);

// Forward FLOPs of `tokens` tokens whose attention spans add up to `span_term`.
double forward_flops(const ModelInfo& info, double tokens, double span_term);

// Training FLOPs of one step: 3 forwards, plus one for a DPO reference computed every step.
double training_flops(const ModelInfo& info, double tokens, double span_term,
                      bool reference_forward);

// Dense bf16/fp16 tensor-core peak of a CUDA device by its name ("NVIDIA H100 80GB HBM3",
// "NVIDIA A100-SXM4-80GB", ...), in TFLOP/s, for `dtype` "bfloat16"/"float16" (or "float32",
// where the table has the device's fp32 peak). nullopt when the device is not in the table.
// STUDIO_PEAK_TFLOPS in the environment, when set to a positive number, overrides the table
// for every device (also for CPU runs, which have no entry).
std::optional<double> peak_tflops(const std::string& device_name, const std::string& dtype);

}  // namespace studio
