#pragma once
// The parallel layout of one training rank (private to studio_trainer): its place in the dp x sp
// grid (docs/SEQUENCE_PARALLEL.md) and the collectives a step runs, with the helpers that pick a
// micro-batch's rows. The train loop and every objective (objective.h) see the grid through it.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "studio/model_facts/model_flops.h"
#include "studio/trainer/batching/batch.h"
#include "studio/trainer/model/decoder.h"
#include "studio/trainer/parallel/communicator.h"
#include "studio/trainer/sp/layout.h"

namespace studio::trainer {

// This rank's place in the dp x sp grid, and the collectives of the step. Every method is a
// no-op (or local) with one process.
struct Parallel {
  dist::Communicator* comm = nullptr;
  sp::SpLayout layout;
  bool neat_packing = false;  // attention isolates the samples packed into a row

  bool distributed() const { return comm != nullptr && comm->world_size() > 1; }
  bool sequence_parallel() const { return layout.sp > 1; }
  int rank() const { return comm ? comm->rank() : 0; }
  int world() const { return comm ? comm->world_size() : 1; }
  int dp_rank() const { return comm ? comm->dp_rank() : 0; }
  int dp_size() const { return comm ? static_cast<int>(comm->dp()) : 1; }

  // The rows padded as SP needs, then this rank's share of the sequence; `model` is told the
  // global length (RoPE sees global positions).
  Batch local_batch(CausalLM& model, const std::vector<const TokenizedSample*>& rows,
                    int64_t pad_id) const {
    const dist::StepClock::Span counted_as(dist::StepTime::Data);
    Batch global = make_batch(rows, pad_id, sp::sp_pad_multiple(layout), neat_packing);
    // The longest row before SP's padding: length-dependent RoPE (dynamic, longrope) then picks
    // the frequencies the single-process run picks, whatever the SP size pads to.
    int64_t longest = 0;
    for (const auto* r : rows) longest = std::max<int64_t>(longest, int64_t(r->input_ids.size()));
    model->set_rope_sequence_length(longest > 0 ? longest : global.input_ids.size(1));
    // Every rank's attention cuts the segments of whichever tokens meet from the global ones.
    model->set_attention_segments(global.segment_ids);
    return sequence_parallel() ? sp::split_batch(global, layout) : global;
  }
  // Sums a few doubles over a group (world, dp).
  std::vector<double> sum(dist::Group* g, std::vector<double> v, const std::string& what) const {
    if (!g || g->size() == 1) return v;
    auto t = torch::tensor(v, torch::kDouble);
    g->all_reduce_sum(t, what);
    for (size_t i = 0; i < v.size(); ++i) v[i] = t[static_cast<int64_t>(i)].item<double>();
    return v;
  }
  // This DP rank's share of `n` items (evaluation, reference log-probs), cut into batches of
  // `batch`: items dp_rank, dp_rank + dp, ...; every rank of an SP group gets the same batches.
  std::vector<std::vector<size_t>> dp_batches(size_t n, int64_t batch) const {
    const auto step = static_cast<size_t>(std::max<int64_t>(1, batch));
    std::vector<std::vector<size_t>> out;
    for (size_t i = static_cast<size_t>(dp_rank()); i < n; i += static_cast<size_t>(dp_size())) {
      if (out.empty() || out.back().size() == step) out.emplace_back();
      out.back().push_back(i);
    }
    return out;
  }
  // How many batches the DP rank with the most items gets from dp_batches (rank 0): ranks with
  // fewer run idle passes up to it where a forward has world collectives (ZeRO-3's gathers).
  size_t most_dp_batches(size_t n, int64_t batch) const {
    const auto per_rank = (n + static_cast<size_t>(dp_size()) - 1) / static_cast<size_t>(dp_size());
    const auto step = static_cast<size_t>(std::max<int64_t>(1, batch));
    return (per_rank + step - 1) / step;
  }
  dist::Group* world_group() const { return comm ? &comm->world() : nullptr; }
  dist::Group* dp_group() const { return comm ? &comm->dp_group() : nullptr; }
  dist::Group* sp_group() const { return comm ? &comm->sp_group() : nullptr; }
};

inline std::vector<const TokenizedSample*> pick(const std::vector<TokenizedSample>& all,
                                                const std::vector<size_t>& idx) {
  std::vector<const TokenizedSample*> rows;
  for (size_t i : idx) rows.push_back(&all[i]);
  return rows;
}

// Chosen rows first, then rejected rows, so row i and row n+i are one pair.
inline std::vector<const TokenizedSample*> pair_rows(const std::vector<data::PairSample>& all,
                                                     const std::vector<size_t>& idx) {
  std::vector<const TokenizedSample*> rows;
  for (size_t i : idx) rows.push_back(&all[i].chosen);
  for (size_t i : idx) rows.push_back(&all[i].rejected);
  return rows;
}

inline int64_t sample_tokens(const std::vector<const TokenizedSample*>& rows) {
  int64_t n = 0;
  for (const auto* r : rows) n += static_cast<int64_t>(r->input_ids.size());
  return n;
}

// The causal attention spans of the rows for the MFU count: each packed sample when attention
// isolates them (neat packing), else each row.
inline double span_term(const std::vector<const TokenizedSample*>& rows, bool isolated,
                        const studio::ModelInfo& model) {
  std::vector<int64_t> spans;
  for (const auto* r : rows) {
    if (isolated && !r->segment_lengths.empty())
      spans.insert(spans.end(), r->segment_lengths.begin(), r->segment_lengths.end());
    else
      spans.push_back(static_cast<int64_t>(r->input_ids.size()));
  }
  return attention_span_term(spans, &model);
}

}  // namespace studio::trainer
