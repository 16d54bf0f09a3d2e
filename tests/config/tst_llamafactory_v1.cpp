// LLaMA-Factory v1 configs (config/llamafactory_v1*.cpp): the files of tests/fixtures/configs/v1,
// written as LLaMA-Factory's examples/v1 are, load unchanged; their keys land on the run config
// (peft_config's on the adapter keys, with v1's defaults); what is refused says so at the key's
// line; the world decides the accumulation; the model's chat template decides the template; the
// dataset YAML's rows are read; and a config saves back in v1 form, edits in v1's spelling.
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "studio/config/config_io.h"
#include "studio/config/config_schema.h"
#include "studio/config/llamafactory_v1.h"
#include "studio/config/validate.h"
#include "studio/data/dataset.h"
#include "studio/data/tokenizer.h"

using namespace studio;

namespace {

const QString kDir = QStringLiteral(STUDIO_TEST_FIXTURES_DIR "/configs/v1");
const QString kDemoModel = QStringLiteral(STUDIO_SOURCE_DIR "/resources/demo/model");

LoadResult loadFixture(const QString& name) {
  return load_config_file((kDir + "/" + name).toStdString());
}

ValidateOptions world(int nproc) {
  ValidateOptions opt;
  opt.nproc_per_node = nproc;
  opt.base_dir = kDir.toStdString();
  return opt;
}

std::vector<Diagnostic> loadAndValidate(const QString& name, int nproc) {
  LoadResult loaded = loadFixture(name);
  auto diags = loaded.diagnostics;
  auto more = validate_config(loaded.config, world(nproc));
  diags.insert(diags.end(), more.begin(), more.end());
  return diags;
}

QString valueOf(const RunConfig& c, const char* key) {
  return QString::fromStdString(yaml_text(find_field(key)->to_node(c)));
}

// The top-level keys of a YAML text, in order.
QStringList keysOf(const std::string& yaml) {
  QStringList keys;
  for (const auto& kv : YAML::Load(yaml)) keys << QString::fromStdString(kv.first.Scalar());
  return keys;
}

QString readAll(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
}

// A model folder with config.json's model_type and, unless empty, a tokenizer chat template.
QString modelWithTemplate(const QTemporaryDir& dir, const QString& modelType,
                          const QString& chatTemplate, bool asJinjaFile = false) {
  const QString path = dir.filePath(modelType + (asJinjaFile ? "-jinja" : ""));
  QDir().mkpath(path);
  QFile config(path + "/config.json");
  config.open(QIODevice::WriteOnly);
  config.write(
      readAll(kDemoModel + "/config.json").replace("\"qwen2\"", "\"" + modelType + "\"").toUtf8());
  config.close();
  if (chatTemplate.isEmpty()) return path;
  if (asJinjaFile) {
    QFile jinja(path + "/chat_template.jinja");
    jinja.open(QIODevice::WriteOnly);
    jinja.write(chatTemplate.toUtf8());
    return path;
  }
  nlohmann::json tc = {{"eos_token", "<|im_end|>"}, {"chat_template", chatTemplate.toStdString()}};
  QFile tokConfig(path + "/tokenizer_config.json");
  tokConfig.open(QIODevice::WriteOnly);
  tokConfig.write(QByteArray::fromStdString(tc.dump(2)));
  return path;
}

// Chat templates in the shapes the families' own carry (written for this test, not theirs):
// ChatML turns, plus what tells each family apart.
const QString kChatmlTurns = QStringLiteral(
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + "
    "'<|im_end|>\\n' }}{%- endfor %}");
const QString kThinkingSwitch = QStringLiteral(
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- if enable_thinking is "
    "defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}"
    "{%- endif %}");
const QString kAlwaysThinks = QStringLiteral(
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- endif %}");
const QString kPlainPrompt =
    QStringLiteral("{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}");
const QString kQwen25System = QStringLiteral(
    "{%- if messages[0].role != 'system' %}{{- '<|im_start|>system\\nYou are Qwen, created by "
    "Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}{%- endif %}");

}  // namespace

class TestLlamaFactoryV1 : public QObject {
  Q_OBJECT

 private slots:
  void detectsTheForm_data();
  void detectsTheForm();
  void mapsKeys_data();
  void mapsKeys();
  void peftConfigBlocks_data();
  void peftConfigBlocks();
  void peftConfigProblemsAreLocated_data();
  void peftConfigProblemsAreLocated();
  void adapterExamplesValidate_data();
  void adapterExamplesValidate();
  void peftConfigSavesBack();
  void validatesOnEightProcesses_data();
  void validatesOnEightProcesses();
  void worldSetsAccumulationAndPrecision();
  void exportKeepsTheFileForm_data();
  void exportKeepsTheFileForm();
  void editsAreWrittenInV1Spelling();
  void overridesTakeV1Names();
  void v0FilesStayV0();
  void templateFromTheModel_data();
  void templateFromTheModel();
  void datasetYamlRowsAreRead();
  void datasetYamlMergeKeys_data();
  void datasetYamlMergeKeys();
  void relocatedDatasetsLoadFromAnotherFolder();
};

void TestLlamaFactoryV1::detectsTheForm_data() {
  QTest::addColumn<QString>("yaml");
  QTest::addColumn<bool>("v1");
  QTest::newRow("v0") << "model_name_or_path: m\ndataset: d\ntemplate: qwen\noutput_dir: o\n"
                      << false;
  QTest::newRow("model") << "model: Qwen/Qwen3-0.6B\ntrain_dataset: d.yaml\noutput_dir: o\n"
                         << true;
  QTest::newRow("micro_batch_size only") << "micro_batch_size: 2\n" << true;
  QTest::newRow("a *_config block") << "kernel_config: {name: auto}\n" << true;
  QTest::newRow("cp_size") << "cp_size: 2\n" << true;
  QTest::newRow("both forms: v0 wins")
      << "model_name_or_path: m\nmodel: x\ndataset: d\ntemplate: qwen\noutput_dir: o\n"
      << false;
}

void TestLlamaFactoryV1::detectsTheForm() {
  QFETCH(QString, yaml);
  QFETCH(bool, v1);
  QCOMPARE(is_llamafactory_v1(YAML::Load(yaml.toStdString())), v1);
  QCOMPARE(load_config_string(yaml.toStdString()).config.is_v1(), v1);
}

