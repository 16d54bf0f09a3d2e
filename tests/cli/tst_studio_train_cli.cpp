// studio-train validate / print-config / estimate / --help / --version, run as a process.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <map>

#include "studio/config/config_io.h"

namespace {

struct Run {
  int code = -1;
  QString out;
  QString err;
};

Run run(const QStringList& args, const QString& workdir = QStringLiteral(STUDIO_TEST_FIXTURES_DIR
                                                                         "/configs")) {
  QProcess p;
  p.setWorkingDirectory(workdir);
  p.start(QStringLiteral(STUDIO_TRAIN_EXE), args);
  if (!p.waitForFinished(60000)) {
    p.kill();
    return {};
  }
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAllStandardOutput()), QString::fromUtf8(p.readAllStandardError())};
}

// run() with extra environment variables (NAME -> value; an empty value unsets it).
Run runEnv(const QStringList& args, const QString& workdir,
           const std::map<QString, QString>& env, int timeoutMs = 180000) {
  QProcess p;
  QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
  for (const auto& [name, value] : env) {
    if (value.isEmpty())
      e.remove(name);
    else
      e.insert(name, value);
  }
  p.setProcessEnvironment(e);
  p.setWorkingDirectory(workdir);
  p.start(QStringLiteral(STUDIO_TRAIN_EXE), args);
  if (!p.waitForFinished(timeoutMs)) {
    p.kill();
    p.waitForFinished();
    return {};
  }
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAllStandardOutput()), QString::fromUtf8(p.readAllStandardError())};
}

}  // namespace

class TestStudioTrainCli : public QObject {
  Q_OBJECT

 private slots:
  void exitCodes_data();
  void exitCodes();
  void rejectsSpThreeOnFourProcessesNamingKeyAndLine();
  void acceptsRealisticFileOnEightProcesses();
  void printConfigIsNormalisedAndLoadsBack();
  void versionNamesLibTorch();
  void malformedYamlNamesTheLine();
  void configKeysDocIsCurrent();
  void tokenizeRoundTripsThroughDecode();
  void previewMarksMaskedSpans();
  void estimateJsonIsOneObject();
  void estimateNeedsTheModelShapes();
  void hubIdFromTheLocalCache();
  void llamaFactoryV1Files_data();
  void llamaFactoryV1Files();
  void llamaFactoryV1PrintConfigKeepsTheForm();
  void llamaFactoryV1PreviewReadsTheDatasetYaml();
  void llamaFactoryV1TrainsAsWritten();
};

