// The run config: loading LLaMA-Factory YAML, validation located at key and line, command-line
// overrides (saving and round trips: tst_config_save.cpp).
#include <QtTest>

#include <QJsonDocument>
#include <QJsonObject>

#include <functional>

#include <yaml-cpp/yaml.h>

#include "studio/config/adapters.h"
#include "studio/config/config_io.h"
#include "studio/config/config_schema.h"
#include "studio/config/memory_estimate.h"
#include "studio/config/validate.h"
#include "studio/model_facts/model_info.h"
#include "config_test_support.h"

using namespace studio;
using config_test::dump;
using config_test::kBase;
using config_test::readAll;

namespace {

ValidateOptions options(int nproc, bool for_training = false) {
  ValidateOptions opt;
  opt.nproc_per_node = nproc;
  opt.for_training = for_training;
  opt.base_dir = STUDIO_TEST_FIXTURES_DIR;
  return opt;
}

std::vector<Diagnostic> check(const QString& yaml, const ValidateOptions& opt) {
  LoadResult loaded = load_config_string(yaml.toStdString(), "case.yaml");
  auto diags = loaded.diagnostics;
  if (!loaded.config.source.key_pos.empty()) {
    auto more = validate_config(loaded.config, opt);
    diags.insert(diags.end(), more.begin(), more.end());
  }
  return diags;
}

const Diagnostic* find(const std::vector<Diagnostic>& diags, Severity sev, const QString& key) {
  for (const auto& d : diags)
    if (d.severity == sev && QString::fromStdString(d.key) == key) return &d;
  return nullptr;
}


}  // namespace

class TestRunConfig : public QObject {
  Q_OBJECT

 private slots:
  void invalidConfigs_data();
  void invalidConfigs();
  void validConfigs_data();
  void validConfigs();
  void realisticFileIsValidWithEightProcesses();
  void llamaFactoryStageExamples_data();
  void llamaFactoryStageExamples();
  void llamaFactoryAdapterExamples_data();
  void llamaFactoryAdapterExamples();
  void llamaFactoryExportExampleIsNoTrainingFile();
  void quantizedOnDiskBase_data();
  void quantizedOnDiskBase();
  void yamlNumbersInEveryForm_data();
  void yamlNumbersInEveryForm();
  void mergeKeysResolveAsPyYaml_data();
  void mergeKeysResolveAsPyYaml();
  void normalizedKeepsCutoffUnderSequenceParallelism();
  void missingPathIsWarningInValidateErrorInTraining();
  void formatMatchesFileLineColumnKey();
  void everyTableKeyHasHelpAndParses();
  void overridesFromCommandLine();
  void mixtureOfExpertsNotes();
  void unimplementedPrecisionIsRefusedForTraining();
};

