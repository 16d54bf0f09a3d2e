#pragma once
// What the end-to-end training tests (tst_sp_equivalence, tst_zero) share: running studio-train
// with every collective verified, reading a run's events, and comparing two saved models.
#include <QtCore/QDir>
#include <QtCore/QFile>
#include <QtCore/QFileInfo>
#include <QtCore/QJsonDocument>
#include <QtCore/QJsonObject>
#include <QtCore/QProcess>
#include <QtCore/QString>
#include <QtCore/QStringList>

#include <algorithm>
#include <cmath>
#include <vector>

#include "studio/base/json_file.h"
#include "studio/trainer/hf_checkpoint.h"

namespace train_runs {

struct Run {
  int code = -1;
  QString err;
};

// MODEL as bitsandbytes saves it in 4 bits (NF4, double quantization) in OUT: transformers
// quantizes and saves it (tests/reference/bnb_quantize_model.py with STUDIO_PYTHON). Returns OUT,
// or "" with the script's reason in `error`.
inline QString bnb_4bit_copy(const QString& model, const QString& out, QString* error = nullptr) {
  QProcess p;
  p.start(QStringLiteral(STUDIO_PYTHON),
          {QStringLiteral(STUDIO_SOURCE_DIR "/tests/reference/bnb_quantize_model.py"), "--model",
           model, "--out", out, "--type", "nf4", "--double"});
  if (p.waitForFinished(300000) && p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0)
    return out;
  if (error) *error = QString::fromUtf8(p.readAllStandardError());
  return {};
}

// STUDIO_TRAIN_EXE with `args`; STUDIO_VERIFY_COLLECTIVES=1, so that ranks reaching different
// operations fail with both named instead of exchanging mismatched buffers.
inline Run run(const QStringList& args, int timeout_ms = 300000) {
  QProcess p;
  auto env = QProcessEnvironment::systemEnvironment();
  env.insert("STUDIO_VERIFY_COLLECTIVES", "1");
  p.setProcessEnvironment(env);
  p.setProcessChannelMode(QProcess::SeparateChannels);
  p.start(QStringLiteral(STUDIO_TRAIN_EXE), args);
  if (!p.waitForFinished(timeout_ms)) {
    p.kill();
    p.waitForFinished();
    return {-1, "timed out: " + QString::fromUtf8(p.readAllStandardError())};
  }
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
          QString::fromUtf8(p.readAllStandardError())};
}

// A tiny Qwen2-shaped model with the demo tokenizer and random weights.
struct TinyModel {
  QString name = "model";  // DIR/NAME, from DIR/NAME-src/config.json
  int layers = 2;
  int hidden = 32;
  int heads = 4;
  int kv_heads = 2;
  bool tied = false;  // tie_word_embeddings
  int seed = 5;
  // config.json entries that replace or join the Qwen2 defaults (another architecture's keys).
  QJsonObject overrides;
};
// Creates it in `dir`; its path or "" on failure.
inline QString make_tiny_model(const QString& dir, const TinyModel& m) {
  const QString source = QStringLiteral(STUDIO_SOURCE_DIR);
  const QString src = dir + "/" + m.name + "-src";
  QDir().mkpath(src);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    QFile::copy(source + "/resources/demo/model/" + f, src + "/" + f);
  QFile cfg(src + "/config.json");
  if (!cfg.open(QIODevice::WriteOnly)) return {};
  QJsonObject config = QJsonDocument::fromJson(QStringLiteral(R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
    "hidden_act": "silu", "hidden_size": %1, "intermediate_size": 64, "num_hidden_layers": %2,
    "num_attention_heads": %3, "num_key_value_heads": %4, "vocab_size": 4288,
    "max_position_embeddings": 512, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
    "tie_word_embeddings": %5, "bos_token_id": 4256, "eos_token_id": 4258,
    "torch_dtype": "float32"})")
                .arg(m.hidden)
                .arg(m.layers)
                .arg(m.heads)
                .arg(m.kv_heads)
                .arg(m.tied ? "true" : "false")
                .toUtf8()).object();
  for (auto it = m.overrides.begin(); it != m.overrides.end(); ++it) config[it.key()] = it.value();
  cfg.write(QJsonDocument(config).toJson());
  cfg.close();
  const QString out = dir + "/" + m.name;
  const Run r = run({"init-model", "--config", src + "/config.json", "--out", out, "--seed",
                     QString::number(m.seed)});
  return r.code == 0 ? out : QString();
}

// A JSON file's object; empty when it cannot be read.
inline QJsonObject read_json(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QJsonDocument::fromJson(f.readAll()).object();
}

// Writes a YAML config at `path`: `lines` ("key: value"), each replaced by the entry of `extra`
// with the same key, and the other entries of `extra` appended. Returns the path or "".
inline QString write_yaml(const QString& path, QStringList lines, const QStringList& extra) {
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly)) return {};
  for (const auto& e : extra) {
    const QString key = e.section(':', 0, 0) + ":";
    bool replaced = false;
    for (auto& l : lines)
      if (l.startsWith(key)) l = e, replaced = true;
    if (!replaced) lines << e;
  }
  f.write((lines.join('\n') + '\n').toUtf8());
  return path;
}