void TestLlamaFactoryV1::mapsKeys_data() {
  QTest::addColumn<QString>("file");
  QTest::addColumn<QString>("key");  // of the key table
  QTest::addColumn<QString>("value");
  const QString fsdp2 = "train_full_fsdp2.yaml";
  QTest::newRow("model") << fsdp2 << "model_name_or_path"
                         << "../../../../resources/demo/model";
  QTest::newRow("micro_batch_size") << fsdp2 << "per_device_train_batch_size"
                                    << "2";
  QTest::newRow("fsdp2 is ZeRO-3") << fsdp2 << "zero_stage"
                                   << "3";
  QTest::newRow("bf16 by default under fsdp2") << fsdp2 << "bf16"
                                               << "true";
  QTest::newRow("learning_rate") << fsdp2 << "learning_rate"
                                 << "0.0001";
  QTest::newRow("constant rate") << fsdp2 << "lr_scheduler_type"
                                 << "constant";
  QTest::newRow("torch AdamW decay") << fsdp2 << "weight_decay"
                                     << "0.01";
  QTest::newRow("logging every step") << fsdp2 << "logging_steps"
                                      << "1";
  QTest::newRow("dist_timeout") << fsdp2 << "ddp_timeout"
                                << "18000";
  QTest::newRow("save at the end only") << fsdp2 << "save_steps" << QString::number(kSaveAtEndOnly);
  QTest::newRow("no resume by itself") << fsdp2 << "overwrite_output_dir"
                                       << "true";
  QTest::newRow("sdpa") << fsdp2 << "flash_attn"
                        << "sdpa";
  QTest::newRow("ulysses by default") << fsdp2 << "sequence_parallel_mode"
                                      << "ulysses";
  QTest::newRow("max_steps") << fsdp2 << "max_steps"
                             << "10";
  QTest::newRow("stage sft") << fsdp2 << "stage"
                             << "sft";
  QTest::newRow("template left to the model") << fsdp2 << "template"
                                              << "\"\"";
  const QString ds = "train_full_deepspeed.yaml";
  QTest::newRow("deepspeed config_file") << ds << "deepspeed"
                                         << "../../deepspeed/ds_z3_offload_config.json";
  QTest::newRow("deepspeed: no zero_stage of its own") << ds << "zero_stage"
                                                       << "~";
  const QString cp = "train_full_ulysses_cp.yaml";
  QTest::newRow("cp_size") << cp << "sequence_parallel_size"
                           << "2";
  QTest::newRow("flash_attention_2") << cp << "flash_attn"
                                     << "fa2";
  QTest::newRow("bf16: false") << cp << "bf16"
                               << "false";
  QTest::newRow("trust_remote_code") << cp << "trust_remote_code"
                                     << "true";
  const QString pf = "train_full_padding_free.yaml";
  QTest::newRow("reshard_after_forward false is ZeRO-2") << pf << "zero_stage"
                                                         << "2";
  QTest::newRow("num_train_epochs") << pf << "num_train_epochs"
                                    << "2.0";
  QTest::newRow("save_steps") << pf << "save_steps"
                              << "50";
  QTest::newRow("padding_free") << pf << "batching_strategy" << "padding_free";
  QTest::newRow("dynamic_batching") << "train_full_dynamic_batching.yaml" << "batching_strategy"
                                    << "dynamic_batching";
  QTest::newRow("normal by default") << fsdp2 << "batching_strategy" << "normal";
  const QString dpo = "train_full_dpo.yaml";
  QTest::newRow("offload_params") << dpo << "offload_param"
                                  << "true";
  QTest::newRow("offload_params at ZeRO-3") << dpo << "zero_stage"
                                            << "3";
  QTest::newRow("DPO key: stage dpo") << dpo << "stage"
                                      << "dpo";
  QTest::newRow("dpo_label_smoothing") << dpo << "dpo_label_smoothing"
                                       << "0.1";
  const QString simpo = "train_full_simpo.yaml";
  QTest::newRow("pref_loss simpo") << simpo << "pref_loss" << "simpo";
  QTest::newRow("simpo_gamma") << simpo << "simpo_gamma" << "0.8";
  QTest::newRow("simpo: stage dpo") << simpo << "stage" << "dpo";
  // peft_config onto the adapter keys: the fixtures, and LLaMA-Factory's examples/v1 as shipped.
  const QString lora = "train_lora_sft.yaml";
  QTest::newRow("lora") << lora << "finetuning_type" << "lora";
  QTest::newRow("lora: r") << lora << "lora_rank" << "16";
  QTest::newRow("lora: lora_alpha") << lora << "lora_alpha" << "32.0";
  QTest::newRow("lora: lora_dropout") << lora << "lora_dropout" << "0.05";
  QTest::newRow("lora: target_modules all") << lora << "lora_target" << "all";
  QTest::newRow("lora: no modules_to_save") << lora << "additional_target" << "~";
  QTest::newRow("lora: no adapter") << lora << "adapter_name_or_path" << "~";
  QTest::newRow("lora: no rslora") << lora << "use_rslora" << "false";
  const QString freeze = "train_freeze_sft.yaml";
  QTest::newRow("freeze") << freeze << "finetuning_type" << "freeze";
  QTest::newRow("freeze: layers") << freeze << "freeze_trainable_layers" << "2";
  QTest::newRow("freeze: modules") << freeze << "freeze_trainable_modules" << "all";
  QTest::newRow("freeze: no extra modules") << freeze << "freeze_extra_modules" << "~";
  const QString lf = "../lf_examples/";
  QTest::newRow("examples/v1 lora sft") << lf + lora << "finetuning_type" << "lora";
  QTest::newRow("examples/v1 lora sft: r") << lf + lora << "lora_rank" << "16";
  QTest::newRow("examples/v1 lora sft: alpha") << lf + lora << "lora_alpha" << "32.0";
  QTest::newRow("examples/v1 lora sft: dropout") << lf + lora << "lora_dropout" << "0.05";
  QTest::newRow("examples/v1 lora sft: template") << lf + lora << "template" << "qwen3_nothink";
  const QString rank0 = lf + "train_lora_sft_rank0.yaml";
  QTest::newRow("examples/v1 lora rank0") << rank0 << "finetuning_type" << "lora";
  QTest::newRow("examples/v1 lora rank0: r") << rank0 << "lora_rank" << "16";
  QTest::newRow("examples/v1 lora rank0: target") << rank0 << "lora_target" << "all";
  QTest::newRow("examples/v1 lora rank0: bf16") << rank0 << "bf16" << "true";
  QTest::newRow("examples/v1 freeze") << lf + freeze << "finetuning_type" << "freeze";
  QTest::newRow("examples/v1 freeze: layers") << lf + freeze << "freeze_trainable_layers" << "2";
  QTest::newRow("examples/v1 freeze: modules") << lf + freeze << "freeze_trainable_modules"
                                               << "all";
  QTest::newRow("examples/v1 freeze: extra null") << lf + freeze << "freeze_extra_modules" << "~";
  const QString lora_dpo = lf + "train_lora_dpo.yaml";
  QTest::newRow("examples/v1 lora dpo") << lora_dpo << "finetuning_type" << "lora";
  QTest::newRow("examples/v1 lora dpo: r") << lora_dpo << "lora_rank" << "16";
  QTest::newRow("examples/v1 lora dpo: dropout") << lora_dpo << "lora_dropout" << "0.05";
}