void TestStudioTrainCli::exitCodes_data() {
  QTest::addColumn<QStringList>("args");
  QTest::addColumn<int>("code");
  QTest::addColumn<QString>("stream");  // "out" or "err"
  QTest::addColumn<QString>("fragment");
  QTest::newRow("help") << QStringList{"--help"} << 0 << "out" << "validate CONFIG.yaml";
  QTest::newRow("no args") << QStringList{} << 2 << "err" << "usage:";
  QTest::newRow("unknown command") << QStringList{"frobnicate"} << 2 << "err"
                                   << "unknown command 'frobnicate'";
  QTest::newRow("missing file") << QStringList{"validate", "nope.yaml"} << 2 << "err"
                                << "nope.yaml:1:1: cannot open";
  QTest::newRow("bad nproc") << QStringList{"validate", "x.yaml", "--nproc", "four"} << 2 << "err"
                             << "--nproc needs a positive whole number";
  QTest::newRow("nproc without value") << QStringList{"validate", "x.yaml", "--nproc"} << 2
                                       << "err" << "--nproc needs a value";
  QTest::newRow("two configs") << QStringList{"validate", "a.yaml", "b.yaml"} << 2 << "err"
                               << "expected one CONFIG.yaml";
  QTest::newRow("nnodes alone") << QStringList{"validate", "a.yaml", "--nnodes", "2"} << 2 << "err"
                                << "--nnodes needs --nproc";
  QTest::newRow("multi-node world") << QStringList{"validate", "qwen2.5-7b-sft-sp8.yaml",
                                                   "--nproc=4", "--nnodes=2"}
                                    << 0 << "out" << "world size 8 (4 x 2)";
  QTest::newRow("multi-node world too small")
      << QStringList{"validate", "qwen2.5-7b-sft-sp8.yaml", "--nproc", "2", "--nnodes", "3"} << 2
      << "err" << "does not divide the world size 6";
  // estimate: the example of tst_run_config (Qwen2.5-7B, 131072 tokens, ZeRO-3 offload) on 8
  // GPUs; its numbers are worked out in tst_memory_estimate.
  const QStringList estimate{"estimate", "qwen2.5-7b-sft-sp8.yaml", "--nproc", "8"};
  QTest::newRow("estimate table")
      << estimate + QStringList{"--gpu-memory", "80"} << 0 << "out"
      << "  total                   15.81 GiB of 80.00 GiB: fits, 64.19 GiB spare\n";
  QTest::newRow("estimate smallest sp")
      << estimate + QStringList{"--gpu-memory=80"} << 0 << "out"
      << "Smallest sequence_parallel_size that fits in 80.00 GiB: 1 (valid sizes on a world of "
         "8: 1, 2, 4, 8)";
  QTest::newRow("estimate longest cutoff")
      << estimate + QStringList{"--gpu-memory", "80"} << 0 << "out"
      << "Longest cutoff_len that fits in 80.00 GiB: 1212416 tokens (this world, "
         "sequence_parallel_size 8 and the other settings unchanged)";
  QTest::newRow("estimate none fits")
      << estimate + QStringList{"--gpu-memory", "15"} << 0 << "out"
      << "No sequence_parallel_size fits in 15.00 GiB";
  QTest::newRow("estimate set")
      << estimate + QStringList{"--set", "sequence_parallel_size=4", "--set=cutoff_len=65536"}
      << 0 << "out" << "sequence parallel 4 (zigzag-ring), 16,384 tokens per rank";
  QTest::newRow("estimate default world") << QStringList{"estimate", "qwen2.5-7b-sft-sp8.yaml"}
                                          << 0 << "out" << "Memory per GPU: world 8,";
  QTest::newRow("estimate bad world") << QStringList{"estimate", "qwen2.5-7b-sft-sp8.yaml",
                                                     "--nproc", "4"}
                                      << 2 << "err" << "does not divide the world size 4";
  QTest::newRow("estimate bad set") << estimate + QStringList{"--set", "sequence_parallel_size=3"}
                                    << 2 << "err" << "qwen2.5-7b-sft-sp8.yaml: 1 error";
  QTest::newRow("estimate bad gpu memory")
      << estimate + QStringList{"--gpu-memory", "lots"} << 2 << "err"
      << "--gpu-memory needs a positive number of GiB, got 'lots'";
}

void TestStudioTrainCli::exitCodes() {
  QFETCH(QStringList, args);
  QFETCH(int, code);
  QFETCH(QString, stream);
  QFETCH(QString, fragment);
  const Run r = run(args);
  QCOMPARE(r.code, code);
  const QString& text = stream == "out" ? r.out : r.err;
  QVERIFY2(text.contains(fragment), qPrintable("stdout:\n" + r.out + "\nstderr:\n" + r.err));
}

void TestStudioTrainCli::rejectsSpThreeOnFourProcessesNamingKeyAndLine() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  QFile f(dir.filePath("sp3.yaml"));
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write("model_name_or_path: /models/Qwen2.5-7B-Instruct\nstage: sft\ndataset: long_docs\n"
          "template: qwen\noutput_dir: saves/x\nsequence_parallel_size: 3\n");
  f.close();
  const Run r = run({"validate", f.fileName(), "--nproc", "4"});
  QCOMPARE(r.code, 2);
  QVERIFY2(r.err.contains(f.fileName() + ":6:25: sequence_parallel_size: 3 does not divide the "
                                         "world size 4"),
           qPrintable(r.err));
  QVERIFY2(r.err.contains("(allowed: 1, 2, 4)"), qPrintable(r.err));
  QVERIFY(r.out.isEmpty());
}

