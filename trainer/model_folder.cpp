#include "studio/trainer/model_folder.h"

#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>

#include "studio/trainer/hf_checkpoint.h"
#include "studio/trainer/tensors/safetensors.h"

namespace studio::trainer {

WeightGetter model_weights(const std::string& dir, CausalLM& model, uint64_t seed,
                           std::string* head_note) {
  auto reader = std::make_shared<CheckpointReader>(CheckpointReader::open(dir));
  std::map<std::string, std::vector<int64_t>> own, head;
  for (auto& [name, shape] : model->expected_shapes())
    (is_value_head_tensor(name) ? head : own)[name] = shape;
  reader->check_shapes(own);
  if (head.empty())
    return [reader](const std::string& name) { return reader->tensor(name); };

  namespace fs = std::filesystem;
  const fs::path file = fs::path(dir) / kValueHeadFile;
  std::error_code ec;
  auto values = std::make_shared<std::map<std::string, torch::Tensor>>();
  if (fs::exists(file, ec)) {
    const SafetensorsFile f = SafetensorsFile::open(file.string());
    for (const auto& [name, shape] : head) {
      if (!f.has(name))
        throw CheckpointError(file.string() + ": no tensor '" + name +
                              "' (a value head file holds v_head.summary.weight and "
                              "v_head.summary.bias); remove the file to start a new head");
      if (f.info(name).shape != shape)
        throw CheckpointError(file.string() + ": tensor '" + name + "' has shape " +
                              c10::str(f.info(name).shape) + ", the model's hidden size implies " +
                              c10::str(shape) + " (a value head of another model?)");
      (*values)[name] = f.tensor(name);
    }
    if (head_note) *head_note = "value head read from " + file.string();
  } else {
    if (fs::exists(fs::path(dir) / "value_head.bin", ec))
      throw CheckpointError((fs::path(dir) / "value_head.bin").string() +
                            ": a value head in PyTorch's pickle form, which studio-train does "
                            "not read; save it as value_head.safetensors (safetensors.torch."
                            "save_file) or remove it to start a new head");
    ValueHead fresh(model->info().hidden_size, torch::TensorOptions().dtype(torch::kFloat));
    fresh->reset(seed);
    for (const auto& item : fresh->named_parameters(/*recurse=*/true))
      (*values)["v_head." + item.key()] = item.value().detach();
    if (head_note)
      *head_note = "value head initialised (seed " + std::to_string(seed) + ", TRL's default): " +
                   dir + " has no " + kValueHeadFile;
  }
  return [reader, values](const std::string& name) {
    const auto it = values->find(name);
    return it != values->end() ? it->second : reader->tensor(name);
  };
}

void load_weights(CausalLM& model, const std::string& dir, uint64_t seed, std::string* head_note) {
  model->load_hf_state(model_weights(dir, model, seed, head_note));
}

CausalLM load_model_folder(const std::string& dir, const ModelOptions& options) {
  std::string error;
  auto info = read_model_info(dir, error);
  if (!info) throw std::runtime_error(error);
  CausalLM model(*info, options);
  load_weights(model, dir);
  return model;
}

void init_model_folder(const std::string& config_json, const std::string& out_dir, uint64_t seed,
                       torch::Dtype dtype) {
  std::string error;
  auto info = read_model_info(config_json, error);
  if (!info) throw std::runtime_error(error);
  ModelOptions opt;
  opt.dtype = torch::kFloat;
  CausalLM model(*info, opt);
  model->init_weights(seed);
  HfSaveOptions save;
  save.dtype = dtype;
  const std::filesystem::path cfg(config_json);
  save.source_dir = std::filesystem::is_directory(cfg) ? cfg.string() : cfg.parent_path().string();
  save_hf_model(out_dir, model->hf_state(), save);
}

}  // namespace studio::trainer
