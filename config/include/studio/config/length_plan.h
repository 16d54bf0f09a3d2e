#pragma once
// The length planner: for a model and a GPU's memory, the longest cutoff_len that fits against
// the number of GPUs, one line per way of running it (SP mode x ZeRO stage x offload and tiling),
// with the published long-context points of 360-LLaMA-Factory, Snowflake's ALST and others
// beside them. What `studio-train estimate --plan` prints and the wizard's Memory page draws;
// every figure is the memory estimate's own (memory_estimate.h), searched as
// longest_fitting_cutoff does. Plain C++ (no Qt, no Torch).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "studio/config/memory_estimate.h"

namespace studio {

// One way of running the model: a line of the plan.
struct PlanOption {
  SpMode mode = SpMode::Ulysses;
  int zero_stage = 3;
  bool offload = false;       // offload_optimizer, and offload_param at stage 3
  bool long_context = false;  // tiled_mlp and offload_activations (with gradient_checkpointing)

  // "ulysses, ZeRO-3 + offload, tiled MLP + activation offload"
  std::string label() const;
  // Sets the keys this option decides (the others stay as the user has them).
  void apply(RunConfig& cfg) const;
};

// One point of a line: `gpus` GPUs (nodes x gpus per node), every one in one sequence-parallel
// group when the model's heads allow it (else the largest SP size that does, the rest data
// parallel).
struct PlanPoint {
  int gpus = 1;
  int nodes = 1;
  int sp = 1;                      // the SP size the point uses
  int ulysses_degree = 1;          // usp: its Ulysses x ring split (ulysses: sp; zigzag-ring: 1)
  std::optional<int64_t> longest;  // the longest cutoff_len that fits; nullopt: not even 1,024
};

struct PlanLine {
  PlanOption option;
  std::vector<PlanPoint> points;  // one per GPU count, in order
};

struct LengthPlan {
  std::vector<int> gpu_counts;  // 1, 2, 4, ... up to the most asked for
  std::vector<PlanLine> lines;
  double capacity_bytes = 0;    // the GPU's memory the plan is for
};

// The plan for cfg's model and stage (its batch size, precision and other keys as they are) on
// GPUs of opt.gpu_capacity_bytes, with up to `gpus_per_node` GPUs a node, for 1, 2, 4, ...,
// max_gpus GPUs. The lines: zigzag-ring, ulysses and usp, each with ZeRO-2, ZeRO-3, ZeRO-3 with
// offload, and ZeRO-3 with offload, tiled MLP and activation offload. Empty lines when the
// capacity is unknown.
LengthPlan plan_lengths(const RunConfig& cfg, const ModelInfo& model, const EstimateOptions& opt,
                        int gpus_per_node = 8, int max_gpus = 64);

// The config of a plan point: cfg with the option's keys, the point's SP size and split, and its
// longest cutoff_len (the caller launches it on point.nodes x gpus-per-node GPUs).
RunConfig config_for(const RunConfig& cfg, const PlanOption& option, const PlanPoint& point);

// Long-context training reported by others, drawn beside the plan (their model and GPUs, which
// are rarely the user's: the label says so).
struct PublishedPoint {
  std::string who;     // "Snowflake ALST"
  std::string what;    // "Llama-3.1-8B SFT, 8 x H100 80 GB"
  int gpus = 1;
  int64_t tokens = 0;
  double gpu_gib = 80;
  std::string source;  // where it is reported
};
const std::vector<PublishedPoint>& published_long_context_points();

}  // namespace studio