void TestStudioTrainCli::acceptsRealisticFileOnEightProcesses() {
  const Run r = run({"validate", "qwen2.5-7b-sft-sp8.yaml", "--nproc", "8"});
  QVERIFY2(r.code == 0, qPrintable(r.err));
  QVERIFY2(r.out.contains("valid: stage sft, world size 8 (8 x 1), sequence parallel 8 "
                          "(zigzag-ring), cutoff_len 131072, model Qwen2ForCausalLM 7.62B"),
           qPrintable(r.out));
  // The keys LLaMA-Factory accepts but the engine ignores are reported, once each (report_to:
  // none asks for nothing, so nothing is said of it).
  QCOMPARE(r.err.count("report_to: warning:"), 0);
  QCOMPARE(r.err.count("plot_loss: warning:"), 1);

  const Run bad = run({"validate", "qwen2.5-7b-sft-sp8.yaml", "--nproc", "4"});
  QCOMPARE(bad.code, 2);
  QVERIFY2(bad.err.contains("qwen2.5-7b-sft-sp8.yaml:37:25: sequence_parallel_size: 8 does not "
                            "divide the world size 4"),
           qPrintable(bad.err));
}

void TestStudioTrainCli::printConfigIsNormalisedAndLoadsBack() {
  QTemporaryDir dir;
  QFile f(dir.filePath("c.yaml"));
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write("model_name_or_path: m\ndataset: d\ntemplate: qwen\noutput_dir: o\ncutoff_len: 1000\n"
          "sequence_parallel_size: 8\nlearning_rate: 1e-5\nmy_custom_key: {a: 1}\n");
  f.close();
  const Run r = run({"print-config", f.fileName()});
  QVERIFY2(r.code == 0, qPrintable(r.err));
  QVERIFY2(r.out.contains("cutoff_len: 1000\n"), qPrintable(r.out));
  QVERIFY2(r.out.contains("learning_rate: 1.0e-05\n"), qPrintable(r.out));
  QVERIFY2(r.out.contains("per_device_train_batch_size: 1\n"), qPrintable(r.out));
  QVERIFY2(r.out.contains("my_custom_key:"), qPrintable(r.out));
  const auto back = studio::load_config_string(r.out.toStdString());
  QVERIFY(back.ok());
  QCOMPARE(back.config.cutoff_len, int64_t{1000});
  QCOMPARE(back.config.extra_keys.size(), size_t{1});
}

void TestStudioTrainCli::versionNamesLibTorch() {
  const Run r = run({"--version"});
  QCOMPARE(r.code, 0);
  QVERIFY2(r.out.startsWith("studio-train 0."), qPrintable(r.out));
  QVERIFY2(r.out.contains("LibTorch"), qPrintable(r.out));
}

void TestStudioTrainCli::malformedYamlNamesTheLine() {
  QTemporaryDir dir;
  QFile f(dir.filePath("bad.yaml"));
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write("model_name_or_path: m\ndataset: d\ntemplate qwen\noutput_dir: o\n");
  f.close();
  const Run r = run({"validate", f.fileName()});
  QCOMPARE(r.code, 2);
  QVERIFY2(r.err.contains(f.fileName() + ":3:1: malformed YAML"), qPrintable(r.err));
}

void TestStudioTrainCli::configKeysDocIsCurrent() {
  const Run r = run({"config-keys"});
  QCOMPARE(r.code, 0);
  QFile doc(QStringLiteral(STUDIO_SOURCE_DIR "/docs/config.md"));
  QVERIFY(doc.open(QIODevice::ReadOnly));
  QVERIFY2(QString::fromUtf8(doc.readAll()) == r.out,
           "docs/config.md is stale: regenerate it with build/app/studio-train config-keys > "
           "docs/config.md");
  QVERIFY(r.out.contains("| `sequence_parallel_mode` | `zigzag-ring` | zigzag-ring \\| ulysses \\| usp |"));
}

