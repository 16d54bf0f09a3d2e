// The decoders against Hugging Face transformers' own model classes (tests/reference/hf_logits.py,
// run by the project's Python environment, STUDIO_PYTHON): freshly initialised checkpoints of every
// architecture and RoPE scaling kind must give the same logits (< 1e-4 in fp32); the folders the
// engine saves (its final model and its checkpoints, bf16 and fp32) must load in transformers with
// every tensor used and give the logits our engine gives; and a saved checkpoint must load back
// bit-identically.
#include <QtTest>

#include <filesystem>

#include "studio/config/model_info.h"
#include "studio/trainer/hf_checkpoint.h"
#include "studio/trainer/model_folder.h"
#include "studio/trainer/train_loop.h"

using namespace studio::trainer;

namespace {

const QString kModels = QStringLiteral(STUDIO_TEST_DATA_DIR "/models");
const QString kScript = QStringLiteral(STUDIO_SOURCE_DIR "/tests/reference/hf_logits.py");
const std::vector<int64_t> kIds = {1, 17, 5, 63, 42, 42, 3, 60, 11, 0, 58, 23, 7, 50, 31, 2,
                                   61, 9, 37, 14, 29, 33, 45, 40};

torch::Tensor reference_logits(const QString& model_dir) {
  QStringList ids;
  for (int64_t id : kIds) ids << QString::number(id);
  QProcess p;
  p.start(QStringLiteral(STUDIO_PYTHON), {kScript, model_dir, ids.join(',')});
  if (!p.waitForFinished(180000) || p.exitCode() != 0) {
    qWarning("%s", p.readAllStandardError().constData());
    return {};
  }
  const auto doc = QJsonDocument::fromJson(p.readAllStandardOutput());
  const auto rows = doc.object().value("logits").toArray();
  auto out = torch::empty({rows.size(), rows.at(0).toArray().size()}, torch::kDouble);
  for (int r = 0; r < rows.size(); ++r) {
    const auto row = rows.at(r).toArray();
    for (int c = 0; c < row.size(); ++c) out[r][c] = row.at(c).toDouble();
  }
  return out;
}

// init_model_folder leaves every norm at its identity (1, Gemma's 0), where a norm applied the
// wrong way round can still agree: the folder's norm weights are redrawn around it.
void perturb_norms(const std::string& dir) {
  auto lm = load_model_folder(dir);
  torch::NoGradGuard no_grad;
  torch::manual_seed(23);
  auto state = lm->hf_state();
  for (auto& [name, p] : state)
    if (name.find("norm") != std::string::npos) p.add_(torch::randn_like(p) * 0.3);
  HfSaveOptions opt;
  opt.dtype = torch::kFloat;
  opt.source_dir = dir;
  const std::string tmp = dir + ".perturbed";
  save_hf_model(tmp, state, opt);
  std::filesystem::remove_all(dir);
  std::filesystem::rename(tmp, dir);
}

}  // namespace

class TestReferenceLogits : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase();
  void matchesIndependentImplementation_data();
  void matchesIndependentImplementation();
  void savedCheckpointLoadsBitIdentically();
  void engineOutputLoadsInTransformers_data();
  void engineOutputLoadsInTransformers();
};

void TestReferenceLogits::initTestCase() {
  QProcess p;
  p.start(QStringLiteral(STUDIO_PYTHON), {"-c", "import torch, transformers"});
  QVERIFY2(p.waitForFinished(120000) && p.exitCode() == 0,
           qPrintable(QStringLiteral(STUDIO_PYTHON " cannot import torch and transformers: run "
                                     "scripts/setup.sh (the project's Python environment): ") +
                      QString::fromUtf8(p.readAllStandardError())));
}

void TestReferenceLogits::matchesIndependentImplementation_data() {
  QTest::addColumn<QString>("model");
  QTest::newRow("llama + llama3 rope + biases") << "tiny-llama";
  QTest::newRow("mistral, tied") << "tiny-mistral";
  QTest::newRow("qwen2, tied") << "tiny-qwen2";
  QTest::newRow("qwen2 + linear rope") << "tiny-qwen2-linear";
  QTest::newRow("qwen3 + yarn + head_dim") << "tiny-qwen3-yarn";
  QTest::newRow("phi-3: fused qkv/gate_up, partial longrope (long factors), window 9")
      << "tiny-phi3-longrope";
  QTest::newRow("phi-4: fused, full rotary") << "tiny-phi4";
  QTest::newRow("glm: interleaved half rotary, q/k/v biases") << "tiny-glm";
  QTest::newRow("glm-4: + sandwich norms") << "tiny-glm4";
  QTest::newRow("gemma-2: soft caps, window 6 on alternate layers, tied scaled embeddings")
      << "tiny-gemma2";
  QTest::newRow("gemma-3: qk norms, window 5, local rope base, linear-scaled global rope")
      << "tiny-gemma3";
}

