#include "studio/trainer/peft_adapter.h"

#include <algorithm>
#include <filesystem>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "studio/base/atomic_file.h"
#include "studio/base/json_file.h"
#include "studio/config/adapters.h"

namespace studio::trainer {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kPrefix = "base_model.model.";

// What LLaMA-Factory writes beside an adapter: the tokenizer's files.
constexpr const char* kTokenizerFiles[] = {
    "tokenizer.json",   "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
    "merges.txt",       "tokenizer.model",       "added_tokens.json",       "chat_template.jinja",
};

[[noreturn]] void refuse(const std::string& file, const std::string& key, const std::string& why) {
  throw std::runtime_error(file + ": " + key + ": " + why);
}

bool empty_or_null(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return true;
  return (j[key].is_object() || j[key].is_array()) && j[key].empty();
}

}  // namespace

PeftAdapter read_peft_adapter_config(const std::string& dir) {
  const std::string file = (fs::path(dir) / kAdapterConfigFile).string();
  json j;
  std::string error;
  if (!read_json_file(file, j, error))
    throw std::runtime_error(error + " (adapter_name_or_path must name a PEFT adapter folder)");
  if (!j.is_object()) throw std::runtime_error(file + ": not a JSON object");
  const std::string type = j.value("peft_type", std::string());
  if (type != "LORA")
    refuse(file, "peft_type", "'" + type + "': studio-train loads LoRA adapters only");
  if (j.value("bias", std::string("none")) != "none")
    refuse(file, "bias", "'" + j.value("bias", std::string()) +
                             "': adapters that train biases are not supported (bias: none only)");
  if (j.value("fan_in_fan_out", false))
    refuse(file, "fan_in_fan_out", "true is for GPT-2-style Conv1D layers, which the supported "
                                   "decoders do not have");
  for (const char* key : {"rank_pattern", "alpha_pattern", "layers_to_transform",
                          "layers_pattern", "exclude_modules", "layer_replication",
                          "trainable_token_indices"})
    if (!empty_or_null(j, key))
      refuse(file, key, "per-layer adapter settings are not supported; every adapted layer must "
                        "share r and lora_alpha");
  if (j.value("use_qalora", false)) refuse(file, "use_qalora", "QA-LoRA is not supported");
  PeftAdapter a;
  a.lora.rank = j.value("r", int64_t{8});
  a.lora.alpha = j.value("lora_alpha", 8.0);
  a.lora.dropout = j.value("lora_dropout", 0.0);
  a.lora.rslora = j.value("use_rslora", false);
  a.lora.dora = j.value("use_dora", false);
  if (a.lora.rank < 1) refuse(file, "r", "must be at least 1");
  const json& targets = j.contains("target_modules") ? j["target_modules"] : json();
  if (targets.is_string()) {
    const std::string t = targets.get<std::string>();
    if (t != "all-linear")
      refuse(file, "target_modules", "'" + t + "' is a regular expression; studio-train takes a "
                                     "list of module names or all-linear");
    a.lora.targets = {"all-linear"};
  } else if (targets.is_array()) {
    for (const auto& t : targets) {
      if (!t.is_string()) refuse(file, "target_modules", "expected module names");
      a.lora.targets.push_back(t.get<std::string>());
    }
  } else {
    refuse(file, "target_modules", "missing");
  }
  if (j.contains("modules_to_save") && j["modules_to_save"].is_array())
    for (const auto& m : j["modules_to_save"]) a.modules_to_save.push_back(m.get<std::string>());
  a.base_model = j.value("base_model_name_or_path", std::string());
  return a;
}

std::string peft_adapter_config_json(const PeftAdapter& a) {
  json j = json::object();
  // The fields of peft 0.21's LoraConfig that say what the adapter is; the rest take PEFT's
  // defaults when it loads the file.
  j["alpha_pattern"] = json::object();
  j["auto_mapping"] = nullptr;
  j["base_model_name_or_path"] = a.base_model;
  j["bias"] = "none";
  j["fan_in_fan_out"] = false;
  j["inference_mode"] = true;
  j["init_lora_weights"] = true;
  j["layers_pattern"] = nullptr;
  j["layers_to_transform"] = nullptr;
  j["lora_alpha"] = a.lora.alpha;
  j["lora_dropout"] = a.lora.dropout;
  j["modules_to_save"] = a.modules_to_save.empty() ? json(nullptr) : json(a.modules_to_save);
  j["peft_type"] = "LORA";
  j["r"] = a.lora.rank;
  j["rank_pattern"] = json::object();
  j["revision"] = nullptr;
  std::vector<std::string> targets = a.lora.targets;
  std::sort(targets.begin(), targets.end());
  j["target_modules"] = targets;
  j["task_type"] = "CAUSAL_LM";
  j["use_dora"] = a.lora.dora;
  j["use_rslora"] = a.lora.rslora;
  return j.dump(2) + "\n";
}

std::string peft_tensor_name(const std::string& engine_name) { return kPrefix + engine_name; }