void TestStudioTrainCli::tokenizeRoundTripsThroughDecode() {
  const QString tok = QStringLiteral(STUDIO_SOURCE_DIR "/resources/demo/model");
  QProcess p;
  p.start(QStringLiteral(STUDIO_TRAIN_EXE), {"tokenize", "--tokenizer", tok});
  p.write("Hello \xe4\xb8\x96\xe7\x95\x8c!\n  two  spaces\n");
  p.closeWriteChannel();
  QVERIFY(p.waitForFinished(60000));
  QCOMPARE(p.exitCode(), 0);
  const QByteArray ids = p.readAllStandardOutput();
  QCOMPARE(ids.count('\n'), 2);
  QVERIFY2(ids.startsWith('['), ids.constData());
  QProcess d;
  d.start(QStringLiteral(STUDIO_TRAIN_EXE), {"tokenize", "--tokenizer", tok, "--decode"});
  d.write(ids);
  d.closeWriteChannel();
  QVERIFY(d.waitForFinished(60000));
  QCOMPARE(QString::fromUtf8(d.readAllStandardOutput()),
           QString::fromUtf8("Hello \xe4\xb8\x96\xe7\x95\x8c!\n  two  spaces\n"));
}

void TestStudioTrainCli::previewMarksMaskedSpans() {
  QTemporaryDir dir;
  QFile f(dir.filePath("preview.yaml"));
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write("model_name_or_path: " STUDIO_SOURCE_DIR "/resources/demo/model\n"
          "dataset: demo_sft\ndataset_dir: " STUDIO_SOURCE_DIR "/resources/demo/data\n"
          "template: qwen\ncutoff_len: 96\noutput_dir: out\n");
  f.close();
  const Run r = run({"preview", f.fileName(), "--n", "1"}, dir.path());
  QVERIFY2(r.code == 0, qPrintable(r.err));
  QVERIFY2(r.out.contains("[[<|im_start|>system"), qPrintable(r.out));
  QVERIFY2(r.out.contains("]]0 2 5 5 5<|im_end|>"), qPrintable(r.out));
  QVERIFY2(r.out.contains("2000 training samples"), qPrintable(r.out));
}

void TestStudioTrainCli::estimateJsonIsOneObject() {
  const Run r = run({"estimate", "qwen2.5-7b-sft-sp8.yaml", "--nproc", "8", "--gpu-memory", "41",
                     "--json"});
  QVERIFY2(r.code == 0, qPrintable(r.err));
  QJsonParseError error;
  const QJsonDocument doc = QJsonDocument::fromJson(r.out.toUtf8(), &error);
  QVERIFY2(doc.isObject(), qPrintable(error.errorString() + "\n" + r.out));
  const QJsonObject o = doc.object();
  double sum = 0;
  const QJsonObject bytes = o["bytes"].toObject();
  for (const char* part : {"weights", "gradients", "optimizer", "reference", "activations",
                           "logits", "sp_buffers", "zero_buffers", "optimizer_step"}) {
    QVERIFY2(bytes[part].isDouble(), part);
    sum += bytes[part].toDouble();
  }
  QCOMPARE(o["total"].toDouble(), sum);
  // The fused loss's peak at 16384 tokens per rank: 4Vh 2,179,989,504 + 2 x 2h x 16384
  // 234,881,024 + 1024-row chunks (the 1 GiB floor; the ratio gives 512) x 6V 934,281,216; it
  // needs nothing beyond the backward's working set (see tst_memory_estimate).
  const QJsonObject lc = o["long_context"].toObject();
  QCOMPARE(lc["loss_peak"].toDouble(), 3349151744.0);
  QCOMPARE(lc["loss_chunk_tokens"].toInt(), 1024);
  QCOMPARE(bytes["logits"].toDouble(), 0.0);
  // The longest cutoff_len that fits 41 GiB at SP 8, a multiple of 1024.
  QVERIFY(o["longest_cutoff_len"].toInteger() > 131072);
  QCOMPARE(o["longest_cutoff_len"].toInteger() % 1024, 0);
  QCOMPARE(o["capacity"].toDouble(), 41.0 * 1024 * 1024 * 1024);
  QCOMPARE(o["fits"].toBool(), true);
  QCOMPARE(o["sp"].toInt(), 8);
  QCOMPARE(o["world_size"].toInt(), 8);
  QCOMPARE(o["smallest_fitting_sp"].toInt(), 2);  // SP 1 needs 61.88 GiB (tst_memory_estimate)
  QCOMPARE(o["zero_stage"].toInt(), 3);
  QCOMPARE(o["model_state_bytes"].toDouble(), 0.0);  // ZeRO-3 offload: nothing resident
  QCOMPARE(o["valid_sp_sizes"].toArray(), (QJsonArray{1, 2, 4, 8}));
  QVERIFY(o["notes"].toArray().size() > 5);
}