void TestLlamaFactoryV1::mapsKeys() {
  QFETCH(QString, file);
  QFETCH(QString, key);
  QFETCH(QString, value);
  const LoadResult r = loadFixture(file);
  QVERIFY2(r.ok(), format_all(r.diagnostics).c_str());
  QVERIFY(r.config.is_v1());
  QCOMPARE(valueOf(r.config, key.toLatin1().constData()), value);
}

// A peft_config block's options, and v1's defaults for those it leaves out: lora_alpha 16 and
// lora_dropout 0.05 (v0's keys default to 2 x lora_rank and 0).
void TestLlamaFactoryV1::peftConfigBlocks_data() {
  QTest::addColumn<QString>("block");  // the value of peft_config
  QTest::addColumn<QString>("key");    // of the key table
  QTest::addColumn<QString>("value");
  QTest::newRow("lora: rank 8") << "{name: lora}" << "lora_rank" << "8";
  QTest::newRow("lora: alpha 16") << "{name: lora}" << "lora_alpha" << "16.0";
  QTest::newRow("lora: alpha 16 whatever r") << "{name: lora, r: 64}" << "lora_alpha" << "16.0";
  QTest::newRow("lora: dropout 0.05") << "{name: lora}" << "lora_dropout" << "0.05";
  QTest::newRow("lora: all modules") << "{name: lora}" << "lora_target" << "all";
  QTest::newRow("lora: no rslora") << "{name: lora}" << "use_rslora" << "false";
  QTest::newRow("lora: dropout 0") << "{name: lora, lora_dropout: 0}" << "lora_dropout" << "0.0";
  QTest::newRow("one target module") << "{name: lora, target_modules: q_proj}" << "lora_target"
                                      << "q_proj";
  QTest::newRow("a list of target modules")
      << "{name: lora, target_modules: [q_proj, v_proj]}" << "lora_target" << "q_proj,v_proj";
  QTest::newRow("use_dora") << "{name: lora, use_dora: true}" << "use_dora" << "true";
  QTest::newRow("use_rslora") << "{name: lora, use_rslora: true}" << "use_rslora" << "true";
  QTest::newRow("modules_to_save") << "{name: lora, modules_to_save: [embed_tokens, norm]}"
                                   << "additional_target" << "embed_tokens,norm";
  QTest::newRow("modules_to_save null") << "{name: lora, modules_to_save: null}"
                                        << "additional_target" << "~";
  QTest::newRow("one adapter, trained further") << "{name: lora, adapter_name_or_path: out/a}"
                                                << "adapter_name_or_path" << "out/a";
  QTest::newRow("export options: no effect") << "{name: lora, r: 4, export_dir: x}"
                                             << "lora_rank" << "4";
  QTest::newRow("freeze: 2 layers") << "{name: freeze}" << "freeze_trainable_layers" << "2";
  QTest::newRow("freeze: all modules") << "{name: freeze}" << "freeze_trainable_modules"
                                       << "all";
  QTest::newRow("freeze: first layers") << "{name: freeze, freeze_trainable_layers: -1}"
                                        << "freeze_trainable_layers" << "-1";
  QTest::newRow("freeze: modules split at commas")
      << "{name: freeze, freeze_trainable_modules: 'self_attn, mlp'}"
      << "freeze_trainable_modules" << "self_attn,mlp";
  QTest::newRow("freeze: extra modules") << "{name: freeze, freeze_extra_modules: [embed_tokens]}"
                                         << "freeze_extra_modules" << "embed_tokens";
  QTest::newRow("freeze: the lora defaults stay v0's") << "{name: freeze}" << "lora_alpha"
                                                      << "~";
  QTest::newRow("null: full") << "null" << "finetuning_type" << "full";
  QTest::newRow("JSON text, as get_plugin_config reads it")
      << "'{\"name\": \"lora\", \"r\": 4}'" << "lora_rank" << "4";
}

void TestLlamaFactoryV1::peftConfigBlocks() {
  QFETCH(QString, block);
  QFETCH(QString, key);
  QFETCH(QString, value);
  const LoadResult r = load_config_string(
      "model: m\ntrain_dataset: d.yaml\noutput_dir: o\npeft_config: " + block.toStdString() + "\n",
      "p.yaml");
  QVERIFY2(r.ok(), format_all(r.diagnostics).c_str());
  QCOMPARE(valueOf(r.config, key.toLatin1().constData()), value);
}

// Each problem of a block at its own line and column, named peft_config.OPTION; what validate
// finds in an option's value lands there too.
void TestLlamaFactoryV1::peftConfigProblemsAreLocated_data() {
  QTest::addColumn<QString>("block");     // lines after `peft_config:` (line 4)
  QTest::addColumn<QString>("fragment");  // in the formatted load and validate diagnostics
  QTest::newRow("r 0") << "  name: lora\n  r: 0\n"
                       << "p.yaml:6:6: peft_config.r: expected a rank of at least 1, got 0 "
                          "(allowed: >= 1)";
  QTest::newRow("r not a number") << "  name: lora\n  r: sixteen\n"
                                  << "p.yaml:6:6: peft_config.r: expected a whole number, got "
                                     "'sixteen'";
  QTest::newRow("dropout 1") << "  name: lora\n  lora_dropout: 1\n"
                             << "p.yaml:6:17: peft_config.lora_dropout: expected a probability "
                                "in [0, 1), got 1 (allowed: 0 <= p < 1)";
  QTest::newRow("alpha 0") << "  name: lora\n  lora_alpha: 0\n"
                           << "p.yaml:6:15: peft_config.lora_alpha: expected a positive number";
  QTest::newRow("use_dora not a bool") << "  name: lora\n  use_dora: sometimes\n"
                                       << "p.yaml:6:13: peft_config.use_dora: expected true or "
                                          "false";
  QTest::newRow("target_modules a mapping")
      << "  name: lora\n  target_modules: {q: 1}\n"
      << "p.yaml:6:19: peft_config.target_modules: expected a name or a list of names, got a "
         "mapping";
  QTest::newRow("v0's name inside the block")
      << "  name: lora\n  lora_rank: 16\n"
      << "p.yaml:6:3: peft_config.lora_rank: not an option of peft_config lora (did you mean "
         "'r'?)";
  QTest::newRow("a misspelt option") << "  name: lora\n  lora_dropuot: 0.1\n"
                                     << "p.yaml:6:3: peft_config.lora_dropuot: not an option of "
                                        "peft_config lora (did you mean 'lora_dropout'?)";
  QTest::newRow("two adapters")
      << "  name: lora\n  adapter_name_or_path: [a, b]\n"
      << "p.yaml:6:25: peft_config.adapter_name_or_path: LLaMA-Factory v1 trains a single "
         "adapter further";
  QTest::newRow("oft") << "  name: oft\n"
                       << "p.yaml:5:9: peft_config: 'oft' is not supported: OFT adapters are not "
                          "implemented in studio-train";
  QTest::newRow("full") << "  name: full\n"
                        << "p.yaml:5:9: peft_config: 'full' is not a PEFT plugin of "
                           "LLaMA-Factory v1: for full-parameter training leave peft_config out";
  QTest::newRow("no name") << "  r: 8\n"
                           << "p.yaml:5:3: peft_config: needs a `name`";
  // validate's checks, at the option.
  QTest::newRow("validate: a module the model lacks")
      << "  name: lora\n  target_modules: [q_proj, fc1]\n"
      << "p.yaml:6:19: peft_config.target_modules: 'fc1' is not a linear layer of "
         "Qwen2ForCausalLM's decoder layers";
  QTest::newRow("validate: freeze_trainable_layers 0")
      << "  name: freeze\n  freeze_trainable_layers: 0\n"
      << "p.yaml:6:28: peft_config.freeze_trainable_layers: must not be 0";
  QTest::newRow("validate: stage rm with lora, at the name")
      << "  name: lora\nstage: rm\n"
      << "p.yaml:5:9: peft_config: stage rm with lora is not implemented";
  // v0's keys in a v1 file: v1 says them in the block.
  QTest::newRow("lora_rank beside the block")
      << "  name: lora\nlora_rank: 4\n"
      << "p.yaml:6:1: lora_rank: a LLaMA-Factory v1 file says this with peft_config: {name: "
         "lora, r: ...}";
  QTest::newRow("finetuning_type in a v1 file")
      << "  name: lora\nfinetuning_type: lora\n"
      << "p.yaml:6:1: finetuning_type: a LLaMA-Factory v1 file says this with peft_config";
}