void TestRunConfig::invalidConfigs_data() {
  QTest::addColumn<QString>("extra");     // appended to kBase (or a whole file if it has "!full")
  QTest::addColumn<int>("nproc");
  QTest::addColumn<QString>("key");
  QTest::addColumn<int>("line");
  QTest::addColumn<QString>("fragment");

  QTest::newRow("sp 3 does not divide 4") << "sequence_parallel_size: 3\n" << 4
                                          << "sequence_parallel_size" << 5 << "does not divide";
  QTest::newRow("sp 3 lists valid sizes") << "sequence_parallel_size: 3\n" << 4
                                          << "sequence_parallel_size" << 5 << "allowed: 1, 2, 4";
  QTest::newRow("sp 0") << "sequence_parallel_size: 0\n" << 0 << "sequence_parallel_size" << 5
                        << "at least 1";
  QTest::newRow("unknown sp mode") << "sequence_parallel_mode: ring\n" << 0
                                   << "sequence_parallel_mode" << 5
                                   << "zigzag-ring | ulysses | usp";
  QTest::newRow("usp degrees do not multiply to sp")
      << "sequence_parallel_size: 8\nsequence_parallel_mode: usp\n"
         "sequence_parallel_ulysses_degree: 2\nsequence_parallel_ring_degree: 2\n"
      << 8 << "sequence_parallel_ulysses_degree" << 7 << "2 x 2 != 8";
  QTest::newRow("bf16 with fp16") << "bf16: true\nfp16: true\n" << 0 << "fp16" << 6
                                  << "cannot be combined with bf16 (line 5)";
  QTest::newRow("pure_bf16 with fp16") << "fp16: true\npure_bf16: yes\n" << 0 << "pure_bf16" << 6
                                       << "cannot be combined with fp16";
  QTest::newRow("learning rate zero") << "learning_rate: 0\n" << 0 << "learning_rate" << 5
                                      << "must be positive";
  QTest::newRow("learning rate negative") << "learning_rate: -1e-5\n" << 0 << "learning_rate"
                                          << 5 << "must be positive";
  QTest::newRow("batch size zero") << "per_device_train_batch_size: 0\n" << 0
                                   << "per_device_train_batch_size" << 5 << "at least 1";
  QTest::newRow("accumulation zero") << "gradient_accumulation_steps: 0\n" << 0
                                     << "gradient_accumulation_steps" << 5 << "at least 1";
  // --- finetuning_type lora and freeze (docs/ADAPTERS.md): LLaMA-Factory's rules -----------
  QTest::newRow("oft is refused") << "finetuning_type: oft\n" << 0 << "finetuning_type" << 5
                                  << "OFT adapters are not implemented in studio-train";
  QTest::newRow("lora_rank 0") << "finetuning_type: lora\nlora_rank: 0\n" << 0 << "lora_rank" << 6
                               << "at least 1";
  QTest::newRow("lora_dropout 1") << "finetuning_type: lora\nlora_dropout: 1\n" << 0
                                  << "lora_dropout" << 6 << "[0, 1)";
  QTest::newRow("lora_target not a module of the model")
      << "finetuning_type: lora\nlora_target: q_proj,x_proj\n" << 0 << "lora_target" << 6
      << "'x_proj' is not a linear layer of Qwen2ForCausalLM's decoder layers (q_proj, k_proj, "
         "v_proj, o_proj, gate_proj, up_proj, down_proj, or all)";
  QTest::newRow("use_dora with full") << "use_dora: true\n" << 0 << "use_dora" << 5
                                      << "only valid for finetuning_type: lora";
  QTest::newRow("use_rslora with freeze") << "finetuning_type: freeze\nuse_rslora: true\n" << 0
                                          << "use_rslora" << 6
                                          << "only valid for finetuning_type: lora";
  QTest::newRow("adapter_name_or_path with full")
      << "adapter_name_or_path: saves/lora\n"
      << 0 << "adapter_name_or_path" << 5 << "adapters load only with finetuning_type: lora";
  QTest::newRow("freeze_trainable_layers 0")
      << "finetuning_type: freeze\nfreeze_trainable_layers: 0\n" << 0 << "freeze_trainable_layers"
      << 6 << "must not be 0";
  QTest::newRow("freeze_trainable_modules bogus")
      << "finetuning_type: freeze\nfreeze_trainable_modules: self_attn,bogus\n" << 0
      << "freeze_trainable_modules" << 6 << "'bogus' is not a module of a decoder layer";
  QTest::newRow("freeze_extra_modules bogus")
      << "finetuning_type: freeze\nfreeze_extra_modules: bogus\n" << 0 << "freeze_extra_modules"
      << 6 << "'bogus' is not a module outside the decoder layers";
  QTest::newRow("additional_target names nothing")
      << "finetuning_type: lora\nadditional_target: bogus\n" << 0 << "additional_target" << 6
      << "'bogus' names no module of this model";
  QTest::newRow("additional_target also a lora_target")
      << "finetuning_type: lora\nlora_target: q_proj\nadditional_target: q_proj\n" << 0
      << "additional_target" << 7 << "'q_proj' has LoRA adapters";
  // PEFT would train an untied copy of the tied embeddings (tiny-qwen2 ties them).
  QTest::newRow("additional_target embed_tokens on a tied model")
      << "!full\nmodel_name_or_path: models/tiny-qwen2\ndataset: long_docs\ntemplate: qwen\n"
         "output_dir: out/x\nfinetuning_type: lora\nadditional_target: embed_tokens\n"
      << 0 << "additional_target" << 6 << "ties its LM head to the embeddings";
  QTest::newRow("freeze_extra_modules lm_head on a tied model")
      << "!full\nmodel_name_or_path: models/tiny-qwen2\ndataset: long_docs\ntemplate: qwen\n"
         "output_dir: out/x\nfinetuning_type: freeze\nfreeze_extra_modules: lm_head\n"
      << 0 << "freeze_extra_modules" << 6 << "name embed_tokens instead";
  QTest::newRow("lora on a mixture-of-experts model")
      << "!full\nmodel_name_or_path: models/qwen1.5-moe-a2.7b-shape\ndataset: long_docs\n"
         "template: qwen\noutput_dir: out/x\nfinetuning_type: lora\n"
      << 0 << "finetuning_type" << 5
      << "finetuning_type lora on mixture-of-experts models is not implemented";
  QTest::newRow("freeze on a mixture-of-experts model")
      << "!full\nmodel_name_or_path: models/qwen1.5-moe-a2.7b-shape\ndataset: long_docs\n"
         "template: qwen\noutput_dir: out/x\nfinetuning_type: freeze\n"
      << 0 << "finetuning_type" << 5
      << "finetuning_type freeze on mixture-of-experts models is not implemented";
  QTest::newRow("stage rm with lora")
      << "!full\nmodel_name_or_path: models/qwen2.5-7b-shape\ndataset: dpo_pairs\ntemplate: qwen\n"
         "output_dir: out/x\nstage: rm\nfinetuning_type: lora\n"
      << 0 << "finetuning_type" << 6 << "stage rm with lora is not implemented";
  QTest::newRow("loraplus refused") << "finetuning_type: lora\nloraplus_lr_ratio: 16.0\n" << 0
                                    << "loraplus_lr_ratio" << 6 << "LoRA+";
  QTest::newRow("pissa refused") << "finetuning_type: lora\npissa_init: true\n" << 0
                                 << "pissa_init" << 6 << "PiSSA initialisation is not implemented";
  QTest::newRow("llama pro refused") << "finetuning_type: freeze\nuse_llama_pro: true\n" << 0
                                     << "use_llama_pro" << 6 << "LLaMA-Pro";
  QTest::newRow("ppo is refused") << "stage: ppo\n" << 0 << "stage" << 5 << "not supported";
  QTest::newRow("bco_pair is refused") << "stage: dpo\npref_loss: bco_pair\n" << 0 << "pref_loss"
                                       << 6 << "not supported";
  QTest::newRow("kto on instruction data") << "stage: kto\n" << 0 << "dataset" << 2
                                           << "has no kto_tag column";
  QTest::newRow("kto on preference pairs")
      << "!full\nmodel_name_or_path: models/qwen2.5-7b-shape\ndataset: dpo_pairs\n"
         "template: qwen\noutput_dir: out/run-that-does-not-exist\nstage: kto\n"
      << 0 << "dataset" << 2 << "is a preference dataset (\"ranking\": true); stage: kto";
  QTest::newRow("kto with packing") << "stage: kto\npacking: true\n" << 0 << "packing" << 6
                                    << "stage kto runs each example and its KL sequence";
  QTest::newRow("kto with train_on_prompt") << "stage: kto\ntrain_on_prompt: true\n" << 0
                                            << "train_on_prompt" << 6 << "stage kto scores";
  QTest::newRow("kto negative weight") << "stage: kto\nkto_rejected_weight: -1\n" << 0
                                       << "kto_rejected_weight" << 6 << "must not be negative";
  QTest::newRow("kto pref_beta 0") << "stage: kto\npref_beta: 0\n" << 0 << "pref_beta" << 6
                                   << "must be positive";
  QTest::newRow("negative simpo_gamma") << "stage: dpo\npref_loss: simpo\nsimpo_gamma: -0.5\n" << 0
                                        << "simpo_gamma" << 7 << "must not be negative";
  // LLaMA-Factory refuses these outside stage sft too.
  QTest::newRow("pt with neat_packing") << "stage: pt\nneat_packing: true\n" << 0 << "neat_packing"
                                        << 6 << "no sample boundaries are left to isolate";
  QTest::newRow("pt with train_on_prompt") << "stage: pt\ntrain_on_prompt: true\n" << 0
                                           << "train_on_prompt" << 6 << "learns every token";
  QTest::newRow("pt with mask_history") << "stage: pt\nmask_history: true\n" << 0
                                        << "mask_history" << 6 << "learns every token";
  QTest::newRow("rm with packing") << "stage: rm\npacking: true\n" << 0 << "packing" << 6
                                   << "scores each chosen and rejected sequence at its last token";
  QTest::newRow("rm with neat_packing") << "stage: rm\nneat_packing: true\n" << 0
                                        << "neat_packing" << 6 << "one sequence per row";
  QTest::newRow("rm with train_on_prompt") << "stage: rm\ntrain_on_prompt: true\n" << 0
                                           << "train_on_prompt" << 6 << "stage rm learns no tokens";
  QTest::newRow("rm with mask_history") << "stage: rm\nmask_history: true\n" << 0
                                        << "mask_history" << 6 << "stage rm learns no tokens";
  QTest::newRow("rm with use_dft_loss") << "stage: rm\nuse_dft_loss: true\n" << 0
                                        << "use_dft_loss" << 6 << "";
  QTest::newRow("preprocessing_batch_size 0") << "preprocessing_batch_size: 0\n" << 0
                                              << "preprocessing_batch_size" << 5 << "at least 1";
  QTest::newRow("malformed yaml line") << "learning_rate 5e-5\nseed: 1\n" << 0 << "" << 5
                                       << "malformed YAML";
  QTest::newRow("bad indentation") << "lr_scheduler_kwargs:\n  min_lr_rate: 0.1\n   bad: 1\n" << 0
                                   << "" << 7 << "malformed YAML";
  QTest::newRow("ulysses heads not divisible")
      << "sequence_parallel_size: 8\nsequence_parallel_mode: ulysses\n" << 8
      << "sequence_parallel_size" << 5 << "28 query heads are not divisible by 8";
  QTest::newRow("ulysses gqa kv heads")
      << "sequence_parallel_size: 14\nsequence_parallel_mode: ulysses\n" << 14
      << "sequence_parallel_size" << 5 << "key/value heads";
  QTest::newRow("usp ulysses degree heads")
      << "sequence_parallel_size: 16\nsequence_parallel_mode: usp\n"
         "sequence_parallel_ulysses_degree: 8\nsequence_parallel_ring_degree: 2\n"
      << 16 << "sequence_parallel_ulysses_degree" << 7 << "not divisible by 8";
  QTest::newRow("int expected") << "cutoff_len: long\n" << 0 << "cutoff_len" << 5
                                << "expected a whole number";
  QTest::newRow("fractional int") << "save_steps: 2.5\n" << 0 << "save_steps" << 5
                                  << "expected a whole number";
  QTest::newRow("bool expected") << "bf16: maybe\n" << 0 << "bf16" << 5
                                 << "expected true or false";
  QTest::newRow("number expected") << "learning_rate: fast\n" << 0 << "learning_rate" << 5
                                   << "expected a number";
  QTest::newRow("mapping where scalar") << "seed:\n  a: 1\n" << 0 << "seed" << 6
                                        << "got a mapping";
  QTest::newRow("value missing") << "cutoff_len:\n" << 0 << "cutoff_len" << 5 << "needs a value";
  QTest::newRow("dataset not in info") << "dataset_dir: data\neval_dataset: nope\n" << 0
                                       << "eval_dataset" << 6 << "'nope' is not in";
  QTest::newRow("dpo needs ranking data") << "stage: dpo\ndataset_dir: data\n" << 0 << "dataset"
                                          << 2 << "not a preference dataset";
  QTest::newRow("duplicate key") << "seed: 1\nseed: 2\n" << 0 << "seed" << 6 << "first given at line 5";
  QTest::newRow("quantization without lora refused")
      << "quantization_bit: 4\n" << 0 << "quantization_bit" << 5
      << "a quantized base trains only with finetuning_type: lora";
  QTest::newRow("8-bit quantization refused")
      << "finetuning_type: lora\nquantization_bit: 8\n" << 0 << "quantization_bit" << 6
      << "8-bit (LLM.int8) training is not implemented";
  QTest::newRow("qlora under zero-3 refused")
      << "finetuning_type: lora\nquantization_bit: 4\nzero_stage: 3\n" << 0 << "quantization_bit"
      << 6 << "QLoRA under ZeRO-3 is not implemented";
  QTest::newRow("gptq refused")
      << "finetuning_type: lora\nquantization_bit: 4\nquantization_method: gptq\n" << 0
      << "quantization_method" << 7 << "'gptq' is not implemented";
  QTest::newRow("other optimizer refused") << "optim: sgd\n" << 0 << "optim" << 5 << "AdamW";
  QTest::newRow("min lr schedule without kwargs") << "lr_scheduler_type: cosine_with_min_lr\n" << 0
                                                  << "lr_scheduler_type" << 5 << "min_lr_rate";
  QTest::newRow("unknown scheduler kwarg") << "lr_scheduler_kwargs: {power: 2}\n" << 0
                                           << "lr_scheduler_kwargs" << 5 << "not an option";
  QTest::newRow("min_lr_rate out of range")
      << "lr_scheduler_type: cosine_with_min_lr\nlr_scheduler_kwargs: {\"min_lr_rate\": 1.5}\n"
      << 0 << "lr_scheduler_kwargs" << 6 << "[0, 1]";
  QTest::newRow("eval without data") << "eval_strategy: steps\n" << 0 << "eval_strategy" << 5
                                     << "needs evaluation data";
  QTest::newRow("warmup ratio") << "warmup_ratio: 1.5\n" << 0 << "warmup_ratio" << 5 << "[0, 1)";
  QTest::newRow("moe aux coefficient") << "moe_aux_loss_coef: -0.01\n" << 0 << "moe_aux_loss_coef"
                                       << 5 << "must not be negative";
  // LLaMA-Factory keys whose run would differ from what studio-train trains.
  QTest::newRow("8-bit AdamW") << "optim: adamw_8bit\n" << 0 << "optim" << 5
                               << "quantized optimizer states";
  QTest::newRow("paged 8-bit AdamW") << "optim: paged_adamw_8bit\n" << 0 << "optim" << 5
                                     << "set it to adamw_torch";
  QTest::newRow("ASFT and DFT") << "use_dft_loss: true\nuse_asft_loss: true\n" << 0
                                << "use_asft_loss" << 6 << "ASFT already contains the DFT loss";
  QTest::newRow("ASFT loss for DPO") << "stage: dpo\nuse_asft_loss: true\n" << 0
                                     << "use_asft_loss" << 6 << "applies to stage sft only";
  QTest::newRow("dynamic batching for DPO") << "stage: dpo\nbatching_strategy: dynamic_batching\n"
                                            << 0 << "batching_strategy" << 6
                                            << "applies to stage sft only";
  QTest::newRow("dynamic padding-free with packing")
      << "neat_packing: true\nbatching_strategy: dynamic_padding_free\n" << 0
      << "batching_strategy" << 6 << "neat_packing has packed the samples already";
  QTest::newRow("unknown batching strategy") << "batching_strategy: greedy\n" << 0
                                             << "batching_strategy" << 5 << "dynamic_padding_free";
  QTest::newRow("ASFT alpha") << "use_asft_loss: true\nasft_alpha: -1\n" << 0 << "asft_alpha" << 6
                              << "must not be negative";
  QTest::newRow("DFT and EAFT") << "use_dft_loss: true\nuse_eaft_loss: true\n" << 0
                                << "use_eaft_loss" << 6 << "choose one";
  QTest::newRow("DFT loss for DPO") << "stage: dpo\nuse_dft_loss: true\n" << 0 << "use_dft_loss"
                                    << 6 << "applies to stage sft only";
  QTest::newRow("mixture of depths") << "mixture_of_depths: convert\n" << 0
                                     << "mixture_of_depths" << 5 << "not implemented";
  QTest::newRow("hub dataset") << "!full\nmodel_name_or_path: models/qwen2.5-7b-shape\n"
                                  "dataset: hub_only\ntemplate: qwen\noutput_dir: x\n"
                               << 0 << "dataset" << 2
                               << "'hf_hub_url' datasets are not downloaded here";
  QTest::newRow("report_to a map") << "report_to: {a: 1}\n" << 0 << "report_to" << 5
                                   << "expected a name or a list of names";
  QTest::newRow("val size fraction") << "val_size: 1.5\n" << 0 << "val_size" << 5
                                     << "whole number";
  QTest::newRow("dpo beta") << "stage: dpo\ndataset_dir: data\npref_beta: 0\n" << 0 << "pref_beta"
                            << 7 << "must be positive";
  QTest::newRow("label smoothing range")
      << "stage: dpo\ndpo_label_smoothing: 0.7\n" << 0 << "dpo_label_smoothing" << 6 << "0.5";
  QTest::newRow("unsupported architecture")
      << "!full\nmodel_name_or_path: models/gemma-shape\ndataset: long_docs\ntemplate: qwen\n"
         "output_dir: out/x\n"
      << 0 << "model_name_or_path" << 1 << "GemmaForCausalLM is not supported";
  QTest::newRow("multimodal wrapper names its architecture")
      << "!full\nmodel_name_or_path: models/multimodal-shape\ndataset: long_docs\ntemplate: qwen\n"
         "output_dir: out/x\n"
      << 0 << "model_name_or_path" << 1
      << "Gemma3ForConditionalGeneration is not supported (allowed: LlamaForCausalLM";
  QTest::newRow("unknown template") << "!full\nmodel_name_or_path: models/qwen2.5-7b-shape\n"
                                       "dataset: long_docs\ntemplate: chatglm3\noutput_dir: x\n"
                                    << 0 << "template" << 3 << "qwen | qwen3";
  QTest::newRow("missing template") << "!full\nmodel_name_or_path: models/qwen2.5-7b-shape\n"
                                       "dataset: long_docs\noutput_dir: x\n"
                                    << 0 << "template" << 0 << "required";
  QTest::newRow("malformed deepspeed json") << "deepspeed: deepspeed/broken.json\n" << 0
                                            << "deepspeed" << 5 << "malformed JSON";
  // The ZeRO request: the DeepSpeed JSON's fields, the native keys, and the two together.
  QTest::newRow("deepspeed device null") << "deepspeed: deepspeed/null_device.json\n" << 0
                                         << "deepspeed" << 5 << "must be \"cpu\" or \"none\"";
  QTest::newRow("deepspeed value against the yaml")
      << "deepspeed: deepspeed/mismatch.json\n" << 0 << "deepspeed" << 5
      << "train_micro_batch_size_per_gpu is 4 but per_device_train_batch_size is 1";
  QTest::newRow("deepspeed betas not numbers") << "deepspeed: deepspeed/bad_betas.json\n" << 0
                                               << "deepspeed" << 5 << "betas must be two numbers";
  QTest::newRow("deepspeed nvme refused") << "deepspeed: deepspeed/nvme.json\n" << 0
                                          << "deepspeed" << 5 << "nvme offload is not implemented";
  QTest::newRow("zero_stage against the json")
      << "deepspeed: deepspeed/z1.json\nzero_stage: 3\n" << 0 << "zero_stage" << 6
      << "asks for stage 1";
  QTest::newRow("offload_param below stage 3") << "zero_stage: 2\noffload_param: true\n" << 0
                                               << "offload_param" << 6 << "needs ZeRO stage 3";
  QTest::newRow("offload_optimizer without zero") << "offload_optimizer: true\n" << 0
                                                  << "offload_optimizer" << 5
                                                  << "needs ZeRO stage 1 or more";
  QTest::newRow("zero_stage out of range") << "zero_stage: 4\n" << 0 << "zero_stage" << 5 << "0, 1, 2 or 3";
  // Issue 35: whole numbers are read exactly and within what they are read into; past that they
  // are too large (or small), never cut to 32 bits or rounded through a double.
  QTest::newRow("deepspeed stage past 32 bits")
      << "deepspeed: deepspeed/stage_4294967299.json\n" << 0 << "deepspeed" << 5
      << "zero_optimization.stage must be 0, 1, 2 or 3: 4294967299 is too large (at most 3)";
  QTest::newRow("deepspeed stage 2^32") << "deepspeed: deepspeed/stage_4294967296.json\n" << 0
                                        << "deepspeed" << 5 << "4294967296 is too large";
  // The JSON's batch sizes are counts too: whole, within int32, compared with the YAML's exactly.
  QTest::newRow("deepspeed micro-batch not whole")
      << "deepspeed: deepspeed/batch_fraction.json\n" << 0 << "deepspeed" << 5
      << "train_micro_batch_size_per_gpu: expected a whole number, got 2.5";
  QTest::newRow("deepspeed train_batch_size past 32 bits")
      << "deepspeed: deepspeed/batch_past_32_bits.json\n" << 0 << "deepspeed" << 5
      << "train_batch_size: 4294967304 is too large (at most 2147483647)";
  QTest::newRow("deepspeed accumulation a boolean")
      << "deepspeed: deepspeed/batch_boolean.json\n" << 0 << "deepspeed" << 5
      << "gradient_accumulation_steps must be a whole number or \"auto\"";
  QTest::newRow("zero_stage past 32 bits")
      << "zero_stage: 4294967299\n" << 0 << "zero_stage" << 5
      << "4294967299 is too large (at most 2147483647)";
  QTest::newRow("batch size int64's largest")
      << "per_device_train_batch_size: 9223372036854775807\n" << 0
      << "per_device_train_batch_size" << 5 << "9223372036854775807 is too large";
  QTest::newRow("steps past int64") << "max_steps: 99999999999999999999\n" << 0 << "max_steps"
                                    << 5 << "99999999999999999999 is too large";
  QTest::newRow("steps below int32") << "max_steps: -9999999999\n" << 0 << "max_steps" << 5
                                     << "-9999999999 is too small (at least -2147483648)";
  QTest::newRow("2^53 + 1 not rounded") << "cutoff_len: 9007199254740993\n" << 0 << "cutoff_len"
                                        << 5 << "9007199254740993 is too large";
  QTest::newRow("seed past int64") << "seed: 9223372036854775808\n" << 0 << "seed" << 5
                                   << "too large (at most 9223372036854775807)";
  // Merge keys: what is not a mapping cannot be merged, and a merged key's problem is reported
  // where the anchored mapping wrote it.
  QTest::newRow("merge of a scalar") << "<<: 5\n" << 0 << "" << 5
                                     << "`<<` merges a mapping or a list of mappings";
  QTest::newRow("merge of a list holding a scalar")
      << "defaults: &d {seed: 1}\n<<: [*d, 7]\n" << 0 << "" << 6 << "got a list holding '7'";
  QTest::newRow("merge given twice") << "<<: {seed: 1}\n<<: {seed: 3}\n" << 0 << "" << 6
                                     << "`<<` is given twice in this mapping (first at line 5)";
  QTest::newRow("merged key at its anchor's line")
      << "defaults: &d\n  per_device_train_batch_size: 0\n<<: *d\n" << 0
      << "per_device_train_batch_size" << 6 << "at least 1";
  // Nesting past yaml-cpp's depth guard: said so, under the key that holds it.
  QTest::newRow("5000-deep flow value")
      << "lr_scheduler_kwargs: " + QString(5000, '[') + QString(5000, ']') + "\n" << 0 << ""
      << 5 << "nests too deeply: lists and mappings inside one another go deeper here than the "
              "YAML reader follows (in the value of 'lr_scheduler_kwargs', line 5)";
  QString deepBlock = "lr_scheduler_kwargs:\n";
  for (int depth = 1; depth <= 5000; ++depth) deepBlock += QString(2 * depth, ' ') + "k:\n";
  QTest::newRow("5000-deep block value") << deepBlock << 0 << "" << 503
                                         << "nests too deeply: lists and mappings inside one "
                                            "another go deeper here than the YAML reader follows "
                                            "(in the value of 'lr_scheduler_kwargs', line 5)";
  QTest::newRow("not a mapping") << "!full\n- a\n- b\n" << 0 << "" << 1 << "mapping";
  QTest::newRow("empty file") << "!full\n" << 0 << "" << 1 << "empty";
}