void TestStudioTrainCli::estimateNeedsTheModelShapes() {
  QTemporaryDir dir;
  QFile f(dir.filePath("c.yaml"));
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write("model_name_or_path: no-such-model\ndataset: d\ntemplate: qwen\noutput_dir: o\n");
  f.close();
  const Run r = run({"estimate", f.fileName()}, dir.path());
  QCOMPARE(r.code, 2);
  // A bare name could be a hub id: the message says it is neither a folder nor in the cache.
  QVERIFY2(r.err.contains("model_name_or_path: warning: 'no-such-model' is no folder here"),
           qPrintable(r.err));
  QVERIFY2(r.err.contains("the estimate needs the model's shapes"), qPrintable(r.err));
  QVERIFY(r.out.isEmpty());
}

// A config naming a hub id, as LLaMA-Factory's examples do, with the model in the local Hugging
// Face cache (real safetensors from init-model in a snapshot folder, refs/main naming it):
// validate, estimate, train and chat all find it offline; with an empty cache they say which id,
// revision and folders, and nothing is downloaded.
void TestStudioTrainCli::hubIdFromTheLocalCache() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString commit(40, QLatin1Char('7'));
  const QString repo = dir.filePath("hf/hub/models--Org--Tiny-Qwen");
  const QString snapshot = repo + "/snapshots/" + commit;
  const Run init = run({"init-model", "--config", STUDIO_SOURCE_DIR "/resources/demo/model/config.json",
                        "--out", snapshot, "--seed", "7"},
                       dir.path());
  QVERIFY2(init.code == 0, qPrintable(init.err));
  for (const char* file : {"config.json", "model.safetensors", "tokenizer.json"})  // with the tokenizer
    QVERIFY2(QFile::exists(snapshot + "/" + file), file);
  QVERIFY(QDir().mkpath(repo + "/refs"));
  QFile ref(repo + "/refs/main");
  QVERIFY(ref.open(QIODevice::WriteOnly));
  ref.write(commit.toUtf8());
  ref.close();
  QFile cfg(dir.filePath("hub.yaml"));
  QVERIFY(cfg.open(QIODevice::WriteOnly));
  cfg.write("model_name_or_path: Org/Tiny-Qwen\nstage: sft\ndataset: demo_sft\n"
            "dataset_dir: " STUDIO_SOURCE_DIR "/resources/demo/data\ntemplate: qwen\n"
            "cutoff_len: 64\nmax_samples: 16\nper_device_train_batch_size: 2\nmax_steps: 2\n"
            "logging_steps: 1\nsave_steps: 1000\noutput_dir: out\n");
  cfg.close();
  // HF_HOME, as a user sets it; no HF_HUB_CACHE, so HF_HOME/hub is the cache.
  const std::map<QString, QString> env{{"HF_HOME", dir.filePath("hf")}, {"HF_HUB_CACHE", ""},
                                       {"HUGGINGFACE_HUB_CACHE", ""}, {"TRANSFORMERS_CACHE", ""}};

  Run r = runEnv({"validate", "hub.yaml"}, dir.path(), env);
  QVERIFY2(r.code == 0, qPrintable(r.out + r.err));
  r = runEnv({"estimate", "hub.yaml", "--json"}, dir.path(), env);
  QVERIFY2(r.code == 0, qPrintable(r.err));
  QVERIFY(QJsonDocument::fromJson(r.out.toUtf8()).isObject());
  r = runEnv({"train", "hub.yaml"}, dir.path(), env);
  QVERIFY2(r.code == 0, qPrintable(r.err.right(3000)));
  QFile events(dir.filePath("out/events.jsonl"));
  QVERIFY(events.open(QIODevice::ReadOnly));
  const QByteArray lines = events.readAll();
  QCOMPARE(lines.count("\"event\":\"step\""), 2);
  // The run records the snapshot it loaded.
  QVERIFY2(lines.contains(snapshot.toUtf8()), lines.left(2000).constData());
  r = runEnv({"chat", "--model", "Org/Tiny-Qwen", "--template", "qwen", "--prompt", "Hi",
              "--max-new-tokens", "3"},
             dir.path(), env);
  QVERIFY2(r.code == 0, qPrintable(r.err));

  // An empty cache: train refuses at the key, naming the id, the revision and the folder.
  const std::map<QString, QString> empty{{"HF_HOME", dir.filePath("nothing")}, {"HF_HUB_CACHE", ""},
                                         {"HUGGINGFACE_HUB_CACHE", ""}, {"TRANSFORMERS_CACHE", ""}};
  r = runEnv({"train", "hub.yaml"}, dir.path(), empty);
  QCOMPARE(r.code, 2);  // invalid config
  QVERIFY2(r.err.contains("hub.yaml:1:21: model_name_or_path: 'Org/Tiny-Qwen' is no folder here") &&
               r.err.contains("not in the local Hugging Face cache at revision main") &&
               r.err.contains(dir.filePath("nothing/hub/models--Org--Tiny-Qwen") + ": not there"),
           qPrintable(r.err));
}