void TestLlamaFactoryV1::peftConfigProblemsAreLocated() {
  QFETCH(QString, block);
  QFETCH(QString, fragment);
  const std::string yaml = "model: " + kDemoModel.toStdString() +
                           "\ntrain_dataset: data/sft.yaml\noutput_dir: o\npeft_config:\n" +
                           block.toStdString();
  const LoadResult loaded = load_config_string(yaml, "p.yaml");
  auto diags = loaded.diagnostics;
  const auto more = validate_config(loaded.config, world(1));
  diags.insert(diags.end(), more.begin(), more.end());
  QVERIFY(has_errors(diags));
  const QString text = QString::fromStdString(format_all(diags));
  QVERIFY2(text.contains(fragment), qPrintable(text));
}

// LLaMA-Factory's examples/v1 adapter files with the demo model and this folder's datasets in
// place of Qwen/Qwen3-4B and data/v1_*_demo.yaml: valid, validate's notes at the block's options.
void TestLlamaFactoryV1::adapterExamplesValidate_data() {
  QTest::addColumn<QString>("file");
  QTest::addColumn<QString>("stage");
  QTest::addColumn<QString>("fragment");  // in the formatted diagnostics, or "valid"
  QTest::newRow("lora sft") << "train_lora_sft.yaml" << "sft" << "valid";
  QTest::newRow("lora sft, init on rank 0") << "train_lora_sft_rank0.yaml" << "sft" << "valid";
  QTest::newRow("freeze sft") << "train_freeze_sft.yaml" << "sft" << "valid";
  QTest::newRow("lora dpo: dropout off, said at lora_dropout")
      << "train_lora_dpo.yaml" << "dpo"
      << ":9:17: peft_config.lora_dropout: note: stage dpo trains without dropout";
}

void TestLlamaFactoryV1::adapterExamplesValidate() {
  QFETCH(QString, file);
  QFETCH(QString, stage);
  QFETCH(QString, fragment);
  QString yaml = readAll(QStringLiteral(STUDIO_TEST_FIXTURES_DIR "/configs/lf_examples/") + file);
  QVERIFY(yaml.contains("model: Qwen/Qwen3-4B\n"));
  yaml.replace("model: Qwen/Qwen3-4B\n", "model: ../../../../resources/demo/model\n")
      .replace("data/v1_sft_demo.yaml", "data/sft.yaml")
      .replace("data/v1_dpo_demo.yaml", "data/dpo.yaml");
  LoadResult loaded = load_config_string(yaml.toStdString(), file.toStdString());
  auto diags = loaded.diagnostics;
  resolve_llamafactory_v1(loaded.config, world(4));
  const auto more = validate_config(loaded.config, world(4));
  diags.insert(diags.end(), more.begin(), more.end());
  const QString text = QString::fromStdString(format_all(diags));
  QVERIFY2(!has_errors(diags), qPrintable(text));
  QCOMPARE(QString::fromUtf8(to_string(loaded.config.stage).data()), stage);
  QVERIFY(loaded.config.finetuning_type != FinetuningType::Full);
  if (fragment != "valid") QVERIFY2(text.contains(fragment), qPrintable(text));
}

// Saved unchanged, the block is written as the file wrote it; saved after an edit of the adapter
// keys (the wizard's), it says the new values in v1's spelling and loads back to them.
void TestLlamaFactoryV1::peftConfigSavesBack() {
  const QString file = kDir + "/train_lora_sft.yaml";
  const RunConfig loaded = loadFixture("train_lora_sft.yaml").config;
  const std::string block =
      "peft_config:\n  name: lora\n  r: 16\n  lora_alpha: 32\n  lora_dropout: 0.05\n"
      "  target_modules: all\n";
  QVERIFY(readAll(file).contains(QString::fromStdString(block)));
  std::string out = to_yaml(loaded);
  QVERIFY2(out.find(block) != std::string::npos, out.c_str());

  RunConfig c = loaded;
  c.lora_rank = 4;
  out = to_yaml(c);
  QVERIFY2(out.find("peft_config:\n  name: lora\n  r: 4\n  lora_alpha: 32\n  lora_dropout: "
                    "0.05\n  target_modules: all\n") != std::string::npos,
           out.c_str());
  QVERIFY2(out.find("lora_rank") == std::string::npos, out.c_str());
  QCOMPARE(keysOf(out), keysOf(readAll(file).toStdString()));  // in the file's place
  RunConfig back = load_config_string(out).config;
  QCOMPARE(back.lora_rank, int64_t{4});
  QCOMPARE(back.lora_alpha.value_or(0), 32.0);
  QCOMPARE(back.lora_dropout, 0.05);

  // Several modules and DoRA, as a list and a flag.
  c.lora_target = {"q_proj", "v_proj"};
  c.use_dora = true;
  out = to_yaml(c);
  QVERIFY2(out.find("  target_modules: [q_proj, v_proj]\n  use_dora: true\n") != std::string::npos,
           out.c_str());
  back = load_config_string(out).config;
  QCOMPARE(back.lora_target, c.lora_target);
  QVERIFY(back.use_dora);

  // Back to full-parameter training.
  c.finetuning_type = FinetuningType::Full;
  out = to_yaml(c);
  QVERIFY2(out.find("peft_config: ~\n") != std::string::npos, out.c_str());
  QCOMPARE(load_config_string(out).config.finetuning_type, FinetuningType::Full);

  // Freeze: the new layer count.
  RunConfig freeze = loadFixture("train_freeze_sft.yaml").config;
  QVERIFY(to_yaml(freeze).find("peft_config:\n  name: freeze\n  freeze_trainable_layers: 2\n  "
                               "freeze_trainable_modules: all\n") != std::string::npos);
  freeze.freeze_trainable_layers = -1;
  freeze.freeze_extra_modules = {"embed_tokens"};
  out = to_yaml(freeze);
  QVERIFY2(out.find("peft_config:\n  name: freeze\n  freeze_trainable_layers: -1\n  "
                    "freeze_trainable_modules: all\n  freeze_extra_modules: embed_tokens\n") !=
               std::string::npos,
           out.c_str());
  QCOMPARE(load_config_string(out).config.freeze_trainable_layers, int64_t{-1});

  // A full run turned to LoRA (the wizard): the key table's defaults said in v1's terms, so that
  // v1 trains what studio-train would (v1 alone would take lora_alpha 16 and dropout 0.05).
  RunConfig full = loadFixture("train_full_fsdp2.yaml").config;
  full.finetuning_type = FinetuningType::Lora;
  full.lora_rank = 32;
  out = to_yaml(full);
  QVERIFY2(out.find("peft_config:\n  name: lora\n  r: 32\n  lora_alpha: 64\n  lora_dropout: "
                    "0.0\n  target_modules: all\n") != std::string::npos,
           out.c_str());
  back = load_config_string(out).config;
  QCOMPARE(back.finetuning_type, FinetuningType::Lora);
  QCOMPARE(back.lora_scaling(), full.lora_scaling());
  QCOMPARE(back.lora_dropout, 0.0);
}