void TestRunConfig::invalidConfigs() {
  QFETCH(QString, extra);
  QFETCH(int, nproc);
  QFETCH(QString, key);
  QFETCH(int, line);
  QFETCH(QString, fragment);
  const QString yaml = extra.startsWith("!full\n") ? extra.mid(6) : kBase + extra;
  const auto diags = check(yaml, options(nproc));
  QVERIFY2(has_errors(diags), qPrintable("expected an error, got:\n" + dump(diags)));
  bool matched = false;
  for (const auto& d : diags) {
    if (d.severity != Severity::Error || QString::fromStdString(d.key) != key) continue;
    const QString text = QString::fromStdString(d.format());
    if (d.line == line && text.contains(fragment) &&
        text.startsWith(QStringLiteral("case.yaml:%1:").arg(line > 0 ? line : 1)))
      matched = true;
  }
  QVERIFY2(matched, qPrintable(QStringLiteral("no error for key '%1' at line %2 containing '%3' "
                                              "in:\n%4")
                                   .arg(key).arg(line).arg(fragment, dump(diags))));
}

void TestRunConfig::validConfigs_data() {
  QTest::addColumn<QString>("extra");
  QTest::addColumn<int>("nproc");
  QTest::addColumn<QString>("warningKey");  // a warning expected at this key, or empty
  QTest::addColumn<int>("warningLine");
  QTest::addColumn<QString>("warningText");  // what that warning says, or empty

  QTest::newRow("base") << "" << 0 << "" << 0 << QString();
  QTest::newRow("moe aux loss on a dense model") << "moe_aux_loss_coef: 0.001\n" << 0
                                                  << "moe_aux_loss_coef" << 5 << QString();
  QTest::newRow("paged 32-bit AdamW is AdamW") << "optim: paged_adamw_32bit\n"
                                               << 0 << "optim" << 5 << QString();
  QTest::newRow("fp8 computes in bf16") << "bf16: true\nfp8: true\n"
                                        << 0 << "fp8" << 6 << QString();
  QTest::newRow("a data file only the cluster has") << "" << 0 << "dataset" << 2 << QString();
  QTest::newRow("sp 4 of 8") << "sequence_parallel_size: 4\n" << 8 << "" << 0 << QString();
  QTest::newRow("ulysses 4 scatters kv heads")
      << "sequence_parallel_size: 4\nsequence_parallel_mode: ulysses\n"
      << 4 << "" << 0 << QString();
  QTest::newRow("ulysses 2") << "sequence_parallel_size: 2\nsequence_parallel_mode: ulysses\n"
                             << 8 << "" << 0 << QString();
  QTest::newRow("usp 2 x 4") << "sequence_parallel_size: 8\nsequence_parallel_mode: usp\n"
                                "sequence_parallel_ulysses_degree: 2\n"
                                "sequence_parallel_ring_degree: 4\n"
                             << 8 << "" << 0 << QString();
  // Batches are padded to a multiple of the SP split, not the cutoff: any cutoff is fine.
  QTest::newRow("cutoff not a multiple of sp")
      << "cutoff_len: 1001\nsequence_parallel_size: 8\n" << 8 << "" << 0 << QString();
  QTest::newRow("unknown key kept with warning") << "enable_liger_kernel: true\n" << 0
                                                 << "enable_liger_kernel" << 5 << QString();
  QTest::newRow("typo suggests key") << "learnin_rate: 1e-5\n"
                                     << 0 << "learnin_rate" << 5 << QString();
  QTest::newRow("no-effect key warns") << "plot_loss: true\n" << 0 << "plot_loss" << 5 << QString();
  QTest::newRow("pt") << "stage: pt\n" << 0 << "" << 0 << QString();
  QTest::newRow("pt without a template")
      << "!full\nmodel_name_or_path: models/qwen2.5-7b-shape\ndataset: long_docs\n"
         "output_dir: out/run-that-does-not-exist\nstage: pt\n"
      << 0 << "" << 0 << QString();
  // Stage dpo on the fixtures' preference dataset, the base's other keys as they are.
  const auto dpo = [](const char* extra) {
    return QStringLiteral("!full\nmodel_name_or_path: models/qwen2.5-7b-shape\ndataset: dpo_pairs\n"
                          "template: qwen\noutput_dir: out/run-that-does-not-exist\n") +
           QString::fromUtf8(extra);
  };
  QTest::newRow("orpo") << dpo("stage: dpo\npref_loss: orpo\n") << 0 << "" << 0 << QString();
  QTest::newRow("simpo with its gamma") << dpo("stage: dpo\npref_loss: simpo\nsimpo_gamma: 1.0\n")
                                        << 0 << "" << 0 << QString();
  QTest::newRow("kto_pair") << dpo("stage: dpo\npref_loss: kto_pair\n") << 0 << "" << 0
                            << QString();
  QTest::newRow("rm on preference pairs") << dpo("stage: rm\n") << 0 << "" << 0 << QString();
  const auto kto = [](const char* extra) {
    return QStringLiteral("!full\nmodel_name_or_path: models/qwen2.5-7b-shape\n"
                          "dataset: kto_feedback\ntemplate: qwen\n"
                          "output_dir: out/run-that-does-not-exist\n") +
           QString::fromUtf8(extra);
  };
  QTest::newRow("kto on kto_tag data") << kto("stage: kto\n") << 0 << "" << 0 << QString();
  QTest::newRow("kto with weights and ftx")
      << kto("stage: kto\nkto_chosen_weight: 1.33\nkto_rejected_weight: 0.5\npref_ftx: 0.1\n")
      << 0 << "" << 0 << QString();
  QTest::newRow("kto: pref_loss is dpo's") << kto("stage: kto\npref_loss: ipo\n") << 0
                                           << "pref_loss" << 6 << QString();
  QTest::newRow("kto weight in a dpo run") << dpo("stage: dpo\nkto_chosen_weight: 2\n") << 0
                                           << "kto_chosen_weight" << 6 << QString();
  QTest::newRow("rm: pref_beta is dpo's") << dpo("stage: rm\npref_beta: 0.2\n") << 0
                                          << "pref_beta" << 6 << QString();
  QTest::newRow("rm: ref_model is dpo's") << dpo("stage: rm\nref_model: models/qwen2.5-7b-shape\n")
                                          << 0 << "ref_model" << 6 << QString();
  QTest::newRow("orpo builds no reference: ref_model ignored")
      << dpo("stage: dpo\npref_loss: orpo\nref_model: models/qwen2.5-7b-shape\n") << 0
      << "ref_model" << 7 << QString();
  QTest::newRow("simpo builds no reference: precompute ignored")
      << dpo("stage: dpo\npref_loss: simpo\nprecompute_ref_logps: true\n") << 0
      << "precompute_ref_logps" << 7 << QString();
  QTest::newRow("simpo_gamma without simpo") << dpo("stage: dpo\nsimpo_gamma: 1.0\n") << 0
                                             << "simpo_gamma" << 6 << QString();
  QTest::newRow("simpo_gamma in an sft run") << "simpo_gamma: 1.0\n"
                                             << 0 << "simpo_gamma" << 5 << QString();
  QTest::newRow("report_to none: nothing to say") << "report_to: none\n"
                                                  << 0 << "" << 0 << QString();
  QTest::newRow("report_to wandb: not built in") << "report_to: wandb\n"
                                                 << 0 << "report_to" << 5 << QString();
  QTest::newRow("logging_dir without tensorboard") << "logging_dir: tb\n"
                                                   << 0 << "logging_dir" << 5 << QString();
  QTest::newRow("neat packing with ulysses")
      << "sequence_parallel_size: 2\nsequence_parallel_mode: ulysses\nneat_packing: true\n" << 2
      << "" << 0 << QString();
  // Keys studio-train does not implement warn here and are refused when training starts; keys
  // with a narrower meaning say so.
  QTest::newRow("fp16 warns") << "fp16: true\n" << 0 << "fp16" << 5 << QString();
  QTest::newRow("pure_bf16 warns") << "pure_bf16: true\n" << 0 << "pure_bf16" << 5 << QString();
  QTest::newRow("shuffle_for_sequence_parallel without SP warns")
      << "shuffle_for_sequence_parallel: false\n"
      << 0 << "shuffle_for_sequence_parallel" << 5 << QString();
  QTest::newRow("dpo packing is isolated (a warning)")
      << "!full\nmodel_name_or_path: models/qwen2.5-7b-shape\nstage: dpo\ndataset: dpo_pairs\n"
         "dataset_dir: data\ntemplate: qwen\noutput_dir: x\npacking: true\n"
      << 0 << "packing" << 7 << QString();
  // The ring masks by packed sample in every block: no longer refused (as 360-LLaMA-Factory does).
  QTest::newRow("neat packing with zigzag-ring")
      << "sequence_parallel_size: 2\nneat_packing: true\n" << 2 << "" << 0 << QString();
  QTest::newRow("dpo on pairs") << "!full\nmodel_name_or_path: models/qwen2.5-7b-shape\n"
                                   "stage: dpo\ndataset: dpo_pairs\ndataset_dir: data\n"
                                   "template: qwen\noutput_dir: x\npref_loss: ipo\n"
                                << 0 << "" << 0 << QString();
  QTest::newRow("eval with val_size") << "val_size: 0.1\neval_strategy: steps\neval_steps: 50\n"
                                      << 0 << "" << 0 << QString();
  QTest::newRow("val_size without eval warns") << "val_size: 0.1\n"
                                               << 0 << "val_size" << 5 << QString();
  QTest::newRow("cosine with min lr") << "lr_scheduler_type: cosine_with_min_lr\n"
                                         "lr_scheduler_kwargs:\n  min_lr_rate: 0.1\n"
                                      << 0 << "" << 0 << QString();
  // DeepSpeed's tuning fields: one warning listing them; "adamw" in lower case is AdamW.
  QTest::newRow("deepspeed tuning fields warn once")
      << "deepspeed: deepspeed/mismatch.json\nper_device_train_batch_size: 4\n" << 0
      << "deepspeed" << 5 << QString();
  QTest::newRow("zero_stage without a json") << "zero_stage: 3\noffload_optimizer: true\n"
                                                "offload_param: true\n"
                                             << 8 << "" << 0 << QString();
  // finetuning_type lora and freeze (docs/ADAPTERS.md); one type's keys given to another warn.
  QTest::newRow("lora") << "finetuning_type: lora\n" << 0 << "" << 0 << QString();
  QTest::newRow("lora with every key")
      << "finetuning_type: lora\nlora_rank: 16\nlora_alpha: 32\nlora_dropout: 0.05\n"
         "lora_target: q_proj,v_proj\nadditional_target: norm\nuse_rslora: true\nuse_dora: true\n"
      << 0 << "" << 0 << QString();
  QTest::newRow("freeze") << "finetuning_type: freeze\nfreeze_trainable_layers: -2\n"
                             "freeze_trainable_modules: self_attn,mlp\n"
                             "freeze_extra_modules: embed_tokens,norm\n"
                          << 0 << "" << 0 << QString();
  QTest::newRow("lora keys with full") << "lora_rank: 16\n" << 0 << "lora_rank" << 5
                                       << "only used with finetuning_type: lora (this run is full)";
  QTest::newRow("lora keys with freeze")
      << "finetuning_type: freeze\nlora_target: q_proj\n" << 0 << "lora_target" << 6
      << "only used with finetuning_type: lora (this run is freeze)";
  QTest::newRow("freeze keys with lora")
      << "finetuning_type: lora\nfreeze_trainable_layers: 4\n" << 0 << "freeze_trainable_layers"
      << 6 << "only used with finetuning_type: freeze (this run is lora)";
  QTest::newRow("create_new_adapter without adapters")
      << "finetuning_type: lora\ncreate_new_adapter: true\n" << 0 << "create_new_adapter" << 6
      << "no adapter_name_or_path to merge";
  QTest::newRow("dataset as yaml list") << "eval_dataset: [long_docs, chat_demo]\n"
                                           "dataset_dir: data\n"
                                        << 0 << "" << 0 << QString();
}

