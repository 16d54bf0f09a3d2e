#include "studio/trainer/model/lora.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace studio::trainer {

double LoraSettings::scaling() const {
  return rslora ? alpha / std::sqrt(static_cast<double>(rank)) : alpha / static_cast<double>(rank);
}

bool lora_targets_match(const std::string& module, const std::vector<std::string>& targets) {
  for (const auto& t : targets)
    if (module == t || (module.size() > t.size() && module[module.size() - t.size() - 1] == '.' &&
                        module.compare(module.size() - t.size(), t.size(), t) == 0))
      return true;
  return false;
}

int64_t attach_lora(CausalLMImpl& model, const LoraSettings& s) {
  if (!model.adapter_state().empty())
    throw std::invalid_argument("attach_lora: the model has adapters already");
  std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> found;
  for (const auto& item : model.named_modules()) {
    const std::string& name = item.key();
    if (name.rfind("model.layers.", 0) != 0) continue;
    auto* lin = item.value()->as<LinearImpl>();
    if (!lin) continue;
    if (!lora_targets_match(name, s.targets)) continue;
    found.emplace_back(name, item.value());
  }
  for (const auto& target : s.targets) {
    const bool hit = std::any_of(found.begin(), found.end(), [&](const auto& f) {
      return lora_targets_match(f.first, {target});
    });
    if (!hit)
      throw std::invalid_argument("target module '" + target + "' matches no linear layer of "
                                  "the decoder layers");
  }
  for (auto& [name, module] : found) {
    auto* lin = module->as<LinearImpl>();
    const auto options = lin->weight_options();  // the weight may be held in 4 bits already
    const int64_t out = lin->out_features(), in = lin->in_features();
    lin->lora_A = std::make_shared<LinearImpl>(in, s.rank, /*bias=*/false, options);
    lin->lora_B = std::make_shared<LinearImpl>(s.rank, out, /*bias=*/false, options);
    lin->register_module("lora_A", lin->lora_A);
    lin->register_module("lora_B", lin->lora_B);
    if (s.dora)
      lin->lora_magnitude_vector =
          lin->register_parameter("lora_magnitude_vector", new_parameter({out}, options));
    lin->lora_scaling = s.scaling();
    lin->lora_dropout = s.dropout;
  }
  return static_cast<int64_t>(found.size());
}

std::string adapted_weight_name(const std::string& adapter_name) {
  for (const char* part : {".lora_A.weight", ".lora_B.weight", ".lora_magnitude_vector"}) {
    const std::string p(part);
    if (adapter_name.size() > p.size() &&
        adapter_name.compare(adapter_name.size() - p.size(), p.size(), p) == 0)
      return adapter_name.substr(0, adapter_name.size() - p.size()) + ".weight";
  }
  throw std::invalid_argument(adapter_name + " is not a LoRA adapter's parameter");
}

namespace {

// FNV-1a: a seed per parameter name that does not depend on the standard library.
uint64_t name_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

torch::Tensor initial_adapter_value(const std::string& name, at::IntArrayRef shape, uint64_t seed,
                                    const std::function<torch::Tensor(const std::string&)>& base) {
  torch::NoGradGuard no_grad;
  const auto fp32 = torch::TensorOptions().dtype(torch::kFloat);
  if (ends_with(name, ".lora_B.weight")) return torch::zeros(shape, fp32);
  if (ends_with(name, ".lora_A.weight")) {
    // nn.init.kaiming_uniform_(a=sqrt(5)) on [r, in]: gain sqrt(2 / (1 + 5)), bound
    // gain * sqrt(3 / in) = 1 / sqrt(in).
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed ^ name_hash(name));
    const double bound = 1.0 / std::sqrt(static_cast<double>(shape[1]));
    return torch::empty(shape, fp32).uniform_(-bound, bound, gen);
  }
  if (ends_with(name, ".lora_magnitude_vector")) {
    const torch::Tensor w = base(adapted_weight_name(name)).to(torch::kFloat);
    return w.norm(2, /*dim=*/{1});
  }
  throw std::invalid_argument(name + " is not a LoRA adapter's parameter");
}

torch::Tensor merged_weight(const torch::Tensor& w, const torch::Tensor& a, const torch::Tensor& b,
                            const torch::Tensor& magnitude, double scaling) {
  torch::NoGradGuard no_grad;
  const torch::Tensor merged =
      w.to(torch::kFloat) + torch::mm(b.to(torch::kFloat), a.to(torch::kFloat)) * scaling;
  if (!magnitude.defined()) return merged;
  const torch::Tensor norm = merged.norm(2, /*dim=*/{1}, /*keepdim=*/true);
  return merged * (magnitude.to(torch::kFloat).reshape({-1, 1}) / norm);
}

}  // namespace studio::trainer