void TestLlamaFactoryV1::validatesOnEightProcesses_data() {
  QTest::addColumn<QString>("file");
  QTest::addColumn<bool>("valid");
  QTest::addColumn<QString>("fragment");  // in the formatted diagnostics
  const QString demo = "../../../../resources/demo/model";
  QTest::newRow("fsdp2") << "train_full_fsdp2.yaml" << true
                         << ":20:20: global_batch_size: note: gradient_accumulation_steps 2 = 32 / "
                            "(8 data-parallel ranks (world 8 / cp_size 1) x micro_batch_size 2)";
  QTest::newRow("fsdp2: template") << "train_full_fsdp2.yaml" << true
                                   << ":2:8: model: note: chat template chatml: the tokenizer has "
                                      "no chat template";
  QTest::newRow("fsdp2: kernel_config") << "train_full_fsdp2.yaml" << true
                                        << ":6:9: kernel_config: warning: 'auto': studio-train "
                                           "runs its own kernels";
  QTest::newRow("deepspeed") << "train_full_deepspeed.yaml" << true << "valid";
  QTest::newRow("ulysses cp") << "train_full_ulysses_cp.yaml" << true << "valid";
  QTest::newRow("padding_free") << "train_full_padding_free.yaml" << true
                                << ":14:20: batching_strategy: note: studio-train pads each "
                                   "micro-batch";
  QTest::newRow("dpo from pair data")
      << "train_full_dpo.yaml" << true
      << "dpo_label_smoothing: note: stage dpo, as the DPO keys ask";
  QTest::newRow("simpo") << "train_full_simpo.yaml" << true << "valid";
  QTest::newRow("lora") << "train_lora_sft.yaml" << true << "valid";
  QTest::newRow("freeze") << "train_freeze_sft.yaml" << true << "valid";
  QTest::newRow("qlora: quant_config")
      << "train_qlora.yaml" << false
      << ":7:9: quant_config: QLoRA from a v1 quant_config block is not read yet: remove "
         "quant_config and give studio-train's quantization_bit: 4";
  QTest::newRow("muon") << "train_full_muon.yaml" << false
                        << ":8:9: optim_config: studio-train trains with AdamW; 'muon' is not "
                           "available: remove optim_config";
  QTest::newRow("dynamic batching") << "train_full_dynamic_batching.yaml" << true << "valid";
  QTest::newRow("hub dataset") << "train_hub_dataset.yaml" << false
                               << "data/hub.yaml:1:1: orca_pairs.source: hf_hub datasets are "
                                  "downloaded by LLaMA-Factory, never by studio-train";
  QTest::newRow("global batch") << "train_bad_batch.yaml" << false
                                << ":8:20: global_batch_size: 20 is not a multiple of 4 "
                                   "data-parallel ranks (world 8 / cp_size 2) x micro_batch_size "
                                   "2 = 8 (allowed: multiples of 8)";
  QTest::newRow("cp_size") << "train_bad_cp.yaml" << false
                           << ":5:10: cp_size: 3 does not divide the world size 8";
  // Issue 35: a number past what it is read into is too large, not "not a whole number".
  QTest::newRow("global batch past int32")
      << "train_huge_batch.yaml" << false
      << ":5:20: global_batch_size: 9223372036854775807 is too large (at most 2147483647)";
  // A conflict with the DeepSpeed JSON names the key as the file spells it.
  QTest::newRow("deepspeed conflict in v1 spelling")
      << "train_deepspeed_conflict.yaml" << false
      << "mismatch.json: train_micro_batch_size_per_gpu is 4 but micro_batch_size is 2 (line 7)";
  // Merge keys in the dataset YAML resolve as PyYAML resolves them.
  QTest::newRow("dataset yaml with merge keys") << "train_merged_datasets.yaml" << true << "valid";
  QTest::newRow("dataset yaml merging a path")
      << "train_bad_merge.yaml" << false
      << "data/bad_merge.yaml:4:3: `<<` merges a mapping or a list of mappings (`<<: *name` or "
         "`<<: [*a, *b]`), got 'data/chat.jsonl'";
}

// data/merged.yaml: an anchored entry merged whole, and a list of two mappings under an own key.
void TestLlamaFactoryV1::datasetYamlMergeKeys_data() {
  QTest::addColumn<QString>("name");
  QTest::addColumn<QString>("path");
  QTest::addColumn<QString>("converter");
  QTest::addColumn<int>("sourceLine");  // where `source` was written: merged keys keep their line
  QTest::newRow("the anchored entry") << "identity" << "data/identity.json" << "alpaca" << 4;
  QTest::newRow("own keys win over merged ones")
      << "chat" << "data/chat.jsonl" << "sharegpt" << 4;
  QTest::newRow("earlier mappings of a list win, an own null too")
      << "messages" << "data/messages.jsonl" << "" << 4;
}

void TestLlamaFactoryV1::datasetYamlMergeKeys() {
  QFETCH(QString, name);
  QFETCH(QString, path);
  QFETCH(QString, converter);
  QFETCH(int, sourceLine);
  const V1DatasetList list = read_v1_datasets("data/merged.yaml", kDir.toStdString(), false);
  QVERIFY2(list.error.empty() && list.problems.empty(),
           (list.error + format_all(list.problems)).c_str());
  QCOMPARE(list.entries.size(), size_t{3});
  for (const auto& e : list.entries) {
    if (QString::fromStdString(e.name) != name) continue;
    QCOMPARE(QString::fromStdString(e.path), path);
    QCOMPARE(QString::fromStdString(e.source), QStringLiteral("local"));
    QCOMPARE(QString::fromStdString(e.converter), converter);
    QCOMPARE(e.pos.at("source").line, sourceLine);
    return;
  }
  QFAIL(qPrintable("no entry " + name));
}