void TestRunConfig::validConfigs() {
  QFETCH(QString, extra);
  QFETCH(int, nproc);
  QFETCH(QString, warningKey);
  QFETCH(int, warningLine);
  QFETCH(QString, warningText);
  const QString yaml = extra.startsWith("!full\n") ? extra.mid(6) : kBase + extra;
  const auto diags = check(yaml, options(nproc));
  QVERIFY2(!has_errors(diags), qPrintable(dump(diags)));
  if (!warningKey.isEmpty()) {
    const Diagnostic* w = find(diags, Severity::Warning, warningKey);
    QVERIFY2(w, qPrintable("expected a warning for " + warningKey + " in:\n" + dump(diags)));
    QCOMPARE(w->line, warningLine);
    QVERIFY2(QString::fromStdString(w->message).contains(warningText), qPrintable(dump(diags)));
  }
}

void TestRunConfig::realisticFileIsValidWithEightProcesses() {
  const QString dir = QStringLiteral(STUDIO_TEST_FIXTURES_DIR "/configs");
  ValidateOptions opt = options(8);
  opt.base_dir = dir.toStdString();
  const CheckResult res = check_config_file((dir + "/qwen2.5-7b-sft-sp8.yaml").toStdString(), opt);
  QVERIFY2(res.ok(), qPrintable(dump(res.diagnostics)));
  QVERIFY(res.model.has_value());
  QCOMPARE(QString::fromStdString(res.model->architecture), QStringLiteral("Qwen2ForCausalLM"));
  QCOMPARE(res.config.sequence_parallel_size, int64_t{8});
  QCOMPARE(res.config.cutoff_len, int64_t{131072});
  QCOMPARE(res.config.learning_rate, 5.0e-6);
  QCOMPARE(res.config.ddp_timeout, int64_t{180000000});
  QVERIFY(res.config.bf16);
  QCOMPARE(res.config.flash_attn, FlashAttn::Fa2);
  QCOMPARE(res.config.lr_scheduler_type, LrScheduler::Cosine);
  // Qwen2.5-7B has 7.62B parameters; the count comes from config.json alone.
  QCOMPARE(res.model->parameter_count(), int64_t{7615616512});
  std::string error;
  auto ds = read_deepspeed_json(dir.toStdString() + "/../deepspeed/ds_z3_offload_config.json",
                                error);
  QVERIFY2(ds.has_value(), error.c_str());
  QCOMPARE(ds->zero_stage, 3);
  QVERIFY(ds->offload_optimizer && ds->offload_param);

  opt.nproc_per_node = 4;  // the same file with 4 processes: 8 does not divide 4
  const CheckResult bad = check_config_file((dir + "/qwen2.5-7b-sft-sp8.yaml").toStdString(), opt);
  QVERIFY(!bad.ok());
  const Diagnostic* d = find(bad.diagnostics, Severity::Error, "sequence_parallel_size");
  QVERIFY(d);
  QCOMPARE(d->line, 37);
}

