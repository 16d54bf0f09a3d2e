// The decoders against Hugging Face transformers' own model classes (tests/reference/hf_logits.py,
// run by the project's Python environment, STUDIO_PYTHON): freshly initialised checkpoints of every
// architecture and RoPE scaling kind must give the same logits (< 1e-4 in fp32); the folders the
// engine saves (its final model and its checkpoints, bf16 and fp32) must load in transformers with
// every tensor used and give the logits our engine gives; and a saved checkpoint must load back
// bit-identically. The mixture-of-experts decoders' training loss with the auxiliary
// load-balancing loss, and its gradients, must be transformers' (tests/reference/hf_moe_loss.py).
#include <QtTest>

#include <filesystem>
#include <map>
#include <utility>
#include <vector>

#include "studio/model_facts/model_info.h"
#include "studio/trainer/batching/batch.h"
#include "studio/trainer/hf_checkpoint.h"
#include "studio/trainer/loss.h"
#include "studio/trainer/model_folder.h"
#include "studio/trainer/train_loop.h"

using namespace studio::trainer;

namespace {

const QString kModels = QStringLiteral(STUDIO_TEST_FIXTURES_DIR "/models");
const QString kScript = QStringLiteral(STUDIO_SOURCE_DIR "/tests/reference/hf_logits.py");
const std::vector<int64_t> kIds = {1, 17, 5, 63, 42, 42, 3, 60, 11, 0, 58, 23, 7, 50, 31, 2,
                                   61, 9, 37, 14, 29, 33, 45, 40};

// transformers' logits of kIds for each folder of `model_dirs`, in one start of Python (several
// seconds each). A folder it could not answer is left out, its reason in `errors`.
std::map<QString, torch::Tensor> reference_logits(const QStringList& model_dirs,
                                                  std::map<QString, QString>& errors) {
  QStringList ids;
  for (int64_t id : kIds) ids << QString::number(id);
  QProcess p;
  p.start(QStringLiteral(STUDIO_PYTHON), QStringList{kScript} + model_dirs + QStringList{ids.join(',')});
  // Within the test's 900 s even for the 13 architectures (one takes a few seconds here).
  const bool finished = p.waitForFinished(60000 + 30000 * int(model_dirs.size()));
  const QString stderr_text = QString::fromUtf8(p.readAllStandardError());
  std::map<QString, torch::Tensor> out;
  for (const QByteArray& line : p.readAllStandardOutput().split('\n')) {
    const QJsonObject answer = QJsonDocument::fromJson(line).object();
    const QString dir = answer.value("dir").toString();
    if (dir.isEmpty()) continue;
    if (answer.contains("error")) {
      errors[dir] = answer.value("error").toString();
      continue;
    }
    const auto rows = answer.value("logits").toArray();
    auto t = torch::empty({rows.size(), rows.at(0).toArray().size()}, torch::kDouble);
    for (int r = 0; r < rows.size(); ++r) {
      const auto row = rows.at(r).toArray();
      for (int c = 0; c < row.size(); ++c) t[r][c] = row.at(c).toDouble();
    }
    out[dir] = t;
  }
  for (const QString& dir : model_dirs)
    if (!out.count(dir) && !errors.count(dir))
      errors[dir] = finished ? "no answer: " + stderr_text.right(2000) : "timed out";
  return out;
}

// The models whose freshly initialised folders must give transformers' logits: (row, fixture).
const std::vector<std::pair<const char*, const char*>> kIndependent = {
    {"llama + llama3 rope + biases", "tiny-llama"},
    {"mistral, tied", "tiny-mistral"},
    {"qwen2, tied", "tiny-qwen2"},
    {"qwen2 + linear rope", "tiny-qwen2-linear"},
    {"qwen3 + yarn + head_dim", "tiny-qwen3-yarn"},
    {"phi-3: fused qkv/gate_up, partial longrope (long factors), window 9", "tiny-phi3-longrope"},
    {"phi-4: fused, full rotary", "tiny-phi4"},
    {"glm: interleaved half rotary, q/k/v biases", "tiny-glm"},
    {"glm-4: + sandwich norms", "tiny-glm4"},
    {"gemma-2: soft caps, window 6 on alternate layers, tied scaled embeddings", "tiny-gemma2"},
    {"gemma-3: qk norms, window 5, local rope base, linear-scaled global rope", "tiny-gemma3"},
    {"qwen2-moe: top-2 of 8 experts, shared expert, one dense layer", "tiny-qwen2-moe"},
    {"qwen3-moe: top-3 of 6 renormalised, MoE every 2nd layer, qk norms, biases", "tiny-qwen3-moe"}};

// init_model_folder leaves every norm at its identity (1, Gemma's 0), where a norm applied the
// wrong way round can still agree: the folder's norm weights are redrawn around it. Its MoE
// routers (N(0, 0.02)) give nearly equal probabilities, where rounding alone could change which
// experts are picked: they are scaled up so that the picks are clear.
void perturb_norms(const std::string& dir) {
  auto lm = load_model_folder(dir);
  torch::NoGradGuard no_grad;
  torch::manual_seed(23);
  auto state = lm->hf_state();
  for (auto& [name, p] : state)
    if (name.find("norm") != std::string::npos) p.add_(torch::randn_like(p) * 0.3);
    else if (name.size() > 15 && name.compare(name.size() - 15, 15, "mlp.gate.weight") == 0)
      p.mul_(40);
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

  // kIndependent's folders (initialised, norms perturbed) and transformers' logits of each, from
  // one start of Python in initTestCase.
  QTemporaryDir independent_;
  std::map<QString, torch::Tensor> independent_logits_;
  std::map<QString, QString> independent_errors_;

 private Q_SLOTS:
  void initTestCase();
  void matchesIndependentImplementation_data();
  void matchesIndependentImplementation();
  void savedCheckpointLoadsBitIdentically();
  void engineOutputLoadsInTransformers_data();
  void engineOutputLoadsInTransformers();
  void moeLossAndGradientsMatchTransformers_data();
  void moeLossAndGradientsMatchTransformers();
};

void TestReferenceLogits::initTestCase() {
  // (Without torch and transformers, hf_logits.py's error says so, and that scripts/setup.sh
  // installs them: every row then fails with it.)
  QVERIFY(independent_.isValid());
  QStringList dirs;
  for (const auto& [row, model] : kIndependent) {
    const QString dir = independent_.filePath(model);
    init_model_folder((kModels + "/" + model + "/config.json").toStdString(), dir.toStdString(), 11);
    perturb_norms(dir.toStdString());
    dirs << dir;
  }
  independent_logits_ = reference_logits(dirs, independent_errors_);
}

void TestReferenceLogits::matchesIndependentImplementation_data() {
  QTest::addColumn<QString>("model");
  for (const auto& [row, model] : kIndependent) QTest::newRow(row) << QString(model);
}

void TestReferenceLogits::matchesIndependentImplementation() {
  QFETCH(QString, model);
  const QString folder = independent_.filePath(model);
  const std::string dir = folder.toStdString();
  auto lm = load_model_folder(dir);
  torch::NoGradGuard no_grad;
  const auto n = static_cast<int64_t>(kIds.size());
  auto ours = lm->logits(torch::tensor(kIds, torch::kLong).unsqueeze(0),
                         torch::arange(n, torch::kLong).unsqueeze(0))[0].to(torch::kDouble);
  QVERIFY2(independent_logits_.count(folder),
           qPrintable("transformers failed: " + independent_errors_[folder]));
  const torch::Tensor ref = independent_logits_[folder];
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
  QTest::newRow("qwen2-moe, fp32 run") << "tiny-qwen2-moe" << false;
  QTest::newRow("qwen3-moe, bf16 run") << "tiny-qwen3-moe" << true;
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

  QStringList dirs;
  for (const std::string sub : {"checkpoint-1", "checkpoint-2", ""})
    dirs << QString::fromStdString((fs::path(c.output_dir) / sub).string());
  std::map<QString, QString> errors;
  auto refs = reference_logits(dirs, errors);  // one start of Python for the three
  for (const QString& folder : dirs) {
    const std::string dir = folder.toStdString();
    QVERIFY2(fs::exists(fs::path(dir) / "config.json"), dir.c_str());
    auto lm = load_model_folder(dir);  // fp32 compute on our side too
    torch::NoGradGuard no_grad;
    const auto n = static_cast<int64_t>(kIds.size());
    auto ours = lm->logits(torch::tensor(kIds, torch::kLong).unsqueeze(0),
                           torch::arange(n, torch::kLong).unsqueeze(0))[0].to(torch::kDouble);
    QVERIFY2(refs.count(folder), qPrintable("transformers could not load " + folder + ": " + errors[folder]));
    const torch::Tensor ref = refs[folder];
    QCOMPARE(ref.sizes(), ours.sizes());
    const double err = (ours - ref).abs().max().item<double>();
    const double scale = ref.abs().max().item<double>();
    QVERIFY2(err <= 1e-4 * std::max(1.0, scale),
             qPrintable(QString("%1: max |diff| %2 (logits up to %3)")
                            .arg(QString::fromStdString(dir)).arg(err).arg(scale)));
  }
}

// Two right-padded rows with a masked prompt, the auxiliary loss on (coefficient 0.5, so that its
// gradient weighs on the routers as much as the LM loss's): transformers' loss (mean token CE +
// 0.5 x aux), its aux and the gradients of routers, experts (picked ones and, through the aux,
// every one), shared experts and attention against ours, with and without recomputed layers.
void TestReferenceLogits::moeLossAndGradientsMatchTransformers_data() {
  QTest::addColumn<QString>("model");
  QTest::addColumn<bool>("checkpointing");
  QTest::addColumn<QStringList>("params");
  const QStringList qwen2 = {"model.layers.0.mlp.gate.weight",
                             "model.layers.2.mlp.gate.weight",
                             "model.layers.0.mlp.experts.1.gate_proj.weight",
                             "model.layers.2.mlp.experts.6.down_proj.weight",
                             "model.layers.0.mlp.shared_expert.up_proj.weight",
                             "model.layers.2.mlp.shared_expert_gate.weight",
                             "model.layers.1.mlp.down_proj.weight",
                             "model.layers.0.self_attn.q_proj.weight"};
  const QStringList qwen3 = {"model.layers.1.mlp.gate.weight",
                             "model.layers.3.mlp.gate.weight",
                             "model.layers.3.mlp.experts.2.up_proj.weight",
                             "model.layers.1.mlp.experts.4.down_proj.weight",
                             "model.layers.0.mlp.gate_proj.weight",
                             "model.layers.2.self_attn.k_norm.weight"};
  QTest::newRow("qwen2-moe") << "tiny-qwen2-moe" << false << qwen2;
  QTest::newRow("qwen2-moe, gradient checkpointing") << "tiny-qwen2-moe" << true << qwen2;
  QTest::newRow("qwen3-moe") << "tiny-qwen3-moe" << false << qwen3;
  QTest::newRow("qwen3-moe, gradient checkpointing") << "tiny-qwen3-moe" << true << qwen3;
}

void TestReferenceLogits::moeLossAndGradientsMatchTransformers() {
  QFETCH(QString, model);
  QFETCH(bool, checkpointing);
  QFETCH(QStringList, params);
  QTemporaryDir tmp;
  const std::string dir = tmp.filePath("m").toStdString();
  init_model_folder((kModels + "/" + model + "/config.json").toStdString(), dir, 13);
  perturb_norms(dir);
  auto lm = load_model_folder(dir);
  lm->set_gradient_checkpointing(checkpointing);
  QVERIFY(lm->moe_aux() != nullptr);

  std::vector<TokenizedSample> samples(2);
  for (size_t r = 0; r < 2; ++r) {
    const size_t n = r == 0 ? 14 : 9;
    for (size_t i = 0; i < n; ++i) {
      const int64_t id = kIds[(i * 5 + r * 3) % kIds.size()];
      samples[r].input_ids.push_back(id);
      samples[r].labels.push_back(i < 4 ? kIgnoreIndex : id);  // a 4-token prompt
    }
  }
  const Batch b = make_batch({&samples[0], &samples[1]}, /*pad_id=*/0);
  const double coef = 0.5;
  MoeAuxLoss& aux = *lm->moe_aux();
  aux.begin(b.token_mask);
  auto hidden = lm->hidden_states(b.input_ids, b.position_ids);
  auto ce = lm_cross_entropy_sum(hidden, lm->lm_head_weight(), b.targets, 0, 0);
  const double aux_value = aux.finish(coef, {}).item<double>();
  (ce / double(b.valid_tokens)).backward();
  aux.end();
  const double loss = ce.item<double>() / double(b.valid_tokens) + coef * aux_value;

  // The batch as transformers takes it: labels aligned with the inputs, -100 on padding.
  QJsonArray ids, mask, labels;
  const int64_t width = b.input_ids.size(1);
  for (size_t r = 0; r < 2; ++r) {
    QJsonArray i_row, m_row, l_row;
    for (int64_t t = 0; t < width; ++t) {
      const bool real = t < int64_t(samples[r].input_ids.size());
      i_row.append(qint64(b.input_ids[int64_t(r)][t].item<int64_t>()));
      m_row.append(real ? 1 : 0);
      l_row.append(qint64(real ? samples[r].labels[size_t(t)] : kIgnoreIndex));
    }
    ids.append(i_row), mask.append(m_row), labels.append(l_row);
  }
  QJsonObject req{{"input_ids", ids}, {"attention_mask", mask}, {"labels", labels},
                  {"coef", coef}, {"params", QJsonArray::fromStringList(params)}};
  QFile f(tmp.filePath("batch.json"));
  QVERIFY(f.open(QIODevice::WriteOnly));
  f.write(QJsonDocument(req).toJson());
  f.close();
  QProcess p;
  p.start(QStringLiteral(STUDIO_PYTHON),
          {QStringLiteral(STUDIO_SOURCE_DIR "/tests/reference/hf_moe_loss.py"),
           QString::fromStdString(dir), f.fileName()});
  QVERIFY2(p.waitForFinished(180000) && p.exitCode() == 0, p.readAllStandardError().constData());
  const QJsonObject ref = QJsonDocument::fromJson(p.readAllStandardOutput()).object();

  const double ref_aux = ref.value("aux_loss").toDouble(), ref_loss = ref.value("loss").toDouble();
  QVERIFY2(std::abs(aux_value - ref_aux) <= 1e-5 * std::max(1.0, ref_aux),
           qPrintable(QString("aux %1, transformers %2").arg(aux_value).arg(ref_aux)));
  QVERIFY2(ref_aux > 1.0, "the routing is uneven: aux above its balanced value 1");
  QVERIFY2(std::abs(loss - ref_loss) <= 1e-5 * std::max(1.0, ref_loss),
           qPrintable(QString("loss %1, transformers %2").arg(loss).arg(ref_loss)));
  std::map<std::string, torch::Tensor> ours;
  for (const auto& [name, t] : lm->hf_state()) ours[name] = t;
  const QJsonObject grads = ref.value("grads").toObject();
  for (const QString& name : params) {
    QVERIFY2(ours.count(name.toStdString()), qPrintable(name));
    const torch::Tensor g = ours.at(name.toStdString()).grad();
    QVERIFY2(g.defined(), qPrintable(name + ": no gradient"));
    const QJsonArray r = grads.value(name).toArray();
    QCOMPARE(qsizetype(r.size()), qsizetype(g.numel()));
    auto want = torch::empty({g.numel()}, torch::kDouble);
    for (int i = 0; i < r.size(); ++i) want[i] = r.at(i).toDouble();
    const auto got = g.reshape({-1}).to(torch::kDouble);
    const double scale = want.abs().max().item<double>();
    const double err = (got - want).abs().max().item<double>();
    QVERIFY2(scale > 0, qPrintable(name + ": a zero gradient in transformers"));
    QVERIFY2(err <= 1e-4 * scale + 1e-8,
             qPrintable(QString("%1: max |diff| %2, gradient up to %3").arg(name).arg(err).arg(scale)));
  }
}

QTEST_MAIN(TestReferenceLogits)
#include "tst_reference_logits.moc"
