#include "adapter_setup.h"

#include <algorithm>
#include <map>
#include <memory>
#include <stdexcept>

#include "studio/config/adapters.h"

namespace studio::trainer {
namespace {

PeftAdapter adapter_of_folder(const std::string& dir, const ModelInfo& info) {
  PeftAdapter a = read_peft_adapter_config(dir);
  a.lora.targets = expand_lora_targets(a.lora.targets, info);
  // Full module paths (PEFT writes all-linear's that way) stay as they are; a leaf name must be
  // one of the decoder's linear layers.
  const auto linears = decoder_linears(info);
  for (const auto& t : a.lora.targets)
    if (t.find('.') == std::string::npos &&
        std::none_of(linears.begin(), linears.end(), [&](const auto& l) { return l.name == t; }))
      throw std::runtime_error(dir + "/" + kAdapterConfigFile + ": target_modules: '" + t +
                               "' is not a linear layer of this model's decoder layers (an "
                               "adapter for another architecture?)");
  return a;
}

}  // namespace

AdapterPlan plan_adapters(const RunConfig& cfg, const ModelInfo& info) {
  AdapterPlan plan;
  const auto& dirs = cfg.adapter_name_or_path;
  const bool continue_last = !dirs.empty() && !cfg.create_new_adapter;
  for (size_t i = 0; i < dirs.size(); ++i) {
    if (continue_last && i + 1 == dirs.size()) break;
    adapter_of_folder(dirs[i], info);  // checked now, read when the weights are
    plan.merged.push_back(dirs[i]);
  }
  if (continue_last) {
    plan.continued = dirs.back();
    plan.adapter = adapter_of_folder(plan.continued, info);
    plan.notes.push_back("continuing the adapter of " + plan.continued + " (r " +
                         std::to_string(plan.adapter.lora.rank) + ", lora_alpha " +
                         c10::str(plan.adapter.lora.alpha) + "): its adapter_config.json, not "
                         "this run's lora_* keys, sets its shape, as in LLaMA-Factory");
  } else {
    std::string error;
    plan.adapter.lora.rank = cfg.lora_rank;
    plan.adapter.lora.alpha = cfg.lora_alpha.value_or(2.0 * static_cast<double>(cfg.lora_rank));
    plan.adapter.lora.dropout = cfg.lora_dropout;
    plan.adapter.lora.rslora = cfg.use_rslora;
    plan.adapter.lora.dora = cfg.use_dora;
    plan.adapter.lora.targets = lora_target_modules(cfg, info, error);
    if (!error.empty()) throw std::invalid_argument("lora_target: " + error);
    plan.adapter.modules_to_save = cfg.additional_target;
    additional_target_parameters(cfg, info, error);
    if (!error.empty()) throw std::invalid_argument("additional_target: " + error);
  }
  plan.adapter.base_model = cfg.model_name_or_path;
  for (const auto& dir : plan.merged) plan.notes.push_back("merged the adapter of " + dir + " into the base weights");
  return plan;
}

WeightGetter merged_base(const AdapterPlan& plan, CausalLMImpl& model, WeightGetter base) {
  if (plan.merged.empty()) return base;
  struct Merged {
    PeftAdapter adapter;
    std::map<std::string, torch::Tensor> tensors;
  };
  auto adapters = std::make_shared<std::vector<Merged>>();
  for (const auto& dir : plan.merged) {
    Merged m;
    m.adapter = adapter_of_folder(dir, model.info());
    m.tensors = read_peft_adapter_tensors(dir, adapter_file_shapes(model, m.adapter));
    adapters->push_back(std::move(m));
  }
  return [adapters, base](const std::string& name) {
    torch::Tensor w = base(name);
    const std::string prefix = name.size() > 7 ? name.substr(0, name.size() - 7) : name;  // ".weight"
    for (const auto& m : *adapters) {
      if (auto it = m.tensors.find(name); it != m.tensors.end()) {  // modules_to_save
        w = it->second;
        continue;
      }
      auto a = m.tensors.find(prefix + ".lora_A.weight");
      if (a == m.tensors.end()) continue;
      auto mag = m.tensors.find(prefix + ".lora_magnitude_vector");
      w = merged_weight(w, a->second, m.tensors.at(prefix + ".lora_B.weight"),
                        mag == m.tensors.end() ? torch::Tensor() : mag->second,
                        m.adapter.lora.scaling());
    }
    return w;
  };
}

WeightGetter with_adapter(const AdapterPlan& plan, CausalLMImpl& model, WeightGetter base,
                          const std::string& adapter_dir, uint64_t seed) {
  std::shared_ptr<std::map<std::string, torch::Tensor>> saved;
  if (!adapter_dir.empty())
    saved = std::make_shared<std::map<std::string, torch::Tensor>>(
        read_peft_adapter_tensors(adapter_dir, adapter_file_shapes(model, plan.adapter)));
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& [name, p] : model.adapter_state()) shapes[name] = p.sizes().vec();
  return [saved, base, shapes = std::move(shapes), seed](const std::string& name) -> torch::Tensor {
    if (saved)
      if (auto it = saved->find(name); it != saved->end()) return it->second;
    if (auto it = shapes.find(name); it != shapes.end())
      return initial_adapter_value(name, it->second, seed, base);
    return base(name);
  };
}

}  // namespace studio::trainer
