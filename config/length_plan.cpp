#include "studio/config/length_plan.h"

#include <algorithm>

namespace studio {

std::string PlanOption::label() const {
  std::string out(to_string(mode));
  out += zero_stage >= 3 ? ", ZeRO-3" : ", ZeRO-" + std::to_string(zero_stage);
  if (offload) out += " + offload";
  if (long_context) out += ", tiled MLP + activation offload";
  return out;
}

void PlanOption::apply(RunConfig& cfg) const {
  cfg.sequence_parallel_mode = mode;
  cfg.zero_stage = zero_stage;
  cfg.deepspeed.reset();  // the option decides the ZeRO keys
  cfg.offload_optimizer = offload;
  cfg.offload_param = offload && zero_stage >= 3;
  cfg.tiled_mlp = long_context;
  cfg.offload_activations = long_context;
  if (long_context) cfg.gradient_checkpointing = true;
}

namespace {

// The SP size and split a point of `gpus` GPUs uses: all of them when the mode allows it on this
// model, else the largest that does (the rest data parallel).
void choose_sp(const RunConfig& cfg, const ModelInfo& model, int gpus, PlanPoint& p) {
  const auto sizes = valid_sp_sizes(cfg, model, gpus);
  p.sp = sizes.empty() ? 1 : sizes.back();
  p.ulysses_degree = cfg.sequence_parallel_mode == SpMode::Ulysses ? p.sp
                     : cfg.sequence_parallel_mode == SpMode::Usp
                         ? static_cast<int>(largest_ulysses_degree(model, p.sp))
                         : 1;
}

}  // namespace

RunConfig config_for(const RunConfig& cfg, const PlanOption& option, const PlanPoint& point) {
  RunConfig c = cfg;
  option.apply(c);
  c.sequence_parallel_size = point.sp;
  if (option.mode == SpMode::Usp) {
    c.sequence_parallel_ulysses_degree = point.ulysses_degree;
    c.sequence_parallel_ring_degree = point.sp / std::max(1, point.ulysses_degree);
  }
  if (point.longest) c.cutoff_len = *point.longest;
  return c;
}

LengthPlan plan_lengths(const RunConfig& cfg, const ModelInfo& model, const EstimateOptions& opt,
                        int gpus_per_node, int max_gpus) {
  LengthPlan plan;
  plan.capacity_bytes = opt.gpu_capacity_bytes;
  gpus_per_node = std::max(1, gpus_per_node);
  for (int g = 1; g <= std::max(1, max_gpus); g *= 2) plan.gpu_counts.push_back(g);
  if (opt.gpu_capacity_bytes <= 0) return plan;
  for (SpMode mode : {SpMode::ZigzagRing, SpMode::Ulysses, SpMode::Usp}) {
    for (const PlanOption& o : {PlanOption{mode, 2, false, false}, PlanOption{mode, 3, false, false},
                                PlanOption{mode, 3, true, false}, PlanOption{mode, 3, true, true}}) {
      PlanLine line;
      line.option = o;
      for (int gpus : plan.gpu_counts) {
        PlanPoint p;
        p.gpus = gpus;
        p.nodes = (gpus + gpus_per_node - 1) / gpus_per_node;
        RunConfig c = cfg;
        o.apply(c);
        choose_sp(c, model, gpus, p);
        c = config_for(cfg, o, p);
        EstimateOptions e = opt;
        e.nproc_per_node = std::min(gpus, gpus_per_node);
        e.nnodes = p.nodes;
        e.deepspeed.reset();
        p.longest = longest_fitting_cutoff(c, model, e);
        line.points.push_back(p);
      }
      plan.lines.push_back(std::move(line));
    }
  }
  return plan;
}

const std::vector<PublishedPoint>& published_long_context_points() {
  // ../shared/reference/performance-anchors.md, "Long context: what others report".
  static const std::vector<PublishedPoint> points = {
      {"Snowflake ALST", "Llama-3.1-8B, 1 x H100 80 GB", 1, 500'000, 80,
       "arXiv 2506.13996"},
      {"Snowflake ALST", "Llama-3.1-8B, 8 x H100 80 GB", 8, 3'700'000, 80, "arXiv 2506.13996"},
      {"Snowflake ALST", "Llama-3.1-8B, 32 x H100 80 GB", 32, 15'000'000, 80,
       "arXiv 2506.13996"},
      {"360-LLaMA-Factory", "Qwen2.5-7B SFT, 8 x A800 80 GB", 8, 210'000, 80,
       "github.com/Qihoo360/360-LLaMA-Factory"},
      {"360-LLaMA-Factory", "Qwen2.5-7B DPO, 8 x A800 80 GB", 8, 84'000, 80,
       "github.com/Qihoo360/360-LLaMA-Factory"},
      {"TRL", "Qwen3-8B SFT, 8 x H100 80 GB", 8, 1'048'576, 80,
       "TRL example sft_qwen3_8b_1m_context"},
  };
  return points;
}

}  // namespace studio
