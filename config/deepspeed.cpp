#include "studio/config/deepspeed.h"

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "studio/base/json_file.h"
#include "studio/base/whole_number.h"

namespace studio {

std::optional<DeepSpeedRequest> read_deepspeed_json(const std::string& path, std::string& error) {
  nlohmann::json j;
  if (!read_json_file(path, j, error)) return std::nullopt;
  if (!j.is_object()) return error = path + ": not a JSON object", std::nullopt;
  DeepSpeedRequest req;
  auto fail = [&](const std::string& what) {
    error = path + ": " + what;
    return std::nullopt;
  };
  // A number or boolean kept for comparison; "auto" (or absent) leaves it to the YAML.
  auto keep = [&](const std::string& dotted, const nlohmann::json& v) -> bool {
    if (v.is_string() && v.get<std::string>() == "auto") return true;
    if (v.is_boolean()) req.fixed[dotted] = v.get<bool>() ? 1 : 0;
    else if (v.is_number()) req.fixed[dotted] = v.get<double>();
    else return false;
    return true;
  };
  // Fields that only tune DeepSpeed's own engine (studio-train's schedule replaces them), and
  // ZeRO features it does not implement, with why.
  static const std::set<std::string> tuning = {
      "overlap_comm", "contiguous_gradients", "reduce_scatter", "allgather_partitions",
      "reduce_bucket_size", "allgather_bucket_size", "stage3_prefetch_bucket_size",
      "stage3_param_persistence_threshold", "stage3_max_live_parameters",
      "stage3_max_reuse_distance", "stage3_gather_16bit_weights_on_model_save", "sub_group_size",
      "round_robin_gradients", "elastic_checkpoint", "load_from_fp32_weights",
      "ignore_unused_parameters", "use_multi_rank_bucket_allreduce", "memory_efficient_linear"};
  static const std::map<std::string, std::string> not_implemented = {
      {"zero_hpz_partition_size", "hierarchical partitioning is not implemented; the world is one "
                                  "partition group"},
      {"zero_quantized_weights", "not implemented: weights are gathered in the model dtype"},
      {"zero_quantized_gradients", "not implemented: gradients are reduced in fp32"}};
  const auto zero = j.find("zero_optimization");
  if (zero != j.end()) {
    if (!zero->is_object()) return fail("zero_optimization is not an object");
    for (const auto& [key, v] : zero->items()) {
      if (key == "stage") {
        if (std::string problem = json_whole(v, req.zero_stage, {0, 3}); !problem.empty())
          return fail("zero_optimization.stage must be 0, 1, 2 or 3: " + problem);
      } else if (key == "offload_optimizer" || key == "offload_param") {
        if (!v.is_object()) return fail("zero_optimization." + key + " is not an object");
        if (v.contains("device") && !v["device"].is_string())
          return fail("zero_optimization." + key + ".device must be \"cpu\" or \"none\"");
        const std::string device = v.value("device", "none");
        if (device == "nvme")
          return fail("zero_optimization." + key + ".device: nvme offload is not implemented "
                      "by studio-train; use \"cpu\"");
        if (device != "cpu" && device != "none")
          return fail("zero_optimization." + key + ".device must be \"cpu\" or \"none\", got \"" +
                      device + "\"");
        (key == "offload_optimizer" ? req.offload_optimizer : req.offload_param) = device == "cpu";
        if (v.contains("pin_memory") && v["pin_memory"].is_boolean() && !v["pin_memory"].get<bool>())
          req.pin_memory = false;
        for (const auto& [sub, sv] : v.items())
          if (sub != "device" && sub != "pin_memory")
            req.notes.push_back("zero_optimization." + key + "." + sub +
                                ": not used (offload goes to pinned CPU memory, updated by "
                                "studio-train's own CPU AdamW)");
      } else if (tuning.count(key)) {
        req.tuning.push_back("zero_optimization." + key);
      } else if (auto it = not_implemented.find(key); it != not_implemented.end()) {
        req.notes.push_back("zero_optimization." + key + ": " + it->second);
      } else {
        req.notes.push_back("zero_optimization." + key + ": unknown to studio-train, not used");
      }
    }
  }
  for (const auto& [key, v] : j.items()) {
    if (key == "zero_optimization") continue;
    if (key == "train_micro_batch_size_per_gpu" || key == "gradient_accumulation_steps" ||
        key == "train_batch_size") {
      // Counts: whole numbers within int32's range, as the YAML's are, so that the comparison
      // with the YAML's (a double holds them exactly) is exact.
      if (v.is_string() && v.get<std::string>() == "auto") continue;
      if (!v.is_number()) return fail(key + " must be a whole number or \"auto\"");
      std::int32_t n = 0;
      if (const std::string why = json_whole(v, n); !why.empty()) return fail(key + ": " + why);
      req.fixed[key] = n;
    } else if (key == "gradient_clipping") {
      if (!keep(key, v)) return fail(key + " must be a number or \"auto\"");
    } else if (key == "bf16" || key == "fp16") {
      if (!v.is_object()) return fail(key + " is not an object");
      if (v.contains("enabled") && !keep(key + ".enabled", v["enabled"]))
        return fail(key + ".enabled must be true, false or \"auto\"");
    } else if (key == "optimizer") {
      if (!v.is_object()) return fail("optimizer is not an object");
      if (v.contains("type") && !v["type"].is_string())
        return fail("optimizer.type must be a string");
      std::string type = v.value("type", "AdamW");
      std::transform(type.begin(), type.end(), type.begin(),
                     [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
      if (type != "adamw" && type != "adam")
        return fail("optimizer.type \"" + v["type"].get<std::string>() +
                    "\": studio-train trains with AdamW only");
      if (v.contains("params") && v["params"].is_object())
        for (const auto& [pk, pv] : v["params"].items()) {
          if (pk == "betas") {
            if (!(pv.is_string() && pv.get<std::string>() == "auto") &&
                !(pv.is_array() && pv.size() == 2 && keep("optimizer.params.betas.0", pv[0]) &&
                  keep("optimizer.params.betas.1", pv[1])))
              return fail("optimizer.params.betas must be two numbers or \"auto\"");
          } else if (pk == "lr" || pk == "eps" || pk == "weight_decay") {
            if (!keep("optimizer.params." + pk, pv))
              return fail("optimizer.params." + pk + " must be a number or \"auto\"");
          } else {
            req.notes.push_back("optimizer.params." + pk + ": not used");
          }
        }
    } else if (key == "scheduler") {
      req.notes.push_back("scheduler: not used; the schedule is lr_scheduler_type's (with "
                          "warmup_steps / warmup_ratio), as when the JSON leaves it out");
    } else if (key == "activation_checkpointing") {
      req.notes.push_back(
          "activation_checkpointing: not used; set gradient_checkpointing: true (and "
          "offload_activations: true for what cpu_checkpointing does)");
    } else if (key == "communication_data_type") {
      req.notes.push_back("communication_data_type: not used; gradients are reduced in fp32");
    } else if (key == "zero_allow_untested_optimizer" || key == "steps_per_print" ||
               key == "wall_clock_breakdown" || key == "zero_force_ds_cpu_optimizer") {
      // No effect on the run, nothing to report.
    } else {
      req.notes.push_back(key + ": unknown to studio-train, not used");
    }
  }
  return req;
}

ZeroRequest zero_request(const RunConfig& cfg, const std::optional<DeepSpeedRequest>& ds) {
  ZeroRequest z;
  z.stage = cfg.zero_stage ? static_cast<int>(*cfg.zero_stage) : (ds ? ds->zero_stage : 0);
  z.offload_optimizer = cfg.offload_optimizer || (ds && ds->offload_optimizer);
  z.offload_param = cfg.offload_param || (ds && ds->offload_param);
  z.pin_memory = !ds || ds->pin_memory;
  if (z.offload_param) z.offload_optimizer = true;
  return z;
}

std::string zero_request_problem(const ZeroRequest& z) {
  const std::string stage = std::to_string(z.stage);
  if (z.stage < 0 || z.stage > 3) return "zero_stage must be 0, 1, 2 or 3, got " + stage;
  if (z.offload_param && z.stage < 3)
    return "offload_param needs ZeRO stage 3: only there are the weights sharded (this run asks "
           "for stage " + stage + ")";
  if (z.offload_optimizer && z.stage < 1)
    return "offload_optimizer needs ZeRO stage 1 or more (this run asks for stage " + stage + ")";
  return {};
}

}  // namespace studio
