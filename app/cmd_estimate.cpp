// studio-train estimate: the per-GPU memory of a run before it starts, and the smallest sequence
// parallel size that fits the GPU.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli_args.h"
#include "commands.h"
#include "studio/config/length_plan.h"
#include "studio/config/memory_estimate.h"
#include "studio/config/validate.h"
#include "studio/trainer/runtime_info.h"

namespace studio::app {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct EstimateArgs {
  std::string path;
  int nproc = 0;  // 0: not given
  int nnodes = 1;
  double gpu_gib = 0;  // 0: not given
  bool json = false;
  bool cpu = false;   // estimate a CPU run (EstimateOptions::cpu)
  bool plan = false;  // --plan: the length planner (length_plan.h)
  int gpus_per_node = 8;
  int max_gpus = 64;
  std::vector<std::string> sets;
};

bool read_args(const Argv& argv, EstimateArgs& out, std::string& error) {
  cli::Args args(argv,
                 {"--nproc", "--nnodes", "--gpu-memory", "--set", "--gpus-per-node", "--max-gpus"},
                 {"--json", "--cpu", "--plan"});
  out.nproc = args.positive_int("--nproc", 0);
  out.plan = args.flag("--plan");
  out.gpus_per_node = args.positive_int("--gpus-per-node", 8);
  out.max_gpus = args.positive_int("--max-gpus", 64);
  if ((args.value("--gpus-per-node") || args.value("--max-gpus")) && !out.plan)
    return error = "--gpus-per-node and --max-gpus are for --plan", false;
  if (out.max_gpus > 4096) return error = "--max-gpus: at most 4096", false;
  out.nnodes = args.positive_int("--nnodes", 1);
  out.json = args.flag("--json");
  out.cpu = args.flag("--cpu");
  out.sets = args.values("--set");
  if (!args.ok()) return error = args.error(), false;
  if (const auto gib = args.value("--gpu-memory")) {
    char* end = nullptr;
    out.gpu_gib = std::strtod(gib->c_str(), &end);
    if (gib->empty() || *end != '\0' || !(out.gpu_gib > 0) || !std::isfinite(out.gpu_gib))
      return error = "--gpu-memory needs a positive number of GiB, got '" + *gib + "'", false;
  }
  if (args.positional().size() != 1) return error = "expected one CONFIG.yaml", false;
  if (args.value("--nnodes") && !args.value("--nproc"))
    return error = "--nnodes needs --nproc (processes per node)", false;
  out.path = args.positional().front();
  return true;
}

struct Capacity {
  double bytes = 0;    // 0: unknown
  std::string source;  // where the figure came from, or why there is none
};

// --gpu-memory, else the smallest CUDA device this engine sees (the one that limits a run),
// else unknown.
Capacity gpu_capacity(double gpu_gib) {
  if (gpu_gib > 0) return {gpu_gib * kGiB, "--gpu-memory"};
  const trainer::RuntimeInfo info = trainer::query_runtime_info();
  const trainer::CudaDeviceInfo* smallest = nullptr;
  for (const auto& d : info.devices)
    if (!smallest || d.total_memory_bytes < smallest->total_memory_bytes) smallest = &d;
  if (smallest)
    return {static_cast<double>(smallest->total_memory_bytes),
            "cuda:" + std::to_string(smallest->index) + " " + smallest->name};
  return {0, std::string("unknown: ") +
                 (info.torch_cuda_build ? "no usable CUDA device here"
                                        : "this studio-train runs on the CPU") +
                 "; give --gpu-memory GIB"};
}

std::string join(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ", ") + std::to_string(x);
  return out;
}