void TestLlamaFactoryV1::validatesOnEightProcesses() {
  QFETCH(QString, file);
  QFETCH(bool, valid);
  QFETCH(QString, fragment);
  const auto diags = loadAndValidate(file, 8);
  const QString text = QString::fromStdString(format_all(diags));
  QCOMPARE(!has_errors(diags), valid);
  if (fragment != "valid") QVERIFY2(text.contains(fragment), qPrintable(text));
}

void TestLlamaFactoryV1::worldSetsAccumulationAndPrecision() {
  RunConfig c = loadFixture("train_full_fsdp2.yaml").config;
  resolve_llamafactory_v1(c, world(8));
  QCOMPARE(c.gradient_accumulation_steps, int64_t{2});
  QCOMPARE(c.template_name, std::string("chatml"));
  QCOMPARE(c.stage, Stage::Sft);
  resolve_llamafactory_v1(c, world(4));  // 32 / (4 x 2)
  QCOMPARE(c.gradient_accumulation_steps, int64_t{4});

  // DeepSpeed's JSON leaves bf16 "auto": v1 trains in bf16.
  RunConfig ds = loadFixture("train_full_deepspeed.yaml").config;
  ds.bf16 = false;
  resolve_llamafactory_v1(ds, world(8));
  QVERIFY(ds.bf16);

  // Preference pairs ask for DPO, as `llamafactory-cli dpo` would run them.
  LoadResult pairs = load_config_string(
      "model: ../../../../resources/demo/model\n"
      "train_dataset: data/dpo.yaml\noutput_dir: o\n",
      "pairs.yaml");
  QCOMPARE(pairs.config.stage, Stage::Sft);
  resolve_llamafactory_v1(pairs.config, world(1));
  QCOMPARE(pairs.config.stage, Stage::Dpo);
  const auto diags = validate_config(pairs.config, world(1));
  QVERIFY2(format_all(diags).find("pairs.yaml:2:16: train_dataset: note: stage dpo: the datasets "
                                  "are preference pairs") != std::string::npos,
           format_all(diags).c_str());

  // No FSDP2 and no DeepSpeed: v1 trains in fp32 whatever bf16 says.
  LoadResult ddp = load_config_string(
      "model: m\ntrain_dataset: d.yaml\noutput_dir: o\nbf16: true\n", "ddp.yaml");
  QVERIFY(!ddp.config.bf16);
  QVERIFY2(format_all(ddp.diagnostics)
                   .find("ddp.yaml:4:7: bf16: warning: no effect without "
                         "dist_config") != std::string::npos,
           format_all(ddp.diagnostics).c_str());
}

void TestLlamaFactoryV1::exportKeepsTheFileForm_data() {
  QTest::addColumn<QString>("file");
  for (const char* f : {"train_full_fsdp2.yaml", "train_full_deepspeed.yaml",
                        "train_full_ulysses_cp.yaml", "train_full_padding_free.yaml",
                        "train_full_dpo.yaml", "train_lora_sft.yaml", "train_freeze_sft.yaml",
                        "train_qlora.yaml", "train_full_muon.yaml",
                        "../lf_examples/train_lora_sft.yaml", "../lf_examples/train_freeze_sft.yaml"})
    QTest::newRow(f) << QString::fromLatin1(f);
}

void TestLlamaFactoryV1::exportKeepsTheFileForm() {
  QFETCH(QString, file);
  const LoadResult loaded = loadFixture(file);
  const std::string minimal = to_yaml(loaded.config, YamlStyle::Minimal);
  // The file's keys, in its order, nothing added: values as the file wrote them.
  QCOMPARE(keysOf(minimal), keysOf(readAll(kDir + "/" + file).toStdString()));
  const YAML::Node original = YAML::LoadFile((kDir + "/" + file).toStdString());
  const YAML::Node written = YAML::Load(minimal);
  for (const auto& kv : original)
    QCOMPARE(QString::fromStdString(yaml_text(written[kv.first.Scalar()])),
             QString::fromStdString(yaml_text(kv.second)));
  // Loaded back it is the same config, and writes the same text.
  const LoadResult again = load_config_string(minimal, file.toStdString());
  QVERIFY(again.config.is_v1());
  QCOMPARE(config_to_json(again.config), config_to_json(loaded.config));
  QCOMPARE(to_yaml(again.config, YamlStyle::Minimal), minimal);
  // print-config's form is v1's too: every v1 key, loading back to the same config.
  const std::string full = to_yaml(loaded.config, YamlStyle::Full);
  QVERIFY2(full.find("model_name_or_path") == std::string::npos, full.c_str());
  QCOMPARE(config_to_json(load_config_string(full).config), config_to_json(loaded.config));
}

void TestLlamaFactoryV1::editsAreWrittenInV1Spelling() {
  RunConfig c = loadFixture("train_full_fsdp2.yaml").config;
  c.sequence_parallel_size = 4;
  c.per_device_train_batch_size = 4;
  c.learning_rate = 2e-5;
  c.zero_stage = 2;
  c.v1.global_batch_size = 64;
  c.flash_attn = FlashAttn::Disabled;
  c.template_name = "qwen";  // studio-train's own key: written under its name
  const std::string out = to_yaml(c);
  for (const char* line : {"micro_batch_size: 4\n", "learning_rate: 2.0e-05\n",
                           "global_batch_size: 64\n", "cp_size: 4\n", "flash_attn: eager\n",
                           "dist_config:\n  name: fsdp2\n  reshard_after_forward: false\n",
                           "template: qwen\n", "kernel_config:\n  name: auto\n"})
    QVERIFY2(out.find(line) != std::string::npos, (std::string(line) + " in\n" + out).c_str());
  for (const char* v0 : {"sequence_parallel_size", "per_device_train_batch_size", "zero_stage",
                         "gradient_accumulation_steps", "dcp_path"})
    QVERIFY2(out.find(v0) == std::string::npos, (std::string(v0) + " in\n" + out).c_str());
  // New keys follow the file's; it loads back with the edits.
  QVERIFY(out.find("cp_size") > out.find("max_new_tokens"));
  const RunConfig back = load_config_string(out).config;
  QCOMPARE(back.sequence_parallel_size, int64_t{4});
  QCOMPARE(back.zero_stage.value_or(-1), int64_t{2});
  QCOMPARE(back.flash_attn, FlashAttn::Disabled);
}