// LLaMA-Factory's own example files of the pt, rm and kto stages and the reference-free DPO losses,
// made full-parameter (tests/fixtures/configs/lf_examples says what was changed): valid on 8
// processes, read as LF reads them.
void TestRunConfig::llamaFactoryStageExamples_data() {
  QTest::addColumn<QString>("file");
  QTest::addColumn<QString>("stage");
  QTest::addColumn<QString>("loss");
  QTest::addColumn<bool>("packs");  // stage pt's packing default
  QTest::addColumn<bool>("reference");
  QTest::newRow("qwen3 pretrain") << "qwen3_full_pretrain.yaml"
                                  << "pt"
                                  << "sigmoid" << true << false;
  QTest::newRow("qwen3 dpo, orpo") << "qwen3_full_orpo.yaml" << "dpo" << "orpo" << false << false;
  QTest::newRow("qwen3 dpo, simpo") << "qwen3_full_simpo.yaml"
                                    << "dpo"
                                    << "simpo" << false << false;
  QTest::newRow("qwen3 reward model") << "qwen3_full_reward.yaml" << "rm" << "sigmoid" << false
                                      << false;
  QTest::newRow("qwen3 kto") << "qwen3_full_kto.yaml" << "kto" << "sigmoid" << false << true;
}

void TestRunConfig::llamaFactoryStageExamples() {
  QFETCH(QString, file);
  QFETCH(QString, stage);
  QFETCH(QString, loss);
  QFETCH(bool, packs);
  QFETCH(bool, reference);
  const QString dir = QStringLiteral(STUDIO_TEST_FIXTURES_DIR "/configs/lf_examples");
  ValidateOptions opt = options(8);
  opt.base_dir = dir.toStdString();
  const CheckResult res = check_config_file((dir + "/" + file).toStdString(), opt);
  QVERIFY2(res.ok(), qPrintable(dump(res.diagnostics)));
  QCOMPARE(QString::fromUtf8(to_string(res.config.stage).data()), stage);
  QCOMPARE(QString::fromUtf8(to_string(res.config.pref_loss).data()), loss);
  QCOMPARE(res.config.pt_packs(), packs);
  QCOMPARE(res.config.uses_reference(), reference);
  // Neither pt, rm nor the reference-free losses hold a reference model in the estimate; kto
  // does.
  QVERIFY(res.model.has_value());
  EstimateOptions eo;
  eo.nproc_per_node = 8;
  const MemoryEstimate est = estimate_memory(res.config, *res.model, eo);
  QCOMPARE(est.bytes.reference > 0, reference);
  QVERIFY(est.bytes.weights > 0);
}