// LLaMA-Factory v1 files (tests/fixtures/configs/v1, after its examples/v1), validated as users run
// `studio-train validate FILE --nproc 8` from the folder their relative paths start at.
void TestStudioTrainCli::llamaFactoryV1Files_data() {
  QTest::addColumn<QString>("file");
  QTest::addColumn<int>("code");
  QTest::addColumn<QString>("fragment");  // in stdout (valid) or stderr
  QTest::newRow("fsdp2") << "train_full_fsdp2.yaml" << 0
                         << "valid: LLaMA-Factory v1, stage sft, world size 8 (8 x 1), sequence "
                            "parallel 1, cutoff_len 512, model Qwen2ForCausalLM";
  QTest::newRow("deepspeed") << "train_full_deepspeed.yaml" << 0 << "valid: LLaMA-Factory v1";
  QTest::newRow("ulysses cp") << "train_full_ulysses_cp.yaml" << 0
                              << "sequence parallel 2 (ulysses), cutoff_len 2048";
  QTest::newRow("padding_free") << "train_full_padding_free.yaml" << 0 << "valid:";
  QTest::newRow("dpo") << "train_full_dpo.yaml" << 0 << "valid: LLaMA-Factory v1, stage dpo";
  QTest::newRow("lora") << "train_lora_sft.yaml" << 0 << "valid: LLaMA-Factory v1, stage sft";
  QTest::newRow("freeze") << "train_freeze_sft.yaml" << 0 << "valid: LLaMA-Factory v1, stage sft";
  QTest::newRow("qlora refused")
      << "train_qlora.yaml" << 2
      << "train_qlora.yaml:7:9: quant_config: QLoRA from a v1 quant_config block is not read yet";
  QTest::newRow("muon refused") << "train_full_muon.yaml" << 2
                                << "train_full_muon.yaml:8:9: optim_config: studio-train trains "
                                   "with AdamW; 'muon' is not available";
  QTest::newRow("global batch") << "train_bad_batch.yaml" << 2
                                << "train_bad_batch.yaml:8:20: global_batch_size: 20 is not a "
                                   "multiple of 4 data-parallel ranks";
  QTest::newRow("cp_size") << "train_bad_cp.yaml" << 2
                           << "train_bad_cp.yaml:5:10: cp_size: 3 does not divide the world size 8";
  QTest::newRow("hub dataset") << "train_hub_dataset.yaml" << 2
                               << "data/hub.yaml:1:1: orca_pairs.source: hf_hub datasets are "
                                  "downloaded by LLaMA-Factory, never by studio-train";
  // Issue 35's reproducers.
  QTest::newRow("global batch past int32")
      << "train_huge_batch.yaml" << 2
      << "train_huge_batch.yaml:5:20: global_batch_size: 9223372036854775807 is too large (at "
         "most 2147483647)";
  QTest::newRow("deepspeed conflict in v1 spelling")
      << "train_deepspeed_conflict.yaml" << 2
      << "train_micro_batch_size_per_gpu is 4 but micro_batch_size is 2 (line 7)";
  QTest::newRow("dataset yaml with merge keys") << "train_merged_datasets.yaml" << 0
                                                << "valid: LLaMA-Factory v1";
}