// studio-train train --set on a v1 file: v1's own names, read as the file's keys are, saved in
// v1 spelling; the key table's names still work; a bad value is an error at "--set".
void TestLlamaFactoryV1::overridesTakeV1Names() {
  RunConfig c = loadFixture("train_full_fsdp2.yaml").config;
  auto diags = apply_overrides(c, {"cp_size=2", "micro_batch_size=4", "flash_attn=eager",
                                   "global_batch_size=64", "learning_rate=3.0e-5",
                                   "dist_config={name: fsdp2, reshard_after_forward: false}"});
  QVERIFY2(!has_errors(diags), diags.empty() ? "" : diags.front().format().c_str());
  QCOMPARE(c.sequence_parallel_size, int64_t{2});
  QCOMPARE(c.per_device_train_batch_size, int64_t{4});
  QCOMPARE(c.flash_attn, FlashAttn::Disabled);
  QCOMPARE(c.v1.global_batch_size.value_or(0), int64_t{64});
  QCOMPARE(c.learning_rate, 3e-5);
  QCOMPARE(c.zero_stage.value_or(-1), int64_t{2});
  const std::string out = to_yaml(c);
  for (const char* line : {"cp_size: 2\n", "micro_batch_size: 4\n", "flash_attn: eager\n",
                           "global_batch_size: 64\n"})
    QVERIFY2(out.find(line) != std::string::npos, (std::string(line) + " in\n" + out).c_str());
  QVERIFY2(out.find("sequence_parallel_size") == std::string::npos, out.c_str());

  diags = apply_overrides(c, {"cp_size=two"});
  QVERIFY(has_errors(diags));
  QVERIFY2(QString::fromStdString(diags.front().format()).contains("--set cp_size=two"),
           diags.front().format().c_str());
  QCOMPARE(c.sequence_parallel_size, int64_t{2});  // untouched

  // A peft_config block, read as the file's is, with v1's defaults.
  diags = apply_overrides(c, {"peft_config={name: lora, r: 4}"});
  QVERIFY2(!has_errors(diags), diags.empty() ? "" : diags.front().format().c_str());
  QCOMPARE(c.finetuning_type, FinetuningType::Lora);
  QCOMPARE(c.lora_rank, int64_t{4});
  QCOMPARE(c.lora_alpha.value_or(0), 16.0);
  QVERIFY2(to_yaml(c).find("peft_config:\n  name: lora\n  r: 4\n") != std::string::npos,
           to_yaml(c).c_str());
  diags = apply_overrides(c, {"peft_config={name: lora, r: 0}"});
  QVERIFY(has_errors(diags));
  QVERIFY2(QString::fromStdString(diags.front().format())
               .contains("--set peft_config={name: lora, r: 0}: peft_config.r: expected a rank"),
           diags.front().format().c_str());
  QCOMPARE(c.lora_rank, int64_t{4});  // untouched

  // A block replaces the file's whole: none of its freeze options is left given.
  RunConfig freeze = loadFixture("train_freeze_sft.yaml").config;
  QVERIFY(freeze.source.has("freeze_trainable_layers"));
  diags = apply_overrides(freeze, {"peft_config={name: lora}"});
  QVERIFY2(!has_errors(diags), diags.empty() ? "" : diags.front().format().c_str());
  QCOMPARE(freeze.finetuning_type, FinetuningType::Lora);
  QVERIFY(!freeze.source.has("freeze_trainable_layers"));
  QCOMPARE(freeze.lora_dropout, 0.05);
}

void TestLlamaFactoryV1::v0FilesStayV0() {
  const LoadResult r = load_config_file(STUDIO_TEST_FIXTURES_DIR "/configs/qwen2.5-7b-sft-sp8.yaml");
  QVERIFY(!r.config.is_v1());
  const std::string out = to_yaml(r.config);
  QVERIFY(out.rfind("model_name_or_path: ", 0) == 0);
  QVERIFY(out.find("sequence_parallel_size: 8") != std::string::npos);
  QVERIFY(out.find("cp_size") == std::string::npos);
}

void TestLlamaFactoryV1::templateFromTheModel_data() {
  QTest::addColumn<QString>("modelType");
  QTest::addColumn<QString>("chatTemplate");
  QTest::addColumn<bool>("jinjaFile");
  QTest::addColumn<QString>("chosen");
  QTest::newRow("no chat template: ChatML fallback") << "qwen2"
                                                     << "" << false << "chatml";
  QTest::newRow("Qwen3 thinking switch")
      << "qwen3" << kChatmlTurns + kThinkingSwitch << false << "qwen3";
  QTest::newRow("Qwen3 MoE, in chat_template.jinja")
      << "qwen3_moe" << kChatmlTurns + kThinkingSwitch << true << "qwen3";
  QTest::newRow("Qwen3 Instruct-2507")
      << "qwen3" << kChatmlTurns + kPlainPrompt << false << "qwen3_nothink";
  QTest::newRow("Qwen3 Thinking-2507: no named template")
      << "qwen3" << kChatmlTurns + kAlwaysThinks << false << "";
  QTest::newRow("Qwen2.5") << "qwen2" << kQwen25System + kChatmlTurns + kPlainPrompt << false
                           << "qwen";
  QTest::newRow("Qwen2 without Qwen2.5's system: none")
      << "qwen2" << kChatmlTurns + kPlainPrompt << false << "";
  QTest::newRow("Llama: none") << "llama"
                               << "{{- bos_token }}<|start_header_id|>{{ m }}<|eot_id|>" << false
                               << "";
}

void TestLlamaFactoryV1::templateFromTheModel() {
  QFETCH(QString, modelType);
  QFETCH(QString, chatTemplate);
  QFETCH(bool, jinjaFile);
  QFETCH(QString, chosen);
  QTemporaryDir dir;
  const QString model = modelWithTemplate(dir, modelType, chatTemplate, jinjaFile);
  const TemplateChoice t = template_for_model(model.toStdString());
  QVERIFY2(QString::fromStdString(t.name) == chosen, t.why.c_str());

  // validate says which, at `model`; or asks for `template:`.
  const std::string yaml =
      "model: " + model.toStdString() + "\ntrain_dataset: data/sft.yaml\noutput_dir: o\n";
  LoadResult loaded = load_config_string(yaml, "c.yaml");
  const std::string text = format_all(validate_config(loaded.config, world(1)));
  if (chosen.isEmpty())
    QVERIFY2(
        text.find("c.yaml:1:8: model: which chat template to train with: ") != std::string::npos &&
            text.find("give `template:` (studio-train's own key)") != std::string::npos,
        text.c_str());
  else
    QVERIFY2(text.find("c.yaml:1:8: model: note: chat template " + chosen.toStdString()) !=
                 std::string::npos,
             text.c_str());
  // A `template:` of the file's own is kept, and nothing is guessed.
  loaded = load_config_string(yaml + "template: llama3\n", "c.yaml");
  resolve_llamafactory_v1(loaded.config, world(1));
  QCOMPARE(loaded.config.template_name, std::string("llama3"));
}