std::map<std::string, torch::Tensor> read_peft_adapter_tensors(
    const std::string& dir, const std::map<std::string, std::vector<int64_t>>& expected) {
  const fs::path path = fs::path(dir) / kAdapterWeightsFile;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    if (fs::exists(fs::path(dir) / "adapter_model.bin", ec))
      throw std::runtime_error(path.string() + " is missing; the folder holds adapter_model.bin "
                               "(pickle), which studio-train does not read: save the adapter "
                               "with safe_serialization=True");
    throw std::runtime_error(path.string() + " is missing");
  }
  const SafetensorsFile file = SafetensorsFile::open(path.string());
  std::map<std::string, torch::Tensor> out;
  std::vector<std::string> unexpected;
  for (const auto& name : file.names()) {
    const std::string engine = name.rfind(kPrefix, 0) == 0 ? name.substr(std::string(kPrefix).size())
                                                           : name;
    auto it = expected.find(engine);
    if (it == expected.end()) {
      unexpected.push_back(name);
      continue;
    }
    torch::Tensor t = file.tensor(name);
    if (t.sizes().vec() != it->second)
      throw std::runtime_error(path.string() + ": " + name + " is " + c10::str(t.sizes()) +
                               ", the model's adapter needs " + c10::str(at::IntArrayRef(it->second)) +
                               " (an adapter of another rank or model?)");
    out.emplace(engine, t);
  }
  if (!unexpected.empty())
    throw std::runtime_error(path.string() + ": " + unexpected.front() +
                             (unexpected.size() > 1
                                  ? " and " + std::to_string(unexpected.size() - 1) + " more"
                                  : std::string()) +
                             " belong to no adapted layer of this model (its adapter_config.json "
                             "does not match the file, or the adapter is for another model)");
  for (const auto& [name, shape] : expected)
    if (!out.count(name))
      throw std::runtime_error(path.string() + ": " + peft_tensor_name(name) + " is missing");
  return out;
}

std::vector<std::string> expand_lora_targets(const std::vector<std::string>& targets,
                                             const ModelInfo& model) {
  std::vector<std::string> out;
  for (const auto& t : targets)
    if (t == "all-linear" || t == "all")
      for (const auto& l : decoder_linears(model)) out.push_back(l.name);
    else
      out.push_back(t);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::map<std::string, std::vector<int64_t>> adapter_file_shapes(CausalLMImpl& model,
                                                                 const PeftAdapter& a) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& item : model.named_modules()) {
    const std::string& name = item.key();
    if (name.rfind("model.layers.", 0) != 0 || name.find(".lora_") != std::string::npos) continue;
    auto* lin = item.value()->as<LinearImpl>();
    if (!lin || !lora_targets_match(name, a.lora.targets)) continue;
    // A QLoRA base weight keeps its shape in its 4-bit form.
    const auto shape = lin->quant ? lin->quant->shape() : lin->weight.sizes().vec();
    const int64_t o = shape[0], i = shape[1], r = a.lora.rank;
    out[name + ".lora_A.weight"] = {r, i};
    out[name + ".lora_B.weight"] = {o, r};
    if (a.lora.dora) out[name + ".lora_magnitude_vector"] = {o};
  }
  // PEFT's modules_to_save: every module whose path ends with the name.
  const auto base = model.expected_shapes();
  for (const auto& module : a.modules_to_save) {
    bool any = false;
    for (const auto& [name, shape] : base) {
      const std::string path = name.substr(0, name.rfind('.'));
      if (path.size() < module.size() ||
          path.compare(path.size() - module.size(), module.size(), module) != 0)
        continue;
      out[name] = shape;
      any = true;
    }
    if (!any)
      throw std::runtime_error("modules_to_save '" + module + "' names no module of this model");
  }
  return out;
}

PeftAdapter load_peft_adapter(CausalLMImpl& model, const std::string& dir) {
  PeftAdapter a = read_peft_adapter_config(dir);
  a.lora.targets = expand_lora_targets(a.lora.targets, model.info());
  attach_lora(model, a.lora);
  const auto tensors = read_peft_adapter_tensors(dir, adapter_file_shapes(model, a));
  torch::NoGradGuard no_grad;
  for (auto& [name, p] : model.adapter_state()) p.copy_(tensors.at(name));
  for (auto& [name, p] : model.hf_state())
    if (auto it = tensors.find(name); it != tensors.end()) p.copy_(it->second);
  return a;
}

void save_peft_adapter(const std::string& dir, const NamedTensors& tensors, const PeftAdapter& a,
                       const std::string& source_dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create " + dir + ": " + ec.message());
  NamedTensors named;
  for (const auto& [name, t] : tensors) named.emplace_back(peft_tensor_name(name), t);
  write_safetensors((fs::path(dir) / kAdapterWeightsFile).string(), named, {{"format", "pt"}},
                    torch::kFloat);
  if (std::string e = write_file_atomic((fs::path(dir) / kAdapterConfigFile).string(),
                                        peft_adapter_config_json(a));
      !e.empty())
    throw std::runtime_error(e);
  if (source_dir.empty()) return;
  for (const char* name : kTokenizerFiles) {
    const fs::path from = fs::path(source_dir) / name;
    if (!fs::is_regular_file(from, ec)) continue;
    std::string content, error;
    if (!read_file(from.string(), content, error)) throw std::runtime_error(error);
    if (std::string e = write_file_atomic((fs::path(dir) / name).string(), content); !e.empty())
      throw std::runtime_error(e);
  }
}

}  // namespace studio::trainer