void TestStudioTrainCli::llamaFactoryV1Files() {
  QFETCH(QString, file);
  QFETCH(int, code);
  QFETCH(QString, fragment);
  const Run r = run({"validate", file, "--nproc", "8"}, QStringLiteral(STUDIO_TEST_FIXTURES_DIR "/configs/v1"));
  QCOMPARE(r.code, code);
  QVERIFY2((code == 0 ? r.out : r.err).contains(fragment), qPrintable(r.out + r.err));
}

void TestStudioTrainCli::llamaFactoryV1PrintConfigKeepsTheForm() {
  const QString dir = QStringLiteral(STUDIO_TEST_FIXTURES_DIR "/configs/v1");
  const Run r = run({"print-config", "train_full_ulysses_cp.yaml", "--nproc", "8"}, dir);
  QVERIFY2(r.code == 0, qPrintable(r.err));
  for (const char* line : {"model: ../../../../resources/demo/model\n", "cp_size: 2\n",
                           "cp_mode: ulysses\n", "micro_batch_size: 1\n",
                           "flash_attn: flash_attention_2\n", "dist_timeout: 18000\n",
                           "template: chatml\n"})
    QVERIFY2(r.out.contains(line), qPrintable(line + ("in\n" + r.out)));
  QVERIFY2(!r.out.contains("sequence_parallel_size") && !r.out.contains("model_name_or_path"),
           qPrintable(r.out));
  const auto back = studio::load_config_string(r.out.toStdString());
  QVERIFY(back.config.is_v1());
  QCOMPARE(back.config.sequence_parallel_size, int64_t{2});
}

void TestStudioTrainCli::llamaFactoryV1PreviewReadsTheDatasetYaml() {
  const Run r = run({"preview", "train_full_fsdp2.yaml", "--n", "3"},
                    QStringLiteral(STUDIO_TEST_FIXTURES_DIR "/configs/v1"));
  QVERIFY2(r.code == 0, qPrintable(r.err));
  // 4 alpaca rows, a two-answer conversation as two samples, two v1 message rows.
  QVERIFY2(r.out.contains("8 training samples"), qPrintable(r.out));
  QVERIFY2(r.out.contains("Name three primes below ten."), qPrintable(r.out));
}