// LLaMA-Factory 0.9.5's adapter examples, verbatim (tests/fixtures/configs/lf_examples): their
// hub model and LF's demo datasets do not exist here, so they are checked with overrides (as
// `studio-train train --set` applies them) pointing the model and datasets at fixtures. What
// studio-train trains is valid; what it does not is refused at the file's line of the key, with
// the reason.
void TestRunConfig::llamaFactoryAdapterExamples_data() {
  QTest::addColumn<QString>("file");
  QTest::addColumn<QStringList>("overrides");
  QTest::addColumn<QString>("key");       // the one key with errors, or empty: valid
  QTest::addColumn<int>("line");
  QTest::addColumn<QString>("fragment");  // in each of its errors
  const QString fixtures = QStringLiteral(STUDIO_TEST_FIXTURES_DIR);
  const QString qwen = "model_name_or_path=" + fixtures + "/models/qwen2.5-7b-shape";
  const QString llama = "model_name_or_path=" + fixtures + "/models/tiny-llama";
  // LF's identity,alpaca_en_demo; dpo_en_demo; kto_en_demo.
  const QStringList sft = {"dataset=alpaca_demo", "dataset_dir=" + fixtures + "/datasets"};
  const QStringList pairs = {"dataset=dpo_alpaca", "dataset_dir=" + fixtures + "/datasets"};
  const QStringList kto = {"dataset=kto_alpaca", "dataset_dir=" + fixtures + "/datasets_kto"};

  QTest::newRow("qwen3 lora sft") << "qwen3_lora_sft.yaml" << QStringList{qwen} + sft << ""
                                  << 0 << "";
  QTest::newRow("qwen3 lora dpo") << "qwen3_lora_dpo.yaml" << QStringList{qwen} + pairs << ""
                                  << 0 << "";
  QTest::newRow("qwen3 lora kto") << "qwen3_lora_kto.yaml" << QStringList{qwen} + kto << ""
                                  << 0 << "";
  QTest::newRow("qwen3 lora reward: stage rm with lora")
      << "qwen3_lora_reward.yaml" << QStringList{qwen} + pairs << "finetuning_type" << 8
      << "stage rm with lora is not implemented";
  // QLoRA (bitsandbytes 4-bit on the fly): valid, quantization_bit 4.
  QTest::newRow("qwen3 lora sft, on-the-fly quantization: QLoRA")
      << "qwen3_lora_sft_otfq.yaml" << QStringList{qwen} + sft << "" << 0 << "";
  QTest::newRow("qwen3 lora sft, bitsandbytes on NPU: QLoRA, no double quantization")
      << "qwen3_lora_sft_bnb_npu.yaml" << QStringList{qwen} + sft << "" << 0 << "";
  QTest::newRow("llama3 fsdp qlora: QLoRA")
      << "fsdp_qlora_llama3_lora_sft.yaml" << QStringList{llama} + sft << "" << 0 << "";
  QTest::newRow("llama3 freeze sft: LLaMA-Pro")
      << "llama3_freeze_sft.yaml" << QStringList{llama} + sft << "use_llama_pro" << 11
      << "LLaMA-Pro (training expanded blocks) is not implemented";
  QTest::newRow("llama3 lora+: loraplus_lr_ratio")
      << "loraplus_llama3_lora_sft.yaml" << QStringList{llama} + sft << "loraplus_lr_ratio" << 11
      << "LoRA+ (a learning rate of its own for lora_B) is not implemented";
  QTest::newRow("llama3 pissa: pissa_init")
      << "pissa_llama3_lora_sft.yaml" << QStringList{llama} + sft << "pissa_init" << 11
      << "PiSSA initialisation is not implemented";
}

void TestRunConfig::llamaFactoryAdapterExamples() {
  QFETCH(QString, file);
  QFETCH(QStringList, overrides);
  QFETCH(QString, key);
  QFETCH(int, line);
  QFETCH(QString, fragment);
  const QString dir = QStringLiteral(STUDIO_TEST_FIXTURES_DIR "/configs/lf_examples");
  ValidateOptions opt = options(8);
  opt.base_dir = dir.toStdString();
  std::vector<std::string> sets;
  for (const QString& s : overrides) sets.push_back(s.toStdString());
  const CheckResult res = check_config_file((dir + "/" + file).toStdString(), opt, sets);
  if (!key.isEmpty()) {
    QVERIFY2(!res.ok(), qPrintable(dump(res.diagnostics)));
    for (const auto& d : res.diagnostics) {
      if (d.severity != Severity::Error) continue;
      QVERIFY2(QString::fromStdString(d.key) == key && d.line == line &&
                   QString::fromStdString(d.message).contains(fragment),
               qPrintable(dump(res.diagnostics)));
    }
    return;
  }
  QVERIFY2(res.ok(), qPrintable(dump(res.diagnostics)));
  QCOMPARE(res.config.finetuning_type, FinetuningType::Lora);
  QCOMPARE(res.config.lora_rank, int64_t{8});
  const bool qlora = file.contains("otfq") || file.contains("bnb") || file.contains("qlora");
  QCOMPARE(res.config.quantized(), qlora);
  if (qlora) {
    QCOMPARE(*res.config.quantization_bit, int64_t{4});
    QCOMPARE(res.config.double_quantization, !file.contains("bnb_npu"));
  }
  QCOMPARE(res.config.lora_target, std::vector<std::string>{"all"});
  QVERIFY(res.model.has_value());
  std::string error;
  const auto modules = lora_target_modules(res.config, *res.model, error);
  QCOMPARE(QString::fromStdString(error), QString());
  QCOMPARE(modules, (std::vector<std::string>{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                               "up_proj", "down_proj"}));
}