// Every event line of a run folder, in order. A diverged step's values are written as Python
// writes them (NaN, Infinity), which QJsonDocument does not read: the lines go through the
// studio's reader, and such a value is null here.
inline std::vector<QJsonObject> events(const QString& dir) {
  std::vector<QJsonObject> out;
  QFile f(dir + "/events.jsonl");
  if (!f.open(QIODevice::ReadOnly)) return out;
  for (const QByteArray& line : f.readAll().split('\n')) {
    if (line.trimmed().isEmpty()) continue;
    nlohmann::json j;
    studio::JsonSyntaxError error;
    if (!studio::parse_json_text(std::string_view(line.constData(), std::size_t(line.size())), j, error))
      j = nlohmann::json::object();
    out.push_back(QJsonDocument::fromJson(QByteArray::fromStdString(j.dump())).object());
  }
  return out;
}

// The SP keys of a run over `nproc` processes with SP size `sp` in `mode` (usp: Ulysses degree
// 2), and the per-rank batch that keeps a single-process reference's 2 rows per micro-batch.
inline QStringList sp_keys(const QString& mode, int nproc, int sp) {
  return {QStringLiteral("sequence_parallel_size: %1").arg(sp), "sequence_parallel_mode: " + mode,
          QStringLiteral("sequence_parallel_ulysses_degree: %1").arg(mode == "usp" ? 2 : 1),
          QStringLiteral("sequence_parallel_ring_degree: %1").arg(mode == "usp" ? sp / 2 : 1),
          QStringLiteral("per_device_train_batch_size: %1").arg(2 / (nproc / sp))};
}

// The loss of every step event of a run folder, in order (NaN where it is null: a diverged step).
inline std::vector<double> step_losses(const QString& dir) {
  std::vector<double> losses;
  for (const auto& e : events(dir))
    if (e["event"].toString() == "step")
      losses.push_back(e["loss"].isNull() ? std::nan("") : e["loss"].toDouble());
  return losses;
}

// max |a - b| / max |a| over the whole parameter vector of two saved models (the relative error
// in the infinity norm); infinite when b lacks a tensor of a.
// A reward model's value head (value_head.safetensors, stage rm) is compared too: present in one
// folder only, the error is infinite.
// The largest |lora_B| of an adapter folder (0: the adapter is still PEFT's no-op start).
inline double adapter_b_max(const QString& dir) {
  const auto f = studio::trainer::SafetensorsFile::open((dir + "/adapter_model.safetensors").toStdString());
  double m = 0;
  for (const auto& name : f.names())
    if (name.find("lora_B") != std::string::npos)
      m = std::max(m, f.tensor(name).abs().max().item<double>());
  return m;
}

// Adapter folders (finetuning_type lora) compare their adapter files.
inline double max_relative_param_error(const QString& a_dir, const QString& b_dir) {
  if (QFileInfo::exists(a_dir + "/adapter_model.safetensors")) {
    const auto fa = studio::trainer::SafetensorsFile::open((a_dir + "/adapter_model.safetensors").toStdString());
    if (!QFileInfo::exists(b_dir + "/adapter_model.safetensors")) return INFINITY;
    const auto fb = studio::trainer::SafetensorsFile::open((b_dir + "/adapter_model.safetensors").toStdString());
    double diff = 0, scale = 0;
    for (const auto& name : fa.names()) {
      if (!fb.has(name)) return INFINITY;
      auto ta = fa.tensor(name).to(torch::kDouble), tb = fb.tensor(name).to(torch::kDouble);
      diff = std::max(diff, (ta - tb).abs().max().item<double>());
      scale = std::max(scale, ta.abs().max().item<double>());
    }
    return diff / std::max(scale, 1e-30);
  }
  auto a = studio::trainer::CheckpointReader::open(a_dir.toStdString());
  auto b = studio::trainer::CheckpointReader::open(b_dir.toStdString());
  double diff = 0, scale = 0;
  auto compare = [&](const torch::Tensor& x, const torch::Tensor& y) {
    auto ta = x.to(torch::kDouble), tb = y.to(torch::kDouble);
    diff = std::max(diff, (ta - tb).abs().max().item<double>());
    scale = std::max(scale, ta.abs().max().item<double>());
  };
  for (const auto& name : a.names()) {
    if (!b.has(name)) return INFINITY;
    compare(a.tensor(name), b.tensor(name));
  }
  const QString head = QString::fromLatin1(studio::trainer::kValueHeadFile);
  const bool ha = QFileInfo::exists(a_dir + "/" + head), hb = QFileInfo::exists(b_dir + "/" + head);
  if (ha != hb) return INFINITY;
  if (ha) {
    const auto fa = studio::trainer::SafetensorsFile::open((a_dir + "/" + head).toStdString());
    const auto fb = studio::trainer::SafetensorsFile::open((b_dir + "/" + head).toStdString());
    for (const auto& name : fa.names()) {
      if (!fb.has(name)) return INFINITY;
      compare(fa.tensor(name), fb.tensor(name));
    }
  }
  return diff / std::max(scale, 1e-30);
}

}  // namespace train_runs