void TestLlamaFactoryV1::datasetYamlRowsAreRead() {
  // v1 reads the dataset YAML's paths from the working directory, as LLaMA-Factory does.
  const QString previous = QDir::currentPath();
  QVERIFY(QDir::setCurrent(kDir));
  auto restore = qScopeGuard([&] { QDir::setCurrent(previous); });
  RunConfig c = loadFixture("train_full_fsdp2.yaml").config;
  resolve_llamafactory_v1(c, {});
  c.model_name_or_path = kDemoModel.toStdString();
  const data::Tokenizer tok = data::Tokenizer::load(c.model_name_or_path);
  data::DatasetOptions opt;
  opt.use_cache = false;
  const data::SftData sft = data::load_sft_data(c, tok, opt);
  // identity: 4 alpaca rows; chat: size 1, one conversation of two answers, one sample each;
  // messages: one answer, and one conversation whose first answer has loss_weight 0.
  QCOMPARE(sft.train.size(), size_t{8});
  auto prompt = [&](const data::TokenizedSample& s) {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < s.input_ids.size() && s.labels[i] == data::kIgnoreIndex; ++i)
      ids.push_back(static_cast<int32_t>(s.input_ids[i]));
    return QString::fromStdString(tok.decode(ids));
  };
  auto answer = [&](const data::TokenizedSample& s) {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < s.input_ids.size(); ++i)
      if (s.labels[i] != data::kIgnoreIndex) ids.push_back(static_cast<int32_t>(s.labels[i]));
    return QString::fromStdString(tok.decode(ids));
  };
  // v1's alpaca converter puts input right after instruction.
  QVERIFY2(prompt(sft.train[2]).contains("user\nName three primes below ten.<|im_end|>"),
           qPrintable(prompt(sft.train[2])));
  QCOMPARE(answer(sft.train[2]), QStringLiteral("2, 3 and 5.<|im_end|>\n"));
  QVERIFY(prompt(sft.train[3]).startsWith("<|im_start|>system\nAnswer in one word.<|im_end|>"));
  // A conversation becomes one sample per answer, each learning its last answer only.
  QVERIFY(!prompt(sft.train[4]).contains("3+3"));
  QCOMPARE(answer(sft.train[4]), QStringLiteral("4.<|im_end|>\n"));
  QVERIFY(prompt(sft.train[5])
              .contains("<|im_start|>assistant\n4.<|im_end|>\n<|im_start|>user\n"
                        "And 3+3?"));
  QCOMPARE(answer(sft.train[5]), QStringLiteral("6.<|im_end|>\n"));
  // loss_weight 0 leaves an answer to the prompt.
  QCOMPARE(answer(sft.train[7]), QStringLiteral("Goodbye.<|im_end|>\n"));
  QVERIFY(prompt(sft.train[7]).contains("Hello."));

  // A sample whose answer lies beyond cutoff_len is left out, as v1 drops it.
  RunConfig shortCut = c;
  shortCut.cutoff_len = 24;
  const data::SftData cut = data::load_sft_data(shortCut, tok, opt);
  QVERIFY(cut.train.size() < sft.train.size());
  QVERIFY(cut.stats.skipped_invalid > 0);
  for (const auto& s : cut.train) QVERIFY(s.input_ids.size() <= 24);

  RunConfig dpo = loadFixture("train_full_dpo.yaml").config;
  resolve_llamafactory_v1(dpo, {});
  dpo.model_name_or_path = c.model_name_or_path;
  const data::PairData pairs = data::load_pair_data(dpo, tok, opt);
  QCOMPARE(pairs.train.size(), size_t{3});
  QCOMPARE(answer(pairs.train[0].rejected), QStringLiteral("No.<|im_end|>\n"));
  QVERIFY(prompt(pairs.train[1].chosen).startsWith("<|im_start|>system\nBe kind."));
}

// The studio starts a run in its own folder (and a remote one on another host): the dataset
// YAML, whose paths are the working directory's, is rewritten there with each local entry's
// path placed anew, its other fields kept, and the rows load from any working directory.
void TestLlamaFactoryV1::relocatedDatasetsLoadFromAnotherFolder() {
  QTemporaryDir run;
  RunConfig c = loadFixture("train_full_fsdp2.yaml").config;
  std::vector<std::string> placed;
  QString written;
  relocate_v1_datasets(
      c, kDir.toStdString(),
      [&](const std::string& path) {
        placed.push_back(path);
        return path;
      },
      [&](const std::string& name, const std::string& text) {
        written = run.filePath(QString::fromStdString(name));
        QFile f(written);
        if (f.open(QIODevice::WriteOnly)) f.write(text.c_str());
        return written.toStdString();
      });
  QCOMPARE(QString::fromStdString(c.v1.train_dataset), run.filePath("train_dataset.yaml"));
  QCOMPARE(placed.size(), size_t{3});
  for (const auto& p : placed) QVERIFY2(QDir::isAbsolutePath(QString::fromStdString(p)), p.c_str());
  QFile f(written);
  QVERIFY(f.open(QIODevice::ReadOnly));
  const QString text = QString::fromUtf8(f.readAll());
  QVERIFY2(text.contains(kDir + "/data/chat.jsonl") && text.contains("converter: sharegpt") &&
               text.contains("size: 1"),
           qPrintable(text));

  // Loaded from the run folder: the same 8 samples as from the fixture's own folder.
  const QString previous = QDir::currentPath();
  QVERIFY(QDir::setCurrent(run.path()));
  auto restore = qScopeGuard([&] { QDir::setCurrent(previous); });
  c.model_name_or_path = kDemoModel.toStdString();
  resolve_llamafactory_v1(c, {});
  const data::Tokenizer tok = data::Tokenizer::load(c.model_name_or_path);
  data::DatasetOptions opt;
  opt.use_cache = false;
  QCOMPARE(data::load_sft_data(c, tok, opt).train.size(), size_t{8});

  // A hub id is left as written; an unreadable dataset YAML is an error naming the file.
  RunConfig hub = c;
  hub.v1.train_dataset = "org/some-dataset";
  relocate_v1_datasets(hub, kDir.toStdString(), [](const std::string& p) { return p; },
                       [](const std::string&, const std::string&) { return std::string("x"); });
  QCOMPARE(QString::fromStdString(hub.v1.train_dataset), QStringLiteral("org/some-dataset"));
  QFile bad(run.filePath("bad.yaml"));
  QVERIFY(bad.open(QIODevice::WriteOnly));
  bad.write("a: [unclosed\n");
  bad.close();
  RunConfig broken = c;
  broken.v1.train_dataset = bad.fileName().toStdString();
  try {
    relocate_v1_datasets(broken, "", [](const std::string& p) { return p; },
                         [](const std::string&, const std::string&) { return std::string("x"); });
    QFAIL("a malformed dataset YAML was accepted");
  } catch (const std::invalid_argument& e) {
    QVERIFY2(QString(e.what()).contains(bad.fileName()), e.what());
  }
}

QTEST_MAIN(TestLlamaFactoryV1)
#include "tst_llamafactory_v1.moc"