// A model folder quantized on disk (config.json's quantization_config, as transformers writes
// it): bitsandbytes 4-bit trains with LoRA under LLaMA-Factory's rules; the others are refused.
void TestRunConfig::quantizedOnDiskBase_data() {
  QTest::addColumn<QString>("quantization");  // config.json's quantization_config
  QTest::addColumn<QString>("extra");         // YAML lines 5...
  QTest::addColumn<QString>("severity");      // error | warning | ok
  QTest::addColumn<QString>("key");
  QTest::addColumn<int>("line");
  QTest::addColumn<QString>("fragment");
  const QString nf4 = R"({"quant_method": "bitsandbytes", "load_in_4bit": true, "load_in_8bit": false,
      "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": true,
      "bnb_4bit_quant_storage": "uint8", "llm_int8_skip_modules": null})";
  const QString lora = "finetuning_type: lora\n";
  QTest::newRow("bnb nf4 with lora trains") << nf4 << lora << "ok" << "" << 0 << "";
  QTest::newRow("quantization_bit ignored, said so")
      << nf4 << lora + "quantization_bit: 4\nquantization_type: fp4\n" << "warning"
      << "quantization_type" << 7 << "already quantized on disk (bitsandbytes, nf4 with double";
  QTest::newRow("full fine-tuning refused")
      << nf4 << "" << "error" << "finetuning_type" << 0
      << "a quantized model trains only with finetuning_type: lora";
  QTest::newRow("zero-3 refused") << nf4 << lora + "zero_stage: 3\n" << "error"
                                  << "model_name_or_path" << 1
                                  << "a base quantized on disk under ZeRO-3 is not implemented";
  QTest::newRow("bnb 8-bit refused")
      << R"({"quant_method": "bitsandbytes", "load_in_8bit": true})" << lora << "error"
      << "model_name_or_path" << 1 << "quantized on disk (bitsandbytes, 8-bit), which studio-train "
                                      "does not read";
  QTest::newRow("gptq refused") << R"({"quant_method": "gptq", "bits": 4, "group_size": 128})"
                                << lora << "error" << "model_name_or_path" << 1
                                << "quantized on disk (gptq, 4-bit)";
  QTest::newRow("malformed quantization_config")
      << R"({"quant_method": "bitsandbytes", "load_in_4bit": "yes"})" << lora << "error"
      << "model_name_or_path" << 1 << "quantization_config: 'load_in_4bit' has the wrong type";
}

void TestRunConfig::quantizedOnDiskBase() {
  QFETCH(QString, quantization);
  QFETCH(QString, extra);
  QFETCH(QString, severity);
  QFETCH(QString, key);
  QFETCH(int, line);
  QFETCH(QString, fragment);
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  QJsonObject cfg =
      QJsonDocument::fromJson(readAll(STUDIO_TEST_FIXTURES_DIR "/models/tiny-llama/config.json").toUtf8())
          .object();
  cfg["quantization_config"] = QJsonDocument::fromJson(quantization.toUtf8()).object();
  {
    QFile f(dir.filePath("config.json"));
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QJsonDocument(cfg).toJson());
  }
  const QString yaml = "model_name_or_path: " + dir.path() + "\ndataset: long_docs\ntemplate: qwen\n"
                       "output_dir: out/run-that-does-not-exist\n" + extra;
  const auto diags = check(yaml, options(0));
  if (severity == "ok") {
    QVERIFY2(!has_errors(diags), qPrintable(dump(diags)));
    // The estimate holds the linear weights in 4 bits.
    LoadResult loaded = load_config_string(yaml.toStdString(), "case.yaml");
    std::string error;
    const auto info = read_model_info(dir.path().toStdString(), error);
    QVERIFY(info && info->bnb_4bit_on_disk());
    QVERIFY(quantized_base(loaded.config, *info).params > 0);
    return;
  }
  const Severity want = severity == "error" ? Severity::Error : Severity::Warning;
  bool matched = false;
  for (const auto& d : diags)
    if (d.severity == want && QString::fromStdString(d.key) == key &&
        QString::fromStdString(d.message).contains(fragment) && (line == 0 || d.line == line))
      matched = true;
  QVERIFY2(matched, qPrintable(QString("no %1 at %2:%3 containing '%4' in:\n%5")
                                   .arg(severity, key).arg(line).arg(fragment, dump(diags))));
}

// LF's merge example is an export file (`llamafactory-cli export`, `studio-train export`), not a
// training file: it has no dataset or output_dir and loads an adapter into
// a full-parameter run, and validate says so.
void TestRunConfig::llamaFactoryExportExampleIsNoTrainingFile() {
  const QString dir = QStringLiteral(STUDIO_TEST_FIXTURES_DIR "/configs/lf_examples");
  ValidateOptions opt = options(8);
  opt.base_dir = dir.toStdString();
  const CheckResult res =
      check_config_file((dir + "/merge_lora_qwen3_lora_sft.yaml").toStdString(), opt);
  QVERIFY2(!res.ok(), qPrintable(dump(res.diagnostics)));
  for (const char* key : {"dataset", "output_dir"}) {
    const Diagnostic* d = find(res.diagnostics, Severity::Error, key);
    QVERIFY2(d && QString::fromStdString(d->message).contains("required"),
             qPrintable(dump(res.diagnostics)));
  }
  const Diagnostic* adapter = find(res.diagnostics, Severity::Error, "adapter_name_or_path");
  QVERIFY2(adapter && adapter->line == 5 &&
               QString::fromStdString(adapter->message)
                   .contains("adapters load only with finetuning_type: lora"),
           qPrintable(dump(res.diagnostics)));
}

void TestRunConfig::yamlNumbersInEveryForm_data() {
  QTest::addColumn<QString>("text");
  QTest::addColumn<double>("value");
  QTest::newRow("1e-5 (a string to PyYAML)") << "1e-5" << 1e-5;
  QTest::newRow("1.0e-5") << "1.0e-5" << 1e-5;
  QTest::newRow("5.0e-06") << "5.0e-06" << 5e-6;
  QTest::newRow("plain") << "0.0001" << 1e-4;
  QTest::newRow("leading dot") << ".5" << 0.5;
  QTest::newRow("quoted") << "\"2e-5\"" << 2e-5;
  QTest::newRow("integer") << "1" << 1.0;
  QTest::newRow("capital E") << "3E-4" << 3e-4;
}

void TestRunConfig::yamlNumbersInEveryForm() {
  QFETCH(QString, text);
  QFETCH(double, value);
  LoadResult res = load_config_string((kBase + "learning_rate: " + text + "\n").toStdString());
  QVERIFY2(res.ok(), qPrintable(dump(res.diagnostics)));
  QCOMPARE(res.config.learning_rate, value);
}

// YAML 1.1 merge keys, as PyYAML (LLaMA-Factory's loader) resolves them: keys of the mapping
// itself win, then the mappings of a `<<` list in their order; merges inside merged mappings
// and inside values resolve too.
void TestRunConfig::mergeKeysResolveAsPyYaml_data() {
  QTest::addColumn<QString>("yaml");
  QTest::addColumn<QString>("key");
  QTest::addColumn<QString>("value");  // as the key table writes it
  const QString anchors = QStringLiteral(
      "defaults: &defaults\n  template: qwen\n  cutoff_len: 512\n  seed: 7\n"
      "small: &small {cutoff_len: 64, logging_steps: 3}\n");
  const QString rest = QStringLiteral(
      "model_name_or_path: models/qwen2.5-7b-shape\ndataset: long_docs\noutput_dir: out/x\n");
  QTest::newRow("merged key") << anchors + rest + "<<: *defaults\n" << "template" << "qwen";
  QTest::newRow("own key wins") << anchors + rest + "<<: *defaults\ncutoff_len: 1024\n"
                                << "cutoff_len" << "1024";
  QTest::newRow("own key wins, written before the merge")
      << anchors + rest + "cutoff_len: 1024\n<<: *defaults\n" << "cutoff_len" << "1024";
  QTest::newRow("earlier mapping of a list wins")
      << anchors + rest + "<<: [*small, *defaults]\n" << "cutoff_len" << "64";
  QTest::newRow("later mapping of a list fills in")
      << anchors + rest + "<<: [*small, *defaults]\n" << "seed" << "7";
  QTest::newRow("merge inside a merged mapping")
      << anchors + "both: &both {<<: *small, seed: 9}\n" + rest + "template: qwen\n<<: *both\n"
      << "logging_steps" << "3";
  QTest::newRow("merge inside a value")
      << rest + "template: qwen\nlr_scheduler_type: cosine_with_min_lr\n"
                "base: &b {min_lr_rate: 0.1}\nlr_scheduler_kwargs: {<<: *b}\n"
      << "lr_scheduler_kwargs" << "{min_lr_rate: 0.1}";
  QTest::newRow("a mapping merging itself is itself")
      << rest + "template: qwen\nlr_scheduler_type: cosine_with_min_lr\n"
                "lr_scheduler_kwargs: &k\n  min_lr_rate: 0.1\n  <<: *k\n"
      << "lr_scheduler_kwargs" << "{min_lr_rate: 0.1}";
}