nlohmann::json to_json(const MemoryEstimate& est, const Capacity& cap,
                       const std::vector<int>& sizes, const std::optional<int>& smallest,
                       const std::optional<int64_t>& longest) {
  const MemoryBreakdown& b = est.bytes;
  auto whole = [](double bytes) { return static_cast<int64_t>(std::llround(bytes)); };
  nlohmann::json j;
  for (const MemoryPart& part : memory_parts(b)) j["bytes"][part.key] = whole(part.bytes);
  j["total"] = whole(b.total());
  j["capacity"] = cap.bytes > 0 ? nlohmann::json(whole(cap.bytes)) : nlohmann::json();
  j["capacity_source"] = cap.source;
  j["fits"] = cap.bytes > 0 ? nlohmann::json(est.fits()) : nlohmann::json();
  j["world_size"] = est.world_size;
  j["sp"] = est.sp_size;
  j["ulysses_degree"] = est.ulysses_degree;
  j["ring_degree"] = est.ring_degree;
  j["tokens_per_rank"] = est.tokens_per_rank;
  j["bytes_per_param"] = est.bytes_per_param;
  j["zero_stage"] = est.zero_stage;
  j["model_state_bytes"] = whole(est.model_state_bytes);
  j["offloaded_bytes"] = whole(est.offloaded_bytes);
  j["host_activation_bytes"] = whole(est.host_activation_bytes);
  j["process_host_bytes"] = whole(est.process_host_bytes);
  j["checkpoint_host_bytes"] = {{"rank0", whole(est.checkpoint_host_bytes_rank0)},
                                {"other_ranks", whole(est.checkpoint_host_bytes_other)}};
  const LongContextCosts& lc = est.long_context;
  j["long_context"] = {{"loss_chunk_tokens", lc.loss_chunk_tokens},
                       {"loss_held", whole(lc.loss_held)},
                       {"loss_peak", whole(lc.loss_peak)},
                       {"checkpoints", whole(lc.checkpoints)},
                       {"offloaded_activations", whole(lc.offloaded_activations)},
                       {"layer", whole(lc.layer)},
                       {"mlp_tile_tokens", lc.mlp_tile_tokens},
                       {"mlp_tile", whole(lc.mlp_tile)},
                       {"attention_backward", whole(lc.attention_backward)}};
  j["longest_cutoff_len"] = longest ? nlohmann::json(*longest) : nlohmann::json();
  j["valid_sp_sizes"] = sizes;
  j["smallest_fitting_sp"] = smallest ? nlohmann::json(*smallest) : nlohmann::json();
  j["notes"] = est.notes;
  return j;
}

std::string smallest_text(const Capacity& cap, const std::vector<int>& sizes,
                          const std::optional<int>& smallest, int world) {
  const std::string of =
      " (valid sizes on a world of " + std::to_string(world) + ": " + join(sizes) + ")";
  if (cap.bytes <= 0)
    return "Smallest sequence_parallel_size that fits: unknown without the GPU capacity" + of;
  if (!smallest) return "No sequence_parallel_size fits in " + format_gib(cap.bytes) + of;
  return "Smallest sequence_parallel_size that fits in " + format_gib(cap.bytes) + ": " +
         std::to_string(*smallest) + of;
}

std::string longest_text(const Capacity& cap, const std::optional<int64_t>& longest,
                         const RunConfig& cfg) {
  if (cap.bytes <= 0) return "Longest cutoff_len that fits: unknown without the GPU capacity";
  if (!longest)
    return "Longest cutoff_len that fits in " + format_gib(cap.bytes) +
           ": none (not even 1024 "
           "tokens with these settings)";
  return "Longest cutoff_len that fits in " + format_gib(cap.bytes) + ": " +
         std::to_string(*longest) + " tokens (this world, sequence_parallel_size " +
         std::to_string(cfg.sequence_parallel_size) + " and the other settings unchanged)";
}

// "96k", "1.25M": a length as the plan's table shows it ("-" when nothing fits).
std::string short_tokens(const std::optional<int64_t>& t) {
  if (!t) return "-";
  char buf[32];
  if (*t >= 1'000'000)
    std::snprintf(buf, sizeof buf, "%.2fM", double(*t) / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%lldk", static_cast<long long>(*t / 1000));
  return buf;
}

nlohmann::json plan_json(const LengthPlan& plan, const Capacity& cap) {
  nlohmann::json j;
  j["capacity"] =
      cap.bytes > 0 ? nlohmann::json(static_cast<int64_t>(cap.bytes)) : nlohmann::json();
  j["capacity_source"] = cap.source;
  j["gpu_counts"] = plan.gpu_counts;
  j["lines"] = nlohmann::json::array();
  for (const PlanLine& line : plan.lines) {
    nlohmann::json l;
    l["label"] = line.option.label();
    l["sequence_parallel_mode"] = std::string(to_string(line.option.mode));
    l["zero_stage"] = line.option.zero_stage;
    l["offload"] = line.option.offload;
    l["tiled_mlp_and_activation_offload"] = line.option.long_context;
    l["points"] = nlohmann::json::array();
    for (const PlanPoint& p : line.points)
      l["points"].push_back(
          {{"gpus", p.gpus},
           {"nodes", p.nodes},
           {"sequence_parallel_size", p.sp},
           {"ulysses_degree", p.ulysses_degree},
           {"longest_cutoff_len", p.longest ? nlohmann::json(*p.longest) : nlohmann::json()}});
    j["lines"].push_back(std::move(l));
  }
  j["published"] = nlohmann::json::array();
  for (const PublishedPoint& p : published_long_context_points())
    j["published"].push_back({{"who", p.who},
                              {"what", p.what},
                              {"gpus", p.gpus},
                              {"tokens", p.tokens},
                              {"gpu_gib", p.gpu_gib},
                              {"source", p.source}});
  return j;
}

int print_plan(const EstimateArgs& a, const RunConfig& cfg, const ModelInfo& model,
               EstimateOptions opt, const Capacity& cap) {
  if (cap.bytes <= 0) {
    std::cerr << "estimate --plan: " << cap.source << "\n";
    return kExitInvalid;
  }
  const LengthPlan plan = plan_lengths(cfg, model, opt, a.gpus_per_node, a.max_gpus);
  if (a.json) {
    std::cout << plan_json(plan, cap).dump() << "\n";
    return kExitOk;
  }
  std::cout << a.path << ": " << model.architecture << " " << format_size(model) << ", stage "
            << to_string(cfg.stage) << ": the longest cutoff_len that fits in "
            << format_gib(cap.bytes) << " per GPU (" << cap.source << "), up to " << a.gpus_per_node
            << " GPUs a node, all of them in one sequence-parallel group "
            << "where the model's heads allow it\n";
  size_t width = 0;
  for (const PlanLine& l : plan.lines) width = std::max(width, l.option.label().size());
  std::string head(width, ' ');
  for (int g : plan.gpu_counts) {
    std::string c = std::to_string(g) + " GPU" + (g > 1 ? "s" : "");
    head += "  " + std::string(c.size() < 8 ? 8 - c.size() : 0, ' ') + c;
  }
  std::cout << head << "\n";
  for (const PlanLine& l : plan.lines) {
    std::string row = l.option.label();
    row += std::string(width - row.size(), ' ');
    for (const PlanPoint& p : l.points) {
      std::string c = short_tokens(p.longest);
      if (p.longest && p.sp != p.gpus) c += "*";
      row += "  " + std::string(c.size() < 8 ? 8 - c.size() : 0, ' ') + c;
    }
    std::cout << row << "\n";
  }
  std::cout << "(* the model's heads allow a smaller SP group there; the other GPUs are data "
               "parallel)\nPublished, for comparison (their models and GPUs):\n";
  for (const PublishedPoint& p : published_long_context_points())
    std::cout << "  " << p.who << ": " << short_tokens(p.tokens) << " tokens, " << p.what << " ("
              << p.source << ")\n";
  return kExitOk;
}

}  // namespace