// A v1 file as LLaMA-Factory's examples write one: a hub id (here in a local Hugging Face cache)
// whose tokenizer carries Qwen3's kind of chat template, its dataset YAML, global_batch_size.
// studio-train chooses template qwen3, accumulates 2 micro-batches and trains.
void TestStudioTrainCli::llamaFactoryV1TrainsAsWritten() {
  QTemporaryDir dir;
  QVERIFY(dir.isValid());
  const QString src = dir.filePath("qwen3-src");
  QVERIFY(QDir().mkpath(src));
  QFile demo(STUDIO_SOURCE_DIR "/resources/demo/model/config.json");
  QVERIFY(demo.open(QIODevice::ReadOnly));
  QJsonObject config = QJsonDocument::fromJson(demo.readAll()).object();
  config["architectures"] = QJsonArray{"Qwen3ForCausalLM"};
  config["model_type"] = "qwen3";
  config["head_dim"] = 32;
  config["attention_bias"] = false;
  QFile out(src + "/config.json");
  QVERIFY(out.open(QIODevice::WriteOnly));
  out.write(QJsonDocument(config).toJson());
  out.close();
  QVERIFY(QFile::copy(STUDIO_SOURCE_DIR "/resources/demo/model/tokenizer.json", src + "/tokenizer.json"));
  QJsonObject tokenizerConfig{{"eos_token", "<|im_end|>"}, {"pad_token", "<|endoftext|>"}};
  tokenizerConfig["chat_template"] =
      "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + "
      "message.content + '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- "
      "'<|im_start|>assistant\\n' }}{%- if enable_thinking is defined and enable_thinking is "
      "false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}";
  QFile tc(src + "/tokenizer_config.json");
  QVERIFY(tc.open(QIODevice::WriteOnly));
  tc.write(QJsonDocument(tokenizerConfig).toJson());
  tc.close();
  const QString commit(40, QLatin1Char('3'));
  const QString repo = dir.filePath("hf/hub/models--Org--Tiny-Qwen3");
  const Run init = run({"init-model", "--config", src + "/config.json", "--out",
                        repo + "/snapshots/" + commit, "--seed", "3"}, dir.path());
  QVERIFY2(init.code == 0, qPrintable(init.err));
  QVERIFY(QDir().mkpath(repo + "/refs"));
  QFile ref(repo + "/refs/main");
  QVERIFY(ref.open(QIODevice::WriteOnly));
  ref.write(commit.toUtf8());
  ref.close();
  // The dataset YAML and its files, at the paths it names from the working directory.
  QVERIFY(QDir().mkpath(dir.filePath("data")));
  for (const char* f : {"sft.yaml", "identity.json", "chat.jsonl", "messages.jsonl"})
    QVERIFY(QFile::copy(QStringLiteral(STUDIO_TEST_FIXTURES_DIR "/configs/v1/data/") + f,
                        dir.filePath("data/") + f));
  QFile cfg(dir.filePath("v1.yaml"));
  QVERIFY(cfg.open(QIODevice::WriteOnly));
  cfg.write("model: Org/Tiny-Qwen3\nmodel_class: llm\ntrain_dataset: data/sft.yaml\n"
            "output_dir: out\nmicro_batch_size: 2\nglobal_batch_size: 4\ncutoff_len: 96\n"
            "max_steps: 2\n");
  cfg.close();
  const std::map<QString, QString> env{{"HF_HOME", dir.filePath("hf")}, {"HF_HUB_CACHE", ""},
                                       {"HUGGINGFACE_HUB_CACHE", ""}, {"TRANSFORMERS_CACHE", ""}};
  const Run r = runEnv({"train", "v1.yaml"}, dir.path(), env);
  QVERIFY2(r.code == 0, qPrintable(r.err.right(3000)));
  QVERIFY2(r.err.contains("v1.yaml:1:8: model: note: chat template qwen3: the model's chat "
                          "template is Qwen3 (thinking switch)'s"),
           qPrintable(r.err.left(3000)));
  QFile events(dir.filePath("out/events.jsonl"));
  QVERIFY(events.open(QIODevice::ReadOnly));
  const QByteArray lines = events.readAll();
  QCOMPARE(lines.count("\"event\":\"step\""), 2);
  QVERIFY2(lines.contains("\"gradient_accumulation_steps\":2") &&
               lines.contains("\"template\":\"qwen3\""),
           lines.left(3000).constData());
}

QTEST_MAIN(TestStudioTrainCli)
#include "tst_studio_train_cli.moc"
