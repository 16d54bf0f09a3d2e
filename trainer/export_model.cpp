#include "studio/trainer/export_model.h"

#include <stdexcept>

#include "adapter_setup.h"
#include "studio/model_facts/model_info.h"
#include "studio/trainer/hf_checkpoint.h"
#include "studio/trainer/model/layers.h"
#include "studio/trainer/model_folder.h"
#include "studio/trainer/runtime_info.h"

namespace studio::trainer {

torch::ScalarType export_dtype(const std::string& infer_dtype, const std::string& base, bool cuda) {
  if (infer_dtype == "float16") return torch::kHalf;
  if (infer_dtype == "bfloat16") return torch::kBFloat16;
  if (infer_dtype == "float32") return torch::kFloat;
  if (infer_dtype != "auto")
    throw std::invalid_argument("infer_dtype: '" + infer_dtype +
                                "' is not one of auto, float16, bfloat16, float32");
  const auto from_base = dtype_from_torch_dtype_name(base);
  if (!from_base || *from_base == torch::kFloat) return cuda ? torch::kBFloat16 : torch::kFloat;
  return *from_base;
}

ExportResult export_merged_model(const RunConfig& cfg) {
  if (!cfg.export_dir || cfg.export_dir->empty())
    throw std::invalid_argument("export_dir: not set: give the folder the merged model goes to");
  if (cfg.export_size < 1)
    throw std::invalid_argument("export_size: must be at least 1 (GB per shard), got " +
                                std::to_string(cfg.export_size));
  if (cfg.export_device != "cpu" && cfg.export_device != "auto")
    throw std::invalid_argument("export_device: '" + cfg.export_device + "' is not cpu or auto");
  if (cfg.export_legacy_format)
    throw std::invalid_argument("export_legacy_format: true asks for pickle .bin files, which "
                                "studio-train does not write (transformers 5 writes safetensors "
                                "only): remove it");
  if (cfg.quantized())
    throw std::invalid_argument("quantization_bit: cannot merge adapters into a quantized model "
                                "(LLaMA-Factory's rule): remove quantization_bit; the merge "
                                "takes the base at its own precision");
  if (cfg.finetuning_type == FinetuningType::Freeze)
    throw std::invalid_argument("finetuning_type: freeze trains whole weights, which its output "
                                "folder holds already: there is nothing to merge");
  std::string error;
  const auto info = read_model_info(cfg.model_name_or_path, error);
  if (!info) throw std::runtime_error(error);
  if (info->quantized_on_disk())
    throw std::invalid_argument(
        "model_name_or_path: " + cfg.model_name_or_path + " is quantized on disk (" +
        info->quantization.method + ", " + std::to_string(info->quantization.bits) +
        "-bit): cannot merge adapters into a quantized model (LLaMA-Factory's rule); give the "
        "unquantized model the quantized one was made from, the adapter merges into it");
  ExportResult result;
  result.dtype = export_dtype(cfg.infer_dtype, info->torch_dtype, query_runtime_info().cuda_available);
  // The model only names the weights and gives their shapes: no bytes.
  CausalLM model(nullptr);
  {
    DeferredAllocation no_bytes;
    model = CausalLM(*info, ModelOptions{});
  }
  AdapterPlan plan;
  plan.merged = cfg.adapter_name_or_path;
  const WeightGetter merged = merged_base(plan, *model, model_weights(cfg.model_name_or_path, model));
  NamedTensors metas;
  for (const auto& [name, p] : model->hf_state())
    metas.emplace_back(name, torch::empty(p.sizes(), torch::TensorOptions().dtype(torch::kFloat)
                                                          .device(torch::kMeta)));
  HfSaveOptions opt;
  opt.dtype = result.dtype;
  opt.max_shard_bytes = static_cast<std::uint64_t>(cfg.export_size) * 1'000'000'000ull;
  opt.source_dir = cfg.model_name_or_path;
  opt.fetch = [&](std::size_t i) { return merged(metas[i].first); };
  const HfSaveResult saved = save_hf_model(*cfg.export_dir, metas, opt);
  result.weight_files = saved.weight_files;
  result.total_size = saved.total_size;
  result.merged = plan.merged;
  return result;
}

}  // namespace studio::trainer
