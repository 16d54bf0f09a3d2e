#include "studio/model_facts/hub_cache.h"
#include "studio/config/validate.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "checker.h"
#include "studio/base/json_file.h"
#include "studio/config/adapters.h"
#include "studio/config/config_io.h"
#include "studio/config/config_schema.h"
#include "studio/config/deepspeed.h"
#include "studio/config/config_dialect.h"
#include "studio/base/whole_number.h"

namespace fs = std::filesystem;

namespace studio {
namespace {

using detail::Checker;

std::string join_ints(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ", ") + std::to_string(x);
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void check_required(const RunConfig& c, Checker& ck) {
  if (c.model_name_or_path.empty())
    ck.error("model_name_or_path",
             "required: the Hugging Face model folder to train (or a hub id in the local cache)");
  // A v1 file names its data with train_dataset and may leave the template to the model
  // (check_llamafactory_v1).
  if (c.dataset.empty() && !c.is_v1())
    ck.error("dataset", "required: dataset names from dataset_info.json");
  // Stage pt reads no chat template (its texts are tokenized as they are; LLaMA-Factory uses the
  // empty template when none is given).
  if (c.template_name.empty() && !c.is_v1() && c.stage != Stage::Pt)
    ck.error("template", "required: the chat template the model was trained with",
             find_field("template")->allowed);
  if (c.output_dir.empty()) ck.error("output_dir", "required: the folder the run writes to");
  const auto& names = known_templates();
  if (!c.template_name.empty() &&
      std::find(names.begin(), names.end(), c.template_name) == names.end())
    ck.error("template", "'" + c.template_name + "' is not a chat template studio-train renders",
             find_field("template")->allowed);
}

void check_numbers(const RunConfig& c, Checker& ck) {
  ck.require(c.learning_rate > 0, "learning_rate",
             "must be positive, got " + num(c.learning_rate));
  ck.require(c.per_device_train_batch_size >= 1, "per_device_train_batch_size",
             "must be at least 1, got " + std::to_string(c.per_device_train_batch_size));
  ck.require(c.per_device_eval_batch_size >= 1, "per_device_eval_batch_size",
             "must be at least 1, got " + std::to_string(c.per_device_eval_batch_size));
  ck.require(c.gradient_accumulation_steps >= 1, "gradient_accumulation_steps",
             "must be at least 1, got " + std::to_string(c.gradient_accumulation_steps));
  ck.require(c.cutoff_len >= 1, "cutoff_len", "must be at least 1, got " +
                                                  std::to_string(c.cutoff_len));
  ck.require(c.logging_steps >= 1, "logging_steps", "must be at least 1");
  ck.require(c.save_steps >= 1, "save_steps", "must be at least 1");
  ck.require(!c.save_total_limit || *c.save_total_limit >= 1, "save_total_limit",
             "must be at least 1 (or null to keep every checkpoint)");
  ck.require(!c.max_samples || *c.max_samples >= 1, "max_samples", "must be at least 1");
  ck.require(!c.eval_steps || *c.eval_steps >= 1, "eval_steps", "must be at least 1");
  ck.require(!c.preprocessing_num_workers || *c.preprocessing_num_workers >= 1,
             "preprocessing_num_workers", "must be at least 1");
  ck.require(c.preprocessing_batch_size >= 1, "preprocessing_batch_size",
             "must be at least 1, got " + std::to_string(c.preprocessing_batch_size));
  ck.require(c.max_steps > 0 || c.num_train_epochs > 0, "num_train_epochs",
             "must be positive when max_steps is not set, got " + num(c.num_train_epochs));
  ck.require(c.warmup_ratio >= 0 && c.warmup_ratio < 1, "warmup_ratio",
             "must be in [0, 1), got " + num(c.warmup_ratio));
  ck.require(c.warmup_steps >= 0, "warmup_steps", "must not be negative");
  ck.require(c.weight_decay >= 0, "weight_decay", "must not be negative");
  ck.require(c.adam_beta1 >= 0 && c.adam_beta1 < 1, "adam_beta1", "must be in [0, 1)");
  ck.require(c.adam_beta2 >= 0 && c.adam_beta2 < 1, "adam_beta2", "must be in [0, 1)");
  ck.require(c.adam_epsilon > 0, "adam_epsilon", "must be positive");
  ck.require(c.max_grad_norm >= 0, "max_grad_norm", "must not be negative (0 turns clipping off)");
  ck.require(!c.use_dft_loss || c.stage == Stage::Sft, "use_dft_loss",
             "applies to stage sft only (LLaMA-Factory's DFT loss replaces the SFT loss)");
  ck.require(!c.use_eaft_loss || c.stage == Stage::Sft, "use_eaft_loss",
             "applies to stage sft only (LLaMA-Factory's EAFT loss replaces the SFT loss)");
  ck.require(!(c.use_dft_loss && c.use_eaft_loss), "use_eaft_loss",
             "and use_dft_loss are both set: choose one (LLaMA-Factory would silently use DFT)");
  ck.require(!c.use_asft_loss || c.stage == Stage::Sft, "use_asft_loss",
             "applies to stage sft only (LLaMA-Factory's ASFT loss replaces the SFT loss)");
  ck.require(!(c.use_asft_loss && (c.use_dft_loss || c.use_eaft_loss)), "use_asft_loss",
             std::string("and ") + (c.use_dft_loss ? "use_dft_loss" : "use_eaft_loss") +
                 " are both set: choose one (LLaMA-Factory would silently use " +
                 (c.use_dft_loss ? "DFT" : "EAFT") + "; ASFT already contains the DFT loss)");
  ck.require(c.eaft_alpha >= 0, "eaft_alpha", "must not be negative");
  if (ck.given("eaft_alpha") && !c.use_eaft_loss)
    ck.warn("eaft_alpha", "no effect without use_eaft_loss: true");
  ck.require(c.asft_alpha >= 0, "asft_alpha", "must not be negative");
  if (ck.given("asft_alpha") && !c.use_asft_loss)
    ck.warn("asft_alpha", "no effect without use_asft_loss: true");
  ck.require(!c.moe_aux_loss_coef || *c.moe_aux_loss_coef >= 0, "moe_aux_loss_coef",
             "must not be negative (0 leaves it to the model's config.json)");
  ck.require(c.ddp_timeout >= 1, "ddp_timeout", "must be at least 1 second");
  ck.require(c.skip_nonfinite_steps >= 0, "skip_nonfinite_steps", "must not be negative");
  ck.require(c.seed >= 0, "seed", "must not be negative");
  {
    std::string error;
    for (const std::string& target : report_to_targets(c, &error)) {
      if (target == "tensorboard") continue;
      if (target == "all")
        ck.warn("report_to", "all: TensorBoard event files are written (tensorboard is the only "
                             "integration built in); metrics also go to events.jsonl");
      else
        ck.warn("report_to", target + " is not built in: its metrics go to events.jsonl (and "
                                      "TensorBoard with report_to: tensorboard), not to " + target,
                "tensorboard, none, all");
    }
    if (!error.empty()) ck.error("report_to", error, "tensorboard, none, all");
    if (c.logging_dir && !reports_to_tensorboard(c))
      ck.warn("logging_dir", "is only read with report_to: tensorboard" + ck.at_line("report_to"));
  }
  ck.require(c.val_size >= 0 && (c.val_size < 1 || c.val_size == static_cast<int64_t>(c.val_size)),
             "val_size", "must be a fraction in [0, 1) or a whole number of samples, got " +
                             num(c.val_size));
  if (c.warmup_steps > 0 && c.warmup_ratio > 0)
    ck.warn("warmup_steps", "overrides warmup_ratio" + ck.at_line("warmup_ratio"));
}

void check_precision(const RunConfig& c, Checker& ck) {
  std::vector<std::string> on;
  if (c.bf16) on.push_back("bf16");
  if (c.fp16) on.push_back("fp16");
  if (c.pure_bf16) on.push_back("pure_bf16");
  for (size_t i = 1; i < on.size(); ++i)
    ck.error(on[i], "cannot be combined with " + on[0] + ck.at_line(on[0]) + ": set only one of "
                    "bf16, fp16 and pure_bf16 to true");
  // Keys studio-train does not implement: a warning in `validate` (LLaMA-Factory, which the
  // studio can launch, runs them), an error for training (the run would not be the one the YAML
  // asks for).
  auto refuse = [&ck](const std::string& key, const std::string& msg) {
    if (ck.for_training())
      ck.error(key, msg);
    else
      ck.warn(key, msg);
  };
  if (c.fp16 && on.size() == 1)
    refuse("fp16", "studio-train has no fp16 loss scaling: training refuses this config; use "
                   "bf16: true");
  if (c.pure_bf16 && on.size() == 1)
    refuse("pure_bf16", "studio-train keeps fp32 master weights and optimizer states (no pure "
                        "bf16 training): training refuses this config; use bf16: true");
}

void check_scheduler(const RunConfig& c, Checker& ck) {
  std::set<std::string> allowed;
  if (c.lr_scheduler_type == LrScheduler::Cosine) allowed = {"num_cycles"};
  if (c.lr_scheduler_type == LrScheduler::CosineWithMinLr)
    allowed = {"num_cycles", "min_lr_rate", "min_lr"};
  std::string names;
  for (const auto& a : allowed) names += (names.empty() ? "" : " | ") + a;
  for (const auto& [k, v] : c.lr_scheduler_kwargs)
    if (!allowed.count(k))
      ck.error("lr_scheduler_kwargs",
               "'" + k + "' is not an option of the " +
                   std::string(to_string(c.lr_scheduler_type)) + " schedule",
               names.empty() ? "none" : names);
  if (c.lr_scheduler_type != LrScheduler::CosineWithMinLr) return;
  auto rate = c.lr_scheduler_kwargs.find("min_lr_rate");
  auto abs = c.lr_scheduler_kwargs.find("min_lr");
  const bool has_rate = rate != c.lr_scheduler_kwargs.end();
  const bool has_abs = abs != c.lr_scheduler_kwargs.end();
  if (has_rate == has_abs)
    ck.error(ck.given("lr_scheduler_kwargs") ? "lr_scheduler_kwargs" : "lr_scheduler_type",
             "cosine_with_min_lr needs exactly one of min_lr_rate or min_lr, e.g. "
             "lr_scheduler_kwargs: {min_lr_rate: 0.1}");
  if (has_rate && (rate->second < 0 || rate->second > 1))
    ck.error("lr_scheduler_kwargs", "min_lr_rate must be in [0, 1], got " + num(rate->second));
  if (has_abs && (abs->second < 0 || abs->second > c.learning_rate))
    ck.error("lr_scheduler_kwargs", "min_lr must be in [0, learning_rate], got " +
                                        num(abs->second));
}

void check_sequence_parallel(const RunConfig& c, const ValidateOptions& opt, Checker& ck) {
  const int64_t sp = c.sequence_parallel_size;
  if (sp < 1) {
    ck.error("sequence_parallel_size", "must be at least 1, got " + std::to_string(sp),
             ">= 1");
    return;
  }
  if (const int world = opt.world_size(); world > 0 && world % sp != 0)
    ck.error("sequence_parallel_size",
             std::to_string(sp) + " does not divide the world size " + std::to_string(world) +
                 " (" + std::to_string(opt.nproc_per_node) + " processes per node x " +
                 std::to_string(opt.nnodes) + " nodes)",
             join_ints(divisors(world)));
  const int64_t u = c.sequence_parallel_ulysses_degree, r = c.sequence_parallel_ring_degree;
  ck.require(u >= 1, "sequence_parallel_ulysses_degree", "must be at least 1");
  ck.require(r >= 1, "sequence_parallel_ring_degree", "must be at least 1");
  if (c.sequence_parallel_mode == SpMode::Usp) {
    if (u * r != sp)
      ck.error(ck.given("sequence_parallel_ulysses_degree") ? "sequence_parallel_ulysses_degree"
                                                            : "sequence_parallel_mode",
               "usp needs sequence_parallel_ulysses_degree x sequence_parallel_ring_degree = " +
                   ck.spelled("sequence_parallel_size") + ", got " + std::to_string(u) + " x " +
                   std::to_string(r) + " != " + std::to_string(sp));
  } else {
    for (const auto& [key, degree] : {std::pair{"sequence_parallel_ulysses_degree", u},
                                      std::pair{"sequence_parallel_ring_degree", r}})
      if (ck.given(key) && degree != 1)
        ck.warn(key, "only used with " + ck.spelled("sequence_parallel_mode") + ": usp; ignored");
  }
  if (sp == 1 && ck.given("shuffle_for_sequence_parallel") && !c.shuffle_for_sequence_parallel)
    ck.warn("shuffle_for_sequence_parallel",
            "only used with " + ck.spelled("sequence_parallel_size") +
                " > 1 (as in 360-LLaMA-Factory); without SP the samples are shuffled every epoch");
}

// Packing: SFT as LLaMA-Factory packs; DPO (which LLaMA-Factory does not pack) packs each
// micro-batch's sequences, always isolated. Neat packing works with every SP mode.
void check_packing(const RunConfig& c, Checker& ck) {
  if (c.dynamic_batching()) {
    ck.require(c.stage == Stage::Sft, "batching_strategy",
               std::string(to_string(c.batching_strategy)) +
                   " applies to stage sft only (a token budget per micro-batch of samples); use "
                   "normal for stage " + std::string(to_string(c.stage)));
    if (c.batching_strategy == Batching::DynamicPaddingFree && (c.packing || c.neat_packing))
      ck.error("batching_strategy",
               std::string("dynamic_padding_free packs each micro-batch into one row, and ") +
                   (c.neat_packing ? "neat_packing" : "packing") +
                   " has packed the samples already: choose one");
  }
  // LLaMA-Factory refuses neat_packing for every stage but sft; for pt the blocks are cut from
  // the concatenated texts, so there are no samples to isolate.
  if (c.stage == Stage::Pt && c.neat_packing)
    ck.error("neat_packing", "stage pt cuts its cutoff_len blocks from the concatenated texts, "
                             "so no sample boundaries are left to isolate (LLaMA-Factory refuses "
                             "it too): use packing: true, or packing: false for one text per "
                             "sequence");
  // A reward model scores each sequence at its last token, one sequence per row; KTO's examples
  // and their KL sequences are one per row too. LLaMA-Factory packs neither (it ignores the keys).
  if (c.stage == Stage::Rm || c.stage == Stage::Kto)
    for (const char* key : {"packing", "neat_packing"})
      if (key == std::string("packing") ? c.packing : c.neat_packing)
        ck.error(key, std::string(c.stage == Stage::Rm
                                      ? "stage rm scores each chosen and rejected sequence at "
                                        "its last token, one sequence per row"
                                      : "stage kto runs each example and its KL sequence one "
                                        "per row") +
                          ": remove " + key + " (LLaMA-Factory's " +
                          std::string(to_string(c.stage)) + " stage does not pack either)");
  if (c.stage == Stage::Dpo && c.packing && !c.neat_packing)
    ck.warn("packing", "stage dpo: each micro-batch's chosen and rejected sequences are packed "
                       "into shared rows with attention isolated per sequence (as neat_packing), "
                       "so every log-prob is the unpacked one; LLaMA-Factory does not pack "
                       "pairwise data");
}

// Ulysses scatters heads over the SP group: the head counts must fit it.
void check_heads(const RunConfig& c, const ModelInfo& m, Checker& ck) {
  int64_t degree = 0;
  const char* key = "sequence_parallel_size";
  if (c.sequence_parallel_mode == SpMode::Ulysses) degree = c.sequence_parallel_size;
  if (c.sequence_parallel_mode == SpMode::Usp) {
    degree = c.sequence_parallel_ulysses_degree;
    key = "sequence_parallel_ulysses_degree";
  }
  if (degree <= 1) return;
  const std::string mode(to_string(c.sequence_parallel_mode));
  switch (ulysses_heads(m, degree)) {
    case UlyssesHeads::Ok:
      return;
    case UlyssesHeads::QueryHeadsIndivisible:
      ck.error(key, mode + ": " + std::to_string(m.num_heads) +
                        " query heads are not divisible by " + std::to_string(degree) +
                        "; use zigzag-ring, or a degree that divides " +
                        std::to_string(m.num_heads),
               join_ints(divisors(static_cast<int>(m.num_heads))));
      return;
    case UlyssesHeads::KvHeadsUnsplittable:
      ck.error(key, mode + ": the " + std::to_string(m.num_kv_heads) +
                        " key/value heads can neither be split over nor replicated to " +
                        std::to_string(degree) + " ranks (grouped-query attention); use "
                        "zigzag-ring, or a degree that divides or is a multiple of " +
                        std::to_string(m.num_kv_heads));
      return;
  }
}

// Mixture-of-experts settings against the model: what the auxiliary loss will be, and what
// does not apply to a dense model or to the expert layers.
void check_moe(const RunConfig& c, const ModelInfo& m, Checker& ck) {
  const bool asked = c.moe_aux_loss_coef && *c.moe_aux_loss_coef > 0;
  if (!m.is_moe()) {
    if (asked)
      ck.warn("moe_aux_loss_coef", "no effect: " + m.architecture +
                                       " is not a mixture-of-experts model");
    return;
  }
  if (c.pairwise() || c.stage == Stage::Kto) {
    if (asked)
      ck.warn("moe_aux_loss_coef", "no effect for stage " + std::string(to_string(c.stage)) +
                                       ": LLaMA-Factory's " +
                                       (c.stage == Stage::Dpo  ? "DPO"
                                        : c.stage == Stage::Rm ? "reward-model"
                                                               : "KTO") +
                                       " trainer runs the forward without labels, so no "
                                       "auxiliary loss is added; studio-train does the same");
    return;
  }
  const double coef = moe_aux_coefficient(c, m);
  if (!asked)
    ck.note(ck.given("moe_aux_loss_coef") ? "moe_aux_loss_coef" : "model_name_or_path",
            coef > 0 ? "the MoE auxiliary loss is on, coefficient " + num(coef) +
                           " (config.json: output_router_logits, router_aux_loss_coef)"
                     : "the MoE auxiliary load-balancing loss is off (config.json's "
                       "output_router_logits is false); moe_aux_loss_coef: 0.001 turns it on");
  if (c.tiled_mlp)
    ck.note("tiled_mlp", "tiles the dense MLP layers only: each of the " +
                             std::to_string(m.moe_layer_count()) +
                             " MoE layers runs its experts untiled, on the tokens routed to them");
}

void check_model(const RunConfig& c, Checker& ck, std::optional<ModelInfo>& model) {
  if (c.model_name_or_path.empty()) return;
  std::string missing;
  const fs::path dir = ck.model_dir(c.model_name_or_path, missing);
  if (dir.empty()) {
    ck.missing("model_name_or_path", missing);
    return;
  }
  std::string error;
  model = read_model_info(dir.string(), error);
  if (!model) {
    ck.error("model_name_or_path", "cannot use the model: " + error);
    return;
  }
  if (!is_supported_architecture(model->architecture))
    ck.error("model_name_or_path", "architecture " + model->architecture +
                                       " is not supported", supported_architectures());
  else if (std::string why = decoder_support_error(*model); !why.empty())
    ck.error("model_name_or_path", "cannot train this model: " + why);
  if (model->max_position_embeddings > 0 && c.cutoff_len > model->max_position_embeddings &&
      model->rope_scaling.empty())
    ck.warn("cutoff_len", std::to_string(c.cutoff_len) + " exceeds the model's "
                          "max_position_embeddings (" +
                          std::to_string(model->max_position_embeddings) +
                          ") and it has no rope_scaling");
  // A checkpoint quantized on disk (config.json's quantization_config): bitsandbytes' 4-bit
  // format loads as it is (QLoRA; check_adapters has the rules), the others are refused.
  if (const DiskQuantization& q = model->quantization; !q.method.empty() && !model->bnb_4bit_on_disk()) {
    const std::string what = q.method + (q.bits > 0 ? ", " + std::to_string(q.bits) + "-bit" : "");
    ck.error("model_name_or_path",
             "the checkpoint is quantized on disk (" + what + "), which studio-train does not "
             "read: it loads bitsandbytes' 4-bit checkpoints (load_in_4bit) and unquantized "
             "ones; give the unquantized model with quantization_bit: 4 (QLoRA quantizes it "
             "as it loads)");
  }
  check_moe(c, *model, ck);
  check_heads(c, *model, ck);
}

void check_datasets(const RunConfig& c, Checker& ck) {
  const fs::path dir = ck.resolve(c.dataset_dir);
  const fs::path info = dir / "dataset_info.json";
  std::error_code ec;
  if (!fs::exists(info, ec)) {
    if (!c.dataset.empty())
      ck.missing(ck.given("dataset_dir") ? "dataset_dir" : "dataset",
                 "no dataset_info.json in " + dir.string());
    return;
  }
  std::string error;
  nlohmann::json j;
  if (!read_json_file(info.string(), j, error) || !j.is_object()) {
    ck.error(ck.given("dataset_dir") ? "dataset_dir" : "dataset",
             error.empty() ? info.string() + " does not hold a JSON object" : error);
    return;
  }
  std::string names;
  for (const auto& item : j.items()) names += (names.empty() ? "" : ", ") + item.key();
  auto check = [&](const std::string& key, const std::vector<std::string>& list) {
    for (const auto& name : list) {
      auto it = j.find(name);
      if (it == j.end()) {
        ck.error(key, "'" + name + "' is not in " + info.string(), names);
        continue;
      }
      // What the loader refuses (data/dataset/dataset_info.cpp): hub data without a local file,
      // and a file_name that is not there (the file may exist only on the cluster: missing()).
      if (it->is_object() && !it->contains("file_name")) {
        std::string hub;
        for (const char* k : {"hf_hub_url", "ms_hub_url", "om_hub_url", "script_url",
                              "cloud_file_name"})
          if (it->contains(k)) hub = k;
        ck.error(key, "'" + name + "': " +
                          (hub.empty() ? "no file_name in " + info.string()
                                       : "'" + hub + "' datasets are not downloaded here; "
                                         "download the files and set 'file_name' in " +
                                             info.string()));
        continue;
      }
      if (it->is_object() && (*it)["file_name"].is_string() &&
          !fs::exists(dir / (*it)["file_name"].get<std::string>(), ec))
        ck.missing(key, "'" + name + "': its file_name " +
                            (dir / (*it)["file_name"].get<std::string>()).string() +
                            " does not exist");
      const bool ranking = it->is_object() && it->value("ranking", false);
      if (c.pairwise() && !ranking)
        ck.error(key, "'" + name + "' is not a preference dataset (\"ranking\": true), which "
                      "stage: " + std::string(to_string(c.stage)) + " needs");
      const bool tagged = it->is_object() && (*it).contains("columns") &&
                          (*it)["columns"].is_object() && (*it)["columns"].contains("kto_tag");
      if (c.stage == Stage::Kto && (ranking || !tagged))
        ck.error(key, "'" + name + "' " +
                          (ranking ? "is a preference dataset (\"ranking\": true); stage: kto "
                                     "needs single responses marked desirable or not"
                                   : "has no kto_tag column, which stage: kto needs (\"columns\": "
                                     "{\"kto_tag\": \"label\"}, a true or false per row)"));
      if (c.stage == Stage::Sft && ranking)
        ck.error(key, "'" + name + "' is a preference dataset (\"ranking\": true); stage: sft "
                      "needs an instruction or conversation dataset");
      if (c.stage == Stage::Pt && ranking)
        ck.error(key, "'" + name + "' is a preference dataset (\"ranking\": true); stage: pt "
                      "needs plain texts (\"columns\": {\"prompt\": \"text\"})");
    }
  };
  check("dataset", c.dataset);
  check("eval_dataset", c.eval_dataset);
}

// The JSON's fixed values against the YAML's (Hugging Face's Trainer refuses the same
// mismatches), the native keys against the JSON, and the notes as warnings.
void check_deepspeed(const RunConfig& c, const DeepSpeedRequest& ds, const std::string& path,
                     Checker& ck) {
  const std::map<std::string, std::pair<const char*, double>> yaml = {
      {"train_micro_batch_size_per_gpu",
       {"per_device_train_batch_size", static_cast<double>(c.per_device_train_batch_size)}},
      {"gradient_accumulation_steps",
       {"gradient_accumulation_steps", static_cast<double>(c.gradient_accumulation_steps)}},
      {"gradient_clipping", {"max_grad_norm", c.max_grad_norm}},
      {"bf16.enabled", {"bf16", c.bf16 ? 1.0 : 0.0}},
      {"fp16.enabled", {"fp16", c.fp16 ? 1.0 : 0.0}},
      {"optimizer.params.lr", {"learning_rate", c.learning_rate}},
      {"optimizer.params.eps", {"adam_epsilon", c.adam_epsilon}},
      {"optimizer.params.weight_decay", {"weight_decay", c.weight_decay}},
      {"optimizer.params.betas.0", {"adam_beta1", c.adam_beta1}},
      {"optimizer.params.betas.1", {"adam_beta2", c.adam_beta2}}};
  for (const auto& [dotted, value] : ds.fixed) {
    if (dotted == "train_batch_size") {
      // Both sides are whole numbers (the JSON's read as such, within int32): compared exactly.
      const int world = ck.world_size();
      const int64_t want = c.per_device_train_batch_size * c.gradient_accumulation_steps *
                           (world / std::max<int64_t>(1, c.sequence_parallel_size));
      if (world > 0 && static_cast<int64_t>(value) != want)
        ck.error("deepspeed", path + ": train_batch_size is " + num(value) + " but the run's "
                              "global batch is " + num(static_cast<double>(want)) + " (" +
                              ck.spelled("per_device_train_batch_size") +
                              " x gradient_accumulation_steps x data-parallel ranks): set it to "
                              "\"auto\"");
      continue;
    }
    const auto it = yaml.find(dotted);
    if (it == yaml.end()) continue;
    const auto& [key, mine] = it->second;
    if (std::abs(value - mine) > 1e-12 * std::max(1.0, std::abs(mine)))
      ck.error("deepspeed", path + ": " + dotted + " is " + num(value) + " but " +
                                ck.spelled(key) + " is " + num(mine) + ck.at_line(key) +
                                ": make them agree or set the JSON value to \"auto\"");
  }
  if (c.zero_stage && *c.zero_stage != ds.zero_stage)
    ck.error("zero_stage", "is " + std::to_string(*c.zero_stage) + " but " + path +
                               " asks for stage " + std::to_string(ds.zero_stage) +
                               ": keep one of them");
  for (const auto& [key, mine, theirs] :
       {std::tuple{"offload_optimizer", c.offload_optimizer, ds.offload_optimizer},
        std::tuple{"offload_param", c.offload_param, ds.offload_param}})
    if (ck.given(key) && mine != theirs)
      ck.error(key, std::string("is ") + (mine ? "true" : "false") + " but " + path + " says " +
                        (theirs ? "cpu" : "none") + ": keep one of them");
  // Fields that only tune DeepSpeed's own engine share one warning; anything else (unknown or
  // not applied) gets its own.
  for (const auto& note : ds.notes) ck.warn("deepspeed", note);
  std::string tuning;
  for (const auto& field : ds.tuning) tuning += (tuning.empty() ? "" : ", ") + field;
  if (!tuning.empty())
    ck.warn("deepspeed", "not used, they tune DeepSpeed's own engine (studio-train reduces and "
                         "gathers one decoder layer at a time, overlapped with the backward; "
                         "docs/SHARDING.md): " + tuning);
}

// The ZeRO request, wherever it comes from, is one the engine runs.
void check_zero(const RunConfig& c, Checker& ck) {
  std::string error;
  std::optional<DeepSpeedRequest> ds;
  if (c.deepspeed) ds = read_deepspeed_json(ck.resolve(*c.deepspeed).string(), error);
  const ZeroRequest z = zero_request(c, ds);
  const std::string problem = zero_request_problem(z);
  if (problem.empty()) return;
  const std::string from = ds && !c.zero_stage ? " (the stage is the deepspeed JSON's)" : "";
  // At the key that asked for what cannot run: the native one, else the JSON.
  const std::string asked = problem.substr(0, problem.find(' '));
  const bool native = (asked == "zero_stage" && c.zero_stage) ||
                      (asked == "offload_param" && c.offload_param) ||
                      (asked == "offload_optimizer" && c.offload_optimizer);
  const std::string key = native ? asked : "deepspeed";
  ck.error(key, problem + from);
}

void check_long_context(const RunConfig& c, Checker& ck) {
  if (c.offload_activations && !c.gradient_checkpointing)
    ck.error("offload_activations",
             "needs " + ck.spelled("gradient_checkpointing") + ": true (what goes to host memory "
             "are the checkpointed layer inputs)" + ck.at_line("gradient_checkpointing"));
  if (ck.given("tiled_mlp_budget_mib") && !c.tiled_mlp)
    ck.warn("tiled_mlp_budget_mib", "no effect without tiled_mlp: true");
}

void check_paths(const RunConfig& c, Checker& ck) {
  std::error_code ec;
  std::string missing;
  if (c.ref_model) {
    const fs::path dir = ck.model_dir(*c.ref_model, missing);
    std::string error;
    if (dir.empty()) {
      ck.missing("ref_model", missing);
    } else if (const auto info = read_model_info(dir.string(), error);
               info && info->quantized_on_disk()) {
      ck.error("ref_model", dir.string() + " is quantized on disk (" + info->quantization.method +
                                ", " + std::to_string(info->quantization.bits) +
                                "-bit): a quantized reference model is not implemented; give "
                                "the unquantized one");
    }
  }
  if (c.resume_from_checkpoint && !fs::exists(ck.resolve(*c.resume_from_checkpoint), ec))
    ck.missing("resume_from_checkpoint",
               "no such folder: " + ck.resolve(*c.resume_from_checkpoint).string());
  if (c.cache_dir && !fs::is_directory(ck.resolve(*c.cache_dir), ec))
    ck.warn("cache_dir", "no such folder: " + ck.resolve(*c.cache_dir).string() +
                             " (hub ids are looked up in the other caches)");
  if (c.deepspeed) {
    const fs::path p = ck.resolve(*c.deepspeed);
    std::string error;
    if (!fs::exists(p, ec))
      ck.missing("deepspeed", "no such file: " + p.string());
    else if (auto ds = read_deepspeed_json(p.string(), error))
      check_deepspeed(c, *ds, p.string(), ck);
    else
      ck.error("deepspeed", error);
  }
  check_zero(c, ck);
  if (c.output_dir.empty() || !c.do_train) return;
  const fs::path out = ck.resolve(c.output_dir);
  if (!fs::is_directory(out, ec) || fs::is_empty(out, ec) || c.overwrite_output_dir ||
      c.resume_from_checkpoint)
    return;
  bool has_checkpoint = false;
  for (const auto& e : fs::directory_iterator(out, ec))
    if (e.path().filename().string().rfind("checkpoint-", 0) == 0) has_checkpoint = true;
  if (!has_checkpoint)
    ck.missing("output_dir", out.string() + " already holds files and no checkpoint to resume "
                             "from: set overwrite_output_dir: true or choose another folder");
}

void check_method(const RunConfig& c, Checker& ck) {
  if (!c.do_train) ck.warn("do_train", "is false: studio-train train has nothing to do");
  for (const char* key : {"kto_chosen_weight", "kto_rejected_weight"}) {
    const double w = key == std::string("kto_chosen_weight") ? c.kto_chosen_weight
                                                             : c.kto_rejected_weight;
    ck.require(w >= 0, key, "must not be negative, got " + num(w));
    if (ck.given(key) && c.stage != Stage::Kto)
      ck.warn(key, "only used with stage: kto; ignored");
  }
  if (c.stage == Stage::Dpo) {
    ck.require(c.pref_beta > 0, "pref_beta", "must be positive, got " + num(c.pref_beta));
    ck.require(c.pref_ftx >= 0, "pref_ftx", "must not be negative");
    ck.require(c.dpo_label_smoothing >= 0 && c.dpo_label_smoothing <= 0.5, "dpo_label_smoothing",
               "must be in [0, 0.5], got " + num(c.dpo_label_smoothing));
    if (c.dpo_label_smoothing > 0 && c.pref_loss != PrefLoss::Sigmoid)
      ck.warn("dpo_label_smoothing", "only applies to pref_loss: sigmoid; ignored");
    ck.require(c.simpo_gamma >= 0, "simpo_gamma", "must not be negative, got " + num(c.simpo_gamma));
    if (ck.given("simpo_gamma") && c.pref_loss != PrefLoss::Simpo)
      ck.warn("simpo_gamma", "only applies to pref_loss: simpo; ignored");
    if (!c.uses_reference()) {
      const std::string loss(to_string(c.pref_loss));
      for (const char* key : {"ref_model", "precompute_ref_logps"})
        if (ck.given(key))
          ck.warn(key, "pref_loss: " + loss + " builds no reference model; ignored");
    }
    if (c.pref_loss == PrefLoss::KtoPair && c.pref_ftx > 0)
      ck.note("pref_ftx", "kto_pair: the SFT term is added to each pair's loss (the mean of its "
                          "chosen and rejected halves); LLaMA-Factory fails on this combination");
    return;
  }
  if (c.stage == Stage::Pt || c.stage == Stage::Rm || c.stage == Stage::Kto) {
    // As LLaMA-Factory, which refuses both outside stage sft.
    ck.require(!c.train_on_prompt, "train_on_prompt",
               c.stage == Stage::Pt
                   ? "stage pt learns every token of its texts: remove train_on_prompt"
               : c.stage == Stage::Rm
                   ? "stage rm learns no tokens (it scores whole sequences): remove "
                     "train_on_prompt"
                   : "stage kto scores the responses only (LLaMA-Factory refuses it outside "
                     "stage sft): remove train_on_prompt");
    ck.require(!c.mask_history, "mask_history",
               c.stage == Stage::Pt
                   ? "stage pt learns every token of its texts: remove mask_history"
               : c.stage == Stage::Rm
                   ? "stage rm learns no tokens (it scores whole sequences): remove "
                     "mask_history"
                   : "stage kto scores the responses only (LLaMA-Factory refuses it outside "
                     "stage sft): remove mask_history");
  }
  if (c.stage == Stage::Kto) {
    ck.require(c.pref_beta > 0, "pref_beta", "must be positive, got " + num(c.pref_beta));
    ck.require(c.pref_ftx >= 0, "pref_ftx", "must not be negative");
    for (const char* key : {"pref_loss", "simpo_gamma", "dpo_label_smoothing"})
      if (ck.given(key))
        ck.warn(key, "only used with stage: dpo; ignored (stage kto has its own loss)");
    return;
  }
  if (ck.given("ref_model") && !c.use_asft_loss)
    ck.warn("ref_model", "only used with stages dpo and kto, or use_asft_loss: true; ignored");
  for (const char* key : {"pref_beta", "pref_loss", "pref_ftx", "simpo_gamma",
                          "dpo_label_smoothing", "precompute_ref_logps"})
    if (ck.given(key)) ck.warn(key, "only used with stage: dpo; ignored");
}

// finetuning_type lora / freeze (docs/ADAPTERS.md); `model` when config.json was read.
void check_adapters(const RunConfig& c, const std::optional<ModelInfo>& model, Checker& ck) {
  // LLaMA-Factory (v0) reads a file without finetuning_type as lora.
  if (!c.is_v1() && !ck.given("finetuning_type"))
    ck.note("finetuning_type", "not given: studio-train trains every weight (full), while "
                               "LLaMA-Factory's default is lora, so the same file trains LoRA "
                               "adapters there; set finetuning_type to say which");
  const bool lora = c.finetuning_type == FinetuningType::Lora;
  const bool freeze = c.finetuning_type == FinetuningType::Freeze;
  const std::string type(to_string(c.finetuning_type));
  for (const char* key : {"lora_rank", "lora_alpha", "lora_dropout", "lora_target",
                          "additional_target", "create_new_adapter"})
    if (!lora && ck.given(key))
      ck.warn(key, "only used with finetuning_type: lora (this run is " + type + "); ignored");
  // As LLaMA-Factory ("`use_dora` is only valid for LoRA training.").
  if (!lora && c.use_rslora) ck.error("use_rslora", "is only valid for finetuning_type: lora");
  if (!lora && c.use_dora) ck.error("use_dora", "is only valid for finetuning_type: lora");
  for (const char* key : {"freeze_trainable_layers", "freeze_trainable_modules",
                          "freeze_extra_modules"})
    if (!freeze && ck.given(key))
      ck.warn(key, "only used with finetuning_type: freeze (this run is " + type + "); ignored");
  // As LLaMA-Factory ("Adapter is only valid for the LoRA method").
  if (!lora && !c.adapter_name_or_path.empty())
    ck.error("adapter_name_or_path", "adapters load only with finetuning_type: lora; merge it "
                                     "first (studio-train export) or set finetuning_type: lora");
  if (lora) {
    ck.require(c.lora_rank >= 1, "lora_rank", "must be at least 1, got " + num(double(c.lora_rank)));
    if (c.lora_alpha) ck.require(*c.lora_alpha > 0, "lora_alpha", "must be positive, got " + num(*c.lora_alpha));
    ck.require(c.lora_dropout >= 0 && c.lora_dropout < 1, "lora_dropout",
               "must be in [0, 1), got " + num(c.lora_dropout));
    if (c.create_new_adapter && c.adapter_name_or_path.empty())
      ck.warn("create_new_adapter", "no adapter_name_or_path to merge: a new adapter is "
                                    "trained anyway");
    if (c.lora_dropout > 0 && (c.stage == Stage::Dpo || c.stage == Stage::Kto))
      ck.note("lora_dropout", "stage " + std::string(to_string(c.stage)) + " trains without "
              "dropout (LLaMA-Factory's DPO and KTO trainers turn every dropout off): "
              "lora_dropout does not apply");
    if (c.stage == Stage::Rm)
      ck.error("finetuning_type", "stage rm with lora is not implemented (its value head would "
                                  "be trained whole beside the adapters); use finetuning_type "
                                  "full or freeze for reward models");
    for (size_t i = 0; i < c.adapter_name_or_path.size(); ++i) {
      std::error_code ec;
      const fs::path dir = c.adapter_name_or_path[i];
      if (!fs::exists(dir / "adapter_config.json", ec))
        ck.missing("adapter_name_or_path", dir.string() + " holds no adapter_config.json: give "
                                           "a PEFT adapter folder");
    }
  }
  // QLoRA, with LLaMA-Factory's rules (_verify_model_args, configure_quantization,
  // init_adapter): on the fly (quantization_bit) or a base bitsandbytes saved in 4 bits.
  const bool disk_4bit = model && model->bnb_4bit_on_disk();
  if (disk_4bit) {
    const DiskQuantization& q = model->quantization;
    if (q.skip_modules_given && !model->tie_word_embeddings &&
        !bnb_skips_module("lm_head", q.skip_modules))
      ck.error("model_name_or_path",
               "its lm_head is quantized on disk (llm_int8_skip_modules was given without "
               "lm_head): studio-train keeps the LM head unquantized, as transformers does by "
               "default; quantize the model again with lm_head in llm_int8_skip_modules");
    const std::string format =
        q.quant_type + (q.double_quant ? " with double quantization" : "");
    // LLaMA-Factory: "`quantization_bit` will not affect on the PTQ-quantized models."
    for (const char* key : {"quantization_bit", "quantization_type", "double_quantization",
                            "quantization_method"})
      if (ck.given(key))
        ck.warn(key, "ignored: model_name_or_path is already quantized on disk (bitsandbytes, " +
                         format + "), which is what trains");
    if (!lora)
      ck.error("finetuning_type", "model_name_or_path is quantized on disk (bitsandbytes, " +
                                      format + "): a quantized model trains only with "
                                      "finetuning_type: lora (LLaMA-Factory: \"Quantized models "
                                      "can only be used for the LoRA or OFT tuning\")");
  } else if (c.quantized()) {
    const int64_t bits = *c.quantization_bit;
    if (bits == 8)
      ck.error("quantization_bit", "8-bit (LLM.int8) training is not implemented: use 4");
    else if (bits != 4)
      ck.error("quantization_bit", "bitsandbytes takes 4 or 8 bits, got " + std::to_string(bits),
               "4");
    if (!lora)
      ck.error("quantization_bit", "a quantized base trains only with finetuning_type: lora "
                                   "(LLaMA-Factory: \"Quantization is only compatible with the "
                                   "LoRA or OFT method\")");
    if (c.quantization_method != "bnb")
      ck.error("quantization_method", "'" + c.quantization_method + "' is not implemented: "
               "studio-train quantizes on the fly in bitsandbytes' format", "bnb");
    if (c.quantization_type != "nf4" && c.quantization_type != "fp4")
      ck.error("quantization_type", "'" + c.quantization_type + "' is not a 4-bit code", "nf4 | fp4");
  }
  if (disk_4bit || c.quantized()) {
    // The key to name: the one that made the base quantized.
    const char* cause = disk_4bit ? "model_name_or_path" : "quantization_bit";
    const std::string base = disk_4bit ? "a base quantized on disk" : "QLoRA";
    std::string ds_error;
    std::optional<DeepSpeedRequest> ds;
    if (c.deepspeed) ds = read_deepspeed_json(ck.resolve(*c.deepspeed).string(), ds_error);
    if (zero_request(c, ds).stage >= 3)
      ck.error(cause, base + " under ZeRO-3 is not implemented: use ZeRO stage 2 or lower (the "
                             "4-bit base is small enough to hold whole; LLaMA-Factory refuses "
                             "ZeRO-3 with a quantized checkpoint too)");
    if (c.adapter_name_or_path.size() > 1)
      ck.error("adapter_name_or_path", "a quantized model takes a single adapter "
                                       "(LLaMA-Factory's rule): merge the others first with "
                                       "studio-train export");
    if (!c.adapter_name_or_path.empty() && c.create_new_adapter)
      ck.error("create_new_adapter", "cannot merge an adapter into a quantized base "
                                     "(LLaMA-Factory's rule): merge it first with studio-train "
                                     "export, then quantize");
  }
  for (const char* key : {"quantization_type", "double_quantization", "quantization_method"})
    if (!c.quantized() && !disk_4bit && ck.given(key))
      ck.warn(key, "only used with quantization_bit; ignored");
  if (freeze) {
    ck.require(c.freeze_trainable_layers != 0, "freeze_trainable_layers",
               "must not be 0 (n > 0 trains the last n layers, n < 0 the first -n)");
    for (const auto& module : c.freeze_trainable_modules) {
      static const std::set<std::string> known = {
          "all", "self_attn", "mlp", "input_layernorm", "post_attention_layernorm",
          "post_self_attn_layernorm", "post_mlp_layernorm", "pre_feedforward_layernorm",
          "post_feedforward_layernorm"};
      if (!known.count(module))
        ck.error("freeze_trainable_modules", "'" + module + "' is not a module of a decoder "
                                             "layer (self_attn, mlp, the layer norms, or all)");
    }
    for (const auto& module : c.freeze_extra_modules)
      if (module != "embed_tokens" && module != "norm" && module != "lm_head")
        ck.error("freeze_extra_modules", "'" + module + "' is not a module outside the decoder "
                                         "layers (embed_tokens, norm, lm_head)");
  }
  if (!model || (!lora && !freeze)) return;
  if (model->is_moe()) {
    ck.error("finetuning_type", "finetuning_type " + type + " on mixture-of-experts models is "
                                "not implemented; use finetuning_type full");
    return;
  }
  if (lora) {
    std::string error;
    lora_target_modules(c, *model, error);
    if (!error.empty()) ck.error("lora_target", error);
    additional_target_parameters(c, *model, error);
    if (!error.empty()) ck.error("additional_target", error);
  }
  if (freeze && c.freeze_trainable_layers != 0 &&
      std::abs(c.freeze_trainable_layers) > model->num_layers)
    ck.note("freeze_trainable_layers", std::to_string(c.freeze_trainable_layers) + " is more "
            "than the model's " + std::to_string(model->num_layers) + " layers: every layer is "
            "trained");
  if (freeze && std::find(c.freeze_extra_modules.begin(), c.freeze_extra_modules.end(),
                          "lm_head") != c.freeze_extra_modules.end() && model->tie_word_embeddings)
    ck.error("freeze_extra_modules", "'lm_head' is tied to the embeddings in this model: name "
                                     "embed_tokens instead");
}

void check_eval(const RunConfig& c, Checker& ck) {
  const bool has_eval_data = c.val_size > 0 || !c.eval_dataset.empty() || c.v1.eval_dataset;
  if (c.evaluates() && !has_eval_data)
    ck.error("eval_strategy", "needs evaluation data: set val_size or eval_dataset, or "
                              "eval_strategy: no");
  if (!c.evaluates() && has_eval_data)
    ck.warn(c.val_size > 0 ? "val_size" : "eval_dataset",
            "evaluation data is given but eval_strategy is no: nothing will be evaluated; set "
            "eval_strategy: steps");
  if (c.eval_steps && c.eval_strategy != EvalStrategy::Steps)
    ck.warn("eval_steps", "only used with eval_strategy: steps; ignored");
}

}  // namespace

std::vector<Diagnostic> validate_config(const RunConfig& given, const ValidateOptions& opt,
                                        std::optional<ModelInfo>* model_out) {
  // A dialect's file is checked as it will run: v1's with its stage, template and accumulation
  // worked out.
  const ConfigDialect* dialect = dialect_of(given);
  RunConfig resolved;
  if (dialect) {
    resolved = given;
    dialect->resolve(resolved, opt);
  }
  const RunConfig& cfg = dialect ? resolved : given;
  Checker ck(cfg, opt);
  std::optional<ModelInfo> model;
  check_required(cfg, ck);
  check_numbers(cfg, ck);
  check_precision(cfg, ck);
  check_scheduler(cfg, ck);
  check_sequence_parallel(cfg, opt, ck);
  check_packing(cfg, ck);
  check_long_context(cfg, ck);
  check_method(cfg, ck);
  check_eval(cfg, ck);
  check_model(cfg, ck, model);
  check_adapters(cfg, model, ck);
  if (dialect)
    dialect->check(cfg, ck);
  else
    check_datasets(cfg, ck);
  check_paths(cfg, ck);
  if (model_out) *model_out = std::move(model);
  auto diags = ck.take();
  sort_by_position(diags);
  return diags;
}

CheckResult check_config_file(const std::string& path, const ValidateOptions& opt,
                              const std::vector<std::string>& overrides) {
  LoadResult loaded = load_config_file(path);
  CheckResult res{std::move(loaded.config), std::move(loaded.diagnostics), std::nullopt};
  const bool parsed = !res.config.source.key_pos.empty();
  if (parsed) {
    auto more = apply_overrides(res.config, overrides);
    res.diagnostics.insert(res.diagnostics.end(), more.begin(), more.end());
    more = validate_config(res.config, opt, &res.model);
    res.diagnostics.insert(res.diagnostics.end(), more.begin(), more.end());
    sort_by_position(res.diagnostics);
    if (const ConfigDialect* dialect = dialect_of(res.config)) dialect->resolve(res.config, opt);
  }
  return res;
}

void resolve_hub_models(RunConfig& cfg) {
  auto resolve_hub = [&cfg](std::string& value) {
    std::error_code ec;
    if (value.empty() || fs::exists(value, ec) || !looks_like_hub_id(value)) return;
    std::string error;
    if (auto dir = resolve_model_dir(value, {}, cfg.model_revision,
                                     cfg.cache_dir.value_or(std::string()), error))
      value = *dir;
  };
  resolve_hub(cfg.model_name_or_path);
  if (cfg.ref_model) resolve_hub(*cfg.ref_model);
}

RunConfig normalized(const RunConfig& cfg) {
  RunConfig out = cfg;
  if (!out.eval_steps && out.eval_strategy == EvalStrategy::Steps) out.eval_steps = cfg.logging_steps;
  return out;
}

std::vector<int> divisors(int world_size) {
  std::vector<int> out;
  for (int d = 1; d <= world_size; ++d)
    if (world_size % d == 0) out.push_back(d);
  return out;
}

UlyssesHeads ulysses_heads(const ModelInfo& m, int64_t degree) {
  if (degree <= 1) return UlyssesHeads::Ok;
  if (m.num_heads % degree != 0) return UlyssesHeads::QueryHeadsIndivisible;
  if (m.num_kv_heads % degree != 0 && degree % m.num_kv_heads != 0)
    return UlyssesHeads::KvHeadsUnsplittable;
  return UlyssesHeads::Ok;
}

int64_t largest_ulysses_degree(const ModelInfo& m, int64_t sp) {
  for (int64_t u = sp; u > 1; --u)
    if (sp % u == 0 && ulysses_heads(m, u) == UlyssesHeads::Ok) return u;
  return 1;
}

}  // namespace studio