void TestRunConfig::mergeKeysResolveAsPyYaml() {
  QFETCH(QString, yaml);
  QFETCH(QString, key);
  QFETCH(QString, value);
  const LoadResult res = load_config_string(yaml.toStdString(), "merge.yaml");
  QVERIFY2(res.ok(), qPrintable(dump(res.diagnostics)));
  for (const auto& d : res.diagnostics)
    QVERIFY2(d.key != "<<" && d.key != key.toStdString(), qPrintable(dump(res.diagnostics)));
  QCOMPARE(QString::fromStdString(yaml_text(find_field(key.toStdString())->to_node(res.config))),
           value);
  // What is saved loads again to the same value, with no merge key left in it.
  const LoadResult again = load_config_string(to_yaml(res.config), "saved.yaml");
  QVERIFY2(again.ok(), qPrintable(dump(again.diagnostics)));
  QCOMPARE(QString::fromStdString(yaml_text(find_field(key.toStdString())->to_node(again.config))),
           value);
}

// SP pads each batch to a multiple of its split (docs/SEQUENCE_PARALLEL.md, "The data path"), so
// the cutoff the user chose is the one trained, with or without SP (360-LLaMA-Factory rounds it
// up instead).
void TestRunConfig::normalizedKeepsCutoffUnderSequenceParallelism() {
  LoadResult a = load_config_string(kBase.toStdString() +
                                    "cutoff_len: 1000\nsequence_parallel_size: 8\n");
  QVERIFY(a.ok());
  QCOMPARE(normalized(a.config).cutoff_len, int64_t{1000});
}

void TestRunConfig::missingPathIsWarningInValidateErrorInTraining() {
  const QString yaml = "model_name_or_path: /nowhere/model\ndataset: long_docs\n"
                       "template: qwen\noutput_dir: out/x\n";
  auto validate_only = check(yaml, options(0, false));
  QVERIFY2(!has_errors(validate_only), qPrintable(dump(validate_only)));
  QVERIFY(find(validate_only, Severity::Warning, "model_name_or_path"));
  auto training = check(yaml, options(0, true));
  const Diagnostic* d = find(training, Severity::Error, "model_name_or_path");
  QVERIFY2(d, qPrintable(dump(training)));
  QCOMPARE(d->line, 1);
  auto hub = check("model_name_or_path: Qwen/Qwen2.5-7B\ndataset: long_docs\ntemplate: qwen\n"
                   "output_dir: out/x\n",
                   options(0, true));
  QVERIFY2(dump(hub).contains("not in the local Hugging Face cache"), qPrintable(dump(hub)));
}

void TestRunConfig::formatMatchesFileLineColumnKey() {
  auto diags = check(kBase + "sequence_parallel_mode: ring\n", options(0));
  const Diagnostic* d = find(diags, Severity::Error, "sequence_parallel_mode");
  QVERIFY(d);
  QCOMPARE(QString::fromStdString(d->format()),
           QStringLiteral("case.yaml:5:25: sequence_parallel_mode: 'ring' is not a valid value "
                          "(allowed: zigzag-ring | ulysses | usp)"));
}

void TestRunConfig::everyTableKeyHasHelpAndParses() {
  std::set<std::string> seen;
  for (const auto& f : config_fields()) {
    QVERIFY2(!f.help.empty(), std::string(f.key).c_str());
    QVERIFY2(seen.insert(std::string(f.key)).second, std::string(f.key).c_str());
    // Emitting the default and parsing it back leaves the default in place.
    RunConfig cfg;
    const YAML::Node v = f.to_node(cfg);
    if (!v.IsNull() || !f.required) QCOMPARE(QString::fromStdString(f.parse(v, cfg)), QString());
    QVERIFY2(f.is_default(cfg), std::string(f.key).c_str());
  }
  QVERIFY(seen.size() >= 60);
}

void TestRunConfig::overridesFromCommandLine() {
  LoadResult a = load_config_string(kBase.toStdString());
  auto diags = apply_overrides(a.config, {"learning_rate=1e-4", "sequence_parallel_size=2",
                                          "dataset=a,b"});
  QVERIFY2(diags.empty(), qPrintable(dump(diags)));
  QCOMPARE(a.config.learning_rate, 1e-4);
  QCOMPARE(a.config.sequence_parallel_size, int64_t{2});
  QCOMPARE(a.config.dataset, (std::vector<std::string>{"a", "b"}));
  QVERIFY(QString::fromStdString(to_yaml(a.config)).contains("sequence_parallel_size: 2\n"));
  diags = apply_overrides(a.config, {"learnin_rate=1", "bf16=maybe", "noequals"});
  QCOMPARE(diags.size(), size_t{3});
  QCOMPARE(QString::fromStdString(diags[0].format()),
           QStringLiteral("--set learnin_rate=1: learnin_rate: unknown key; did you mean "
                          "'learning_rate'?"));
  QVERIFY(QString::fromStdString(diags[1].format()).contains("expected true or false"));
  QVERIFY(QString::fromStdString(diags[2].format()).contains("expected key=value"));
}

// An MoE model: validate says whether the auxiliary loss is on and with which coefficient, and
// that tiled_mlp leaves the expert layers untiled.
void TestRunConfig::mixtureOfExpertsNotes() {
  const QString base = QStringLiteral(
      "model_name_or_path: models/qwen3-30b-a3b-shape\ndataset: long_docs\ntemplate: qwen3\n"
      "output_dir: out/x\n");
  auto off = check(base, options(8));
  QVERIFY2(!has_errors(off), qPrintable(dump(off)));
  const Diagnostic* n = find(off, Severity::Note, "model_name_or_path");
  QVERIFY2(n && QString::fromStdString(n->message).contains("auxiliary load-balancing loss is off"),
           qPrintable(dump(off)));
  auto on = check(base + "moe_aux_loss_coef: 0.01\ntiled_mlp: true\n", options(8));
  QVERIFY2(!has_errors(on), qPrintable(dump(on)));
  QVERIFY2(!find(on, Severity::Note, "model_name_or_path"), qPrintable(dump(on)));
  const Diagnostic* t = find(on, Severity::Note, "tiled_mlp");
  QVERIFY2(t && QString::fromStdString(t->message).contains("48 MoE layers"), qPrintable(dump(on)));
  QCOMPARE(t->line, 6);
  // DPO: LLaMA-Factory's DPO trainer adds no auxiliary loss, and neither does studio-train.
  auto dpo = check(QString(base).replace("dataset: long_docs", "dataset: dpo_pairs") +
                       "stage: dpo\nmoe_aux_loss_coef: 0.01\n",
                   options(8));
  const Diagnostic* w = find(dpo, Severity::Warning, "moe_aux_loss_coef");
  QVERIFY2(w && QString::fromStdString(w->message).contains("no effect for stage dpo"),
           qPrintable(dump(dpo)));
}

// fp16 and pure_bf16: a warning in validate (LLaMA-Factory, which the studio can launch, runs
// them), an error when studio-train is to train the config.
void TestRunConfig::unimplementedPrecisionIsRefusedForTraining() {
  for (const char* key : {"fp16", "pure_bf16"}) {
    const QString yaml = kBase + QString::fromLatin1(key) + ": true\n";
    QVERIFY2(find(check(yaml, options(0)), Severity::Warning, key), key);
    const auto diags = check(yaml, options(0, /*for_training=*/true));
    const Diagnostic* e = find(diags, Severity::Error, key);
    QVERIFY2(e && e->line == 5, qPrintable(dump(diags)));
  }
}

QTEST_MAIN(TestRunConfig)
#include "tst_run_config.moc"
