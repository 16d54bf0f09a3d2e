#include "studio/trainer/model_folder.h"

#include <filesystem>
#include <stdexcept>

#include "studio/trainer/hf_checkpoint.h"

namespace studio::trainer {

void load_weights(CausalLM& model, const std::string& dir) {
  auto reader = CheckpointReader::open(dir);
  reader.check_shapes(model->expected_shapes());
  model->load_hf_state([&](const std::string& name) { return reader.tensor(name); });
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
