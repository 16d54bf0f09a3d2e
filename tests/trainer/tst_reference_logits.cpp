// The decoders against an independent implementation (tests/reference/decoder_reference.py,
// Debian's python3-torch): freshly initialised checkpoints of every architecture and RoPE
// scaling kind must give the same logits, and a saved checkpoint must load back bit-identically.
#include <QtTest>

#include "studio/trainer/hf_checkpoint.h"
#include "studio/trainer/model_folder.h"

using namespace studio::trainer;

namespace {

const QString kModels = QStringLiteral(STUDIO_TEST_DATA_DIR "/models");
const QString kScript = QStringLiteral(STUDIO_SOURCE_DIR "/tests/reference/decoder_reference.py");
const std::vector<int64_t> kIds = {1, 17, 5, 63, 42, 42, 3, 60, 11, 0, 58, 23, 7, 50, 31, 2,
                                   61, 9, 37, 14, 29, 33, 45, 40};

torch::Tensor reference_logits(const QString& model_dir) {
  QStringList ids;
  for (int64_t id : kIds) ids << QString::number(id);
  QProcess p;
  p.start("/usr/bin/python3", {kScript, model_dir, ids.join(',')});
  if (!p.waitForFinished(120000) || p.exitCode() != 0) {
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

}  // namespace

class TestReferenceLogits : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase();
  void matchesIndependentImplementation_data();
  void matchesIndependentImplementation();
  void savedCheckpointLoadsBitIdentically();
};

void TestReferenceLogits::initTestCase() {
  QProcess p;
  p.start("/usr/bin/python3", {"-c", "import torch"});
  QVERIFY2(p.waitForFinished(60000) && p.exitCode() == 0,
           "/usr/bin/python3 cannot import torch: run scripts/setup.sh (installs python3-torch)");
}

void TestReferenceLogits::matchesIndependentImplementation_data() {
  QTest::addColumn<QString>("model");
  QTest::newRow("llama + llama3 rope + biases") << "tiny-llama";
  QTest::newRow("mistral, tied") << "tiny-mistral";
  QTest::newRow("qwen2, tied") << "tiny-qwen2";
  QTest::newRow("qwen2 + linear rope") << "tiny-qwen2-linear";
  QTest::newRow("qwen3 + yarn + head_dim") << "tiny-qwen3-yarn";
}

void TestReferenceLogits::matchesIndependentImplementation() {
  QFETCH(QString, model);
  QTemporaryDir tmp;
  const std::string dir = tmp.filePath("m").toStdString();
  init_model_folder((kModels + "/" + model + "/config.json").toStdString(), dir, 11);
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

QTEST_MAIN(TestReferenceLogits)
#include "tst_reference_logits.moc"