int cmd_estimate(const Argv& argv) {
  EstimateArgs a;
  std::string error;
  if (!read_args(argv, a, error)) return usage_error("estimate: " + error);
  ValidateOptions vopt;
  vopt.nproc_per_node = a.nproc;
  vopt.nnodes = a.nnodes;
  const CheckResult res = check_config_file(a.path, vopt, a.sets);
  if (!print_check(res, a.path)) return kExitInvalid;
  if (!res.model) {
    std::cerr << a.path
              << ": the estimate needs the model's shapes: model_name_or_path must be a "
                 "folder with a readable config.json\n";
    return kExitInvalid;
  }
  const RunConfig& cfg = res.config;
  EstimateOptions opt;
  // Without --nproc: the smallest world the config runs on, one SP group.
  opt.nproc_per_node =
      a.nproc > 0 ? a.nproc : static_cast<int>(std::max<int64_t>(1, cfg.sequence_parallel_size));
  opt.nnodes = a.nnodes;
  if (cfg.deepspeed) {
    opt.deepspeed = read_deepspeed_json(*cfg.deepspeed, error);
    if (!opt.deepspeed) {
      std::cerr << a.path << ": deepspeed: " << error
                << "; the estimate needs its ZeRO stage and offload flags\n";
      return kExitInvalid;
    }
  }
  const Capacity cap = gpu_capacity(a.gpu_gib);
  opt.gpu_capacity_bytes = cap.bytes;
  opt.cpu = a.cpu;
  if (a.plan) return print_plan(a, cfg, *res.model, opt, cap);
  const MemoryEstimate est = estimate_memory(cfg, *res.model, opt);
  const std::vector<int> sizes = valid_sp_sizes(cfg, *res.model, opt.world_size());
  const std::optional<int> smallest = smallest_fitting_sp(cfg, *res.model, opt);
  const std::optional<int64_t> longest = longest_fitting_cutoff(cfg, *res.model, opt);
  if (a.json) {
    std::cout << to_json(est, cap, sizes, smallest, longest).dump() << "\n";
    return kExitOk;
  }
  std::cout << a.path << ": " << res.model->architecture << " " << format_size(*res.model)
            << ", stage " << to_string(cfg.stage) << ", cutoff_len " << cfg.cutoff_len
            << (a.nproc > 0 ? "" : " (no --nproc: the world is one SP group)") << "\n"
            << format_estimate_text(est) << "GPU capacity: "
            << (cap.bytes > 0 ? format_gib(cap.bytes) + " (" + cap.source + ")" : cap.source)
            << "\n"
            << smallest_text(cap, sizes, smallest, opt.world_size()) << "\n"
            << longest_text(cap, longest, cfg) << "\n";
  return kExitOk;
}

}  // namespace studio::app