void TestReferenceLogits::matchesIndependentImplementation() {
  QFETCH(QString, model);
  QTemporaryDir tmp;
  const std::string dir = tmp.filePath("m").toStdString();
  init_model_folder((kModels + "/" + model + "/config.json").toStdString(), dir, 11);
  perturb_norms(dir);
  auto lm = load_model_folder(dir);
  torch::NoGradGuard no_grad;
  const auto n = static_cast<int64_t>(kIds.size());
  auto ours = lm->logits(torch::tensor(kIds, torch::kLong).unsqueeze(0),
                         torch::arange(n, torch::kLong).unsqueeze(0))[0].to(torch::kDouble);
  auto ref = reference_logits(QString::fromStdString(dir));
  QVERIFY2(ref.defined(), "the reference implementation failed");
  QCOMPARE(ref.sizes(), ours.sizes());
  const double err = (ours - ref).abs().max().item<double>();
  const double scale = ref.abs().max().item<double>();
  QVERIFY2(err <= 1e-4 * std::max(1.0, scale),
           qPrintable(QString("max |diff| %1 (logits up to %2)").arg(err).arg(scale)));
}

void TestReferenceLogits::savedCheckpointLoadsBitIdentically() {
  QTemporaryDir tmp;
  const std::string a = tmp.filePath("a").toStdString(), b = tmp.filePath("b").toStdString();
  init_model_folder((kModels + "/tiny-qwen3-yarn/config.json").toStdString(), a, 5);
  auto first = load_model_folder(a);
  HfSaveOptions opt;
  opt.dtype = torch::kFloat;
  opt.source_dir = a;
  save_hf_model(b, first->hf_state(), opt);
  auto second = load_model_folder(b);
  auto sa = first->hf_state(), sb = second->hf_state();
  QCOMPARE(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    QCOMPARE(sa[i].first, sb[i].first);
    QVERIFY2(torch::equal(sa[i].second, sb[i].second), sa[i].first.c_str());
  }
  auto ids = torch::tensor(kIds, torch::kLong).unsqueeze(0);
  auto pos = torch::arange(static_cast<int64_t>(kIds.size()), torch::kLong).unsqueeze(0);
  QVERIFY(torch::equal(first->logits(ids, pos), second->logits(ids, pos)));
}

// A short SFT run of the engine saves checkpoint-1, checkpoint-2 and the final model; each folder,
// as written, must load in transformers (hf_logits.py refuses missing or unused tensors) and give
// our logits for the folder's weights. bf16 output is compared in fp32 compute on both sides.
void TestReferenceLogits::engineOutputLoadsInTransformers_data() {
  QTest::addColumn<QString>("model");
  QTest::addColumn<bool>("bf16");
  QTest::newRow("qwen2, fp32 run") << "tiny-qwen2" << false;
  QTest::newRow("llama + llama3 rope, bf16 run") << "tiny-llama" << true;
  QTest::newRow("qwen3 + yarn, fp32 run") << "tiny-qwen3-yarn" << false;
  QTest::newRow("phi-3 longrope, fp32 run") << "tiny-phi3-longrope" << false;
  QTest::newRow("glm-4, bf16 run") << "tiny-glm4" << true;
  QTest::newRow("gemma-2, fp32 run") << "tiny-gemma2" << false;
  QTest::newRow("gemma-3, bf16 run") << "tiny-gemma3" << true;
}

void TestReferenceLogits::engineOutputLoadsInTransformers() {
  QFETCH(QString, model);
  QFETCH(bool, bf16);
  namespace fs = std::filesystem;
  QTemporaryDir tmp;
  const std::string src = tmp.filePath("src").toStdString();
  init_model_folder((kModels + "/" + model + "/config.json").toStdString(), src, 3,
                    bf16 ? torch::kBFloat16 : torch::kFloat);
  TrainInputs in;
  in.model_dir = src;
  std::string error;
  in.model = *studio::read_model_info(src, error);
  torch::manual_seed(4);
  for (int i = 0; i < 4; ++i) {
    auto ids = torch::randint(3, 60, {12}, torch::kLong);
    TokenizedSample sample;
    sample.input_ids.assign(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + 12);
    sample.labels = sample.input_ids;
    in.train.push_back(sample);
  }
  auto& c = in.config;
  c.output_dir = tmp.filePath("run").toStdString();
  c.learning_rate = 1e-2;
  c.max_steps = 2;
  c.save_steps = 1;
  c.logging_steps = 1;
  c.per_device_train_batch_size = 2;
  c.bf16 = bf16;
  const TrainResult r = Trainer(in).run();
  QCOMPARE(QString::fromStdString(r.final_state), QStringLiteral("finished"));

  for (const std::string sub : {"checkpoint-1", "checkpoint-2", ""}) {
    const std::string dir = (fs::path(c.output_dir) / sub).string();
    QVERIFY2(fs::exists(fs::path(dir) / "config.json"), dir.c_str());
    auto lm = load_model_folder(dir);  // fp32 compute on our side too
    torch::NoGradGuard no_grad;
    const auto n = static_cast<int64_t>(kIds.size());
    auto ours = lm->logits(torch::tensor(kIds, torch::kLong).unsqueeze(0),
                           torch::arange(n, torch::kLong).unsqueeze(0))[0].to(torch::kDouble);
    auto ref = reference_logits(QString::fromStdString(dir));
    QVERIFY2(ref.defined(), qPrintable("transformers could not load " + QString::fromStdString(dir)));
    QCOMPARE(ref.sizes(), ours.sizes());
    const double err = (ours - ref).abs().max().item<double>();
    const double scale = ref.abs().max().item<double>();
    QVERIFY2(err <= 1e-4 * std::max(1.0, scale),
             qPrintable(QString("%1: max |diff| %2 (logits up to %3)")
                            .arg(QString::fromStdString(dir)).arg(err).arg(scale)));
  }
}

QTEST_MAIN(TestReferenceLogits)
#include "tst_reference_logits.moc"
