// Generation (trainer/generate.cpp): the KV cache against the full forward of every architecture
// (CPU, and CUDA where a GPU is present), Hugging Face's logits processing on hand-computed
// cases, sampling by seed, and generate()'s stopping and streaming with a real tokenizer.
// Token-for-token equality with transformers' generate() is tested through the command line
// (tests/cli/tst_chat_cli.cpp).
#include <QtTest>

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <fstream>
#include <set>

#include "studio/data/tokenizer.h"
#include "studio/trainer/generate.h"
#include "studio/trainer/model_folder.h"

using namespace studio::trainer;

Q_DECLARE_METATYPE(std::vector<float>)
Q_DECLARE_METATYPE(std::vector<int64_t>)

namespace {

const QString kModels = QStringLiteral(STUDIO_TEST_FIXTURES_DIR "/models");
const QString kDemoModel = QStringLiteral(STUDIO_SOURCE_DIR "/resources/demo/model");
const float kInf = std::numeric_limits<float>::infinity();

// A model folder with the demo tokenizer and weights large enough (initializer_range 0.5) that
// greedy choices are not near-ties.
QString demo_vocab_model(const QString& dir, uint64_t seed) {
  const QString src = dir + "/src";
  QDir().mkpath(src);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    QFile::copy(kDemoModel + "/" + f, src + "/" + f);
  std::ofstream(QString(src + "/config.json").toStdString()) << R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 4288,
    "max_position_embeddings": 512, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
    "tie_word_embeddings": false, "bos_token_id": 4256, "eos_token_id": 4258,
    "initializer_range": 0.5, "torch_dtype": "float32"})";
  const QString out = dir + "/model";
  init_model_folder((src + "/config.json").toStdString(), out.toStdString(), seed);
  return out;
}

torch::Tensor logits_tensor(const std::vector<float>& v) {
  return torch::tensor(v, torch::kFloat);
}

}  // namespace

class TestGenerate : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void kvCacheMatchesFullForward_data();
  void kvCacheMatchesFullForward();
  void kvCacheOnCudaMatchesCpu();
  void warpLogits_data();
  void warpLogits();
  void repetitionPenaltyIsHuggingFaces();
  void greedyTakesTheFirstMaximum();
  void samplingFollowsTheSeedAndTheFilters();
  void optionErrorsNameTheOption_data();
  void optionErrorsNameTheOption();
  void streamsAndStops();
};

void TestGenerate::kvCacheMatchesFullForward_data() {
  QTest::addColumn<QString>("model");
  QTest::addColumn<int>("chunk");  // tokens fed per decode step after a 7-token prefill
  for (const char* m : {"tiny-llama", "tiny-mistral", "tiny-qwen2", "tiny-qwen3-yarn"}) {
    QTest::addRow("%s, token by token", m) << m << 1;
    QTest::addRow("%s, chunks of 3", m) << m << 3;
  }
}

// Every position's logits from the cache equal the full causal forward's (fp32, 1e-5).
void TestGenerate::kvCacheMatchesFullForward() {
  QFETCH(QString, model);
  QFETCH(int, chunk);
  QTemporaryDir tmp;
  const std::string dir = tmp.filePath("m").toStdString();
  init_model_folder((kModels + "/" + model + "/config.json").toStdString(), dir, 5);
  CausalLM lm = load_model_folder(dir);
  const std::vector<int64_t> ids = {1, 17, 5, 63, 42, 42, 3, 60, 11, 0, 58, 23, 7, 50, 31, 2,
                                    61, 9, 37, 14, 29, 33};
  const auto n = static_cast<int64_t>(ids.size());
  const torch::Tensor input = torch::tensor(ids, torch::kLong).unsqueeze(0);
  torch::Tensor full;
  {
    torch::NoGradGuard no_grad;
    full = lm->logits(input, torch::arange(n, torch::kLong).unsqueeze(0))[0];
  }
  KVCache cache(lm->info().num_layers);
  int64_t at = 7;
  torch::Tensor last = lm->decode_step(input.narrow(1, 0, at), cache);
  QCOMPARE(cache.length(), at);
  double worst = (last[0] - full[at - 1]).abs().max().item<double>();
  while (at < n) {
    const int64_t len = std::min<int64_t>(chunk, n - at);
    last = lm->decode_step(input.narrow(1, at, len), cache);
    at += len;
    worst = std::max(worst, (last[0] - full[at - 1]).abs().max().item<double>());
  }
  QCOMPARE(cache.length(), n);
  // fp32 rounding of a different summation order: relative to the largest logit.
  const double tolerance = 1e-5 * std::max(1.0, full.abs().max().item<double>());
  QVERIFY2(worst < tolerance,
           qPrintable(QString("worst logit difference %1 (tolerance %2)").arg(worst).arg(tolerance)));
  // A cleared cache starts a new sequence.
  cache.clear();
  last = lm->decode_step(input.narrow(1, 0, 3), cache);
  QVERIFY((last[0] - full[2]).abs().max().item<double>() < tolerance);
}

void TestGenerate::kvCacheOnCudaMatchesCpu() {
  if (!torch::cuda::is_available()) QSKIP("no CUDA device (scripts/gpu-check.sh runs this)");
  QTemporaryDir tmp;
  const std::string dir = tmp.filePath("m").toStdString();
  init_model_folder((kModels + "/tiny-qwen3-yarn/config.json").toStdString(), dir, 5);
  CausalLM cpu = load_model_folder(dir);
  ModelOptions on_gpu;
  on_gpu.device = torch::Device(torch::kCUDA, 0);
  CausalLM gpu = load_model_folder(dir, on_gpu);
  const std::vector<int64_t> ids = {1, 17, 5, 63, 42, 42, 3, 60, 11, 0, 58, 23};
  const torch::Tensor input = torch::tensor(ids, torch::kLong).unsqueeze(0);
  KVCache a(cpu->info().num_layers), b(gpu->info().num_layers);
  double worst = 0;
  for (int64_t i = 0; i < input.size(1); ++i) {
    const torch::Tensor x = cpu->decode_step(input.narrow(1, i, 1), a);
    const torch::Tensor y = gpu->decode_step(input.narrow(1, i, 1).cuda(), b).cpu();
    worst = std::max(worst, (x - y).abs().max().item<double>());
  }
  QVERIFY2(worst < 1e-4, qPrintable(QString("worst CPU/CUDA logit difference %1").arg(worst)));
}

void TestGenerate::warpLogits_data() {
  QTest::addColumn<std::vector<float>>("logits");
  QTest::addColumn<double>("temperature");
  QTest::addColumn<int>("top_k");
  QTest::addColumn<double>("top_p");
  QTest::addColumn<std::vector<float>>("expected");
  const float l1 = std::log(0.1f), l2 = std::log(0.2f), l3 = std::log(0.3f), l4 = std::log(0.4f);
  QTest::newRow("top-k 2") << std::vector<float>{1, 4, 2, 3} << 1.0 << 2 << 1.0
                           << std::vector<float>{-kInf, 4, -kInf, 3};
  QTest::newRow("top-k keeps ties with the k-th") << std::vector<float>{1, 3, 2, 3, 3} << 1.0 << 2
                                                  << 1.0
                                                  << std::vector<float>{-kInf, 3, -kInf, 3, 3};
  QTest::newRow("top-k above the vocabulary") << std::vector<float>{1, 2} << 1.0 << 9 << 1.0
                                              << std::vector<float>{1, 2};
  // probabilities 0.1 0.2 0.3 0.4: cumulative from the least likely 0.1 0.3 0.6 1.0
  QTest::newRow("top-p 0.5 drops cumsum <= 0.5")
      << std::vector<float>{l1, l2, l3, l4} << 1.0 << 0 << 0.5
      << std::vector<float>{-kInf, -kInf, l3, l4};
  QTest::newRow("top-p 0.3 keeps the most likely")
      << std::vector<float>{l4, l1, l3, l2} << 1.0 << 0 << 0.3
      << std::vector<float>{l4, -kInf, -kInf, -kInf};
  QTest::newRow("top-p tiny still keeps one") << std::vector<float>{l1, l2, l3, l4} << 1.0 << 0
                                              << 1e-6
                                              << std::vector<float>{-kInf, -kInf, -kInf, l4};
  QTest::newRow("temperature divides") << std::vector<float>{1, -2, 4} << 2.0 << 0 << 1.0
                                       << std::vector<float>{0.5f, -1, 2};
  QTest::newRow("temperature before top-k") << std::vector<float>{1, -2, 4} << 0.5 << 1 << 1.0
                                            << std::vector<float>{-kInf, -kInf, 8};
}

void TestGenerate::warpLogits() {
  QFETCH(std::vector<float>, logits);
  QFETCH(double, temperature);
  QFETCH(int, top_k);
  QFETCH(double, top_p);
  QFETCH(std::vector<float>, expected);
  SamplingOptions o;
  o.temperature = temperature;
  o.top_k = top_k;
  o.top_p = top_p;
  const torch::Tensor got = warp_logits(logits_tensor(logits), o);
  QCOMPARE(got.size(0), static_cast<int64_t>(expected.size()));
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const float g = got[static_cast<int64_t>(i)].item<float>();
    if (std::isinf(expected[i])) QVERIFY2(std::isinf(g) && g < 0, qPrintable(QString::number(i)));
    else QVERIFY2(std::abs(g - expected[i]) < 1e-6, qPrintable(QString("%1: %2").arg(i).arg(g)));
  }
}

void TestGenerate::repetitionPenaltyIsHuggingFaces() {
  torch::Tensor logits = logits_tensor({2, -2, 1, 0});
  apply_repetition_penalty(logits, {0, 1, 1, 3}, 2.0);  // a repeated id is penalised once
  const std::vector<float> expected = {1, -4, 1, 0};
  for (int64_t i = 0; i < 4; ++i) QCOMPARE(logits[i].item<float>(), expected[std::size_t(i)]);
  apply_repetition_penalty(logits, {0}, 1.0);  // 1: untouched
  QCOMPARE(logits[0].item<float>(), 1.0f);
}

void TestGenerate::greedyTakesTheFirstMaximum() {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(1);
  SamplingOptions greedy;
  QCOMPARE(pick_token(logits_tensor({1, 3, 3, 2}), greedy, gen), 1);
  SamplingOptions top1;
  top1.temperature = 1.0;
  top1.top_k = 1;
  for (int i = 0; i < 20; ++i) QCOMPARE(pick_token(logits_tensor({1, 0, 5, 2}), top1, gen), 2);
}

void TestGenerate::samplingFollowsTheSeedAndTheFilters() {
  const torch::Tensor logits = torch::log(torch::tensor({0.5f, 0.3f, 0.15f, 0.05f}));
  SamplingOptions o;
  o.temperature = 1.0;
  const auto draw = [&](uint64_t seed, int n, const SamplingOptions& opt) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    std::vector<int> out;
    for (int i = 0; i < n; ++i) out.push_back(pick_token(logits, opt, gen));
    return out;
  };
  QCOMPARE(draw(7, 64, o), draw(7, 64, o));
  QVERIFY(draw(7, 64, o) != draw(8, 64, o));
  // Frequencies follow the distribution (4000 draws: 3 sigma is about 0.024).
  const std::vector<int> many = draw(3, 4000, o);
  const std::vector<double> p = {0.5, 0.3, 0.15, 0.05};
  for (int t = 0; t < 4; ++t) {
    const double f = double(std::count(many.begin(), many.end(), t)) / double(many.size());
    QVERIFY2(std::abs(f - p[std::size_t(t)]) < 0.03,
             qPrintable(QString("token %1: %2 vs %3").arg(t).arg(f).arg(p[std::size_t(t)])));
  }
  SamplingOptions k2 = o;
  k2.top_k = 2;
  const std::vector<int> two = draw(4, 500, k2);
  QCOMPARE(std::set<int>(two.begin(), two.end()), (std::set<int>{0, 1}));
  SamplingOptions p08 = o;
  p08.top_p = 0.8;  // cumulative from the least likely: 0.05 0.2 0.5 1.0; <= 0.2 removed
  const std::vector<int> top = draw(5, 500, p08);
  QCOMPARE(std::set<int>(top.begin(), top.end()), (std::set<int>{0, 1}));
}

void TestGenerate::optionErrorsNameTheOption_data() {
  QTest::addColumn<QString>("field");
  QTest::addColumn<double>("value");
  QTest::newRow("max_new_tokens 0") << "max_new_tokens" << 0.0;
  QTest::newRow("temperature -1") << "temperature" << -1.0;
  QTest::newRow("temperature nan") << "temperature" << double(NAN);
  QTest::newRow("top_p 0") << "top_p" << 0.0;
  QTest::newRow("top_p 1.5") << "top_p" << 1.5;
  QTest::newRow("top_k -2") << "top_k" << -2.0;
  QTest::newRow("repetition_penalty 0") << "repetition_penalty" << 0.0;
}

void TestGenerate::optionErrorsNameTheOption() {
  QFETCH(QString, field);
  QFETCH(double, value);
  SamplingOptions o;
  QVERIFY(sampling_options_error(o).empty());
  if (field == "max_new_tokens") o.max_new_tokens = int64_t(value);
  if (field == "temperature") o.temperature = value;
  if (field == "top_p") o.top_p = value;
  if (field == "top_k") o.top_k = int64_t(value);
  if (field == "repetition_penalty") o.repetition_penalty = value;
  const std::string why = sampling_options_error(o);
  QVERIFY2(QString::fromStdString(why).startsWith(field), why.c_str());
}

// Greedy with the demo tokenizer: the streamed pieces add up to the text; an eos id ends the
// answer before that token; a stop word that is not a token cuts the text where it starts, and
// nothing of it is streamed; cancel ends at the next token.
void TestGenerate::streamsAndStops() {
  QTemporaryDir tmp;
  const QString dir = demo_vocab_model(tmp.path(), 9);
  CausalLM lm = load_model_folder(dir.toStdString());
  const auto tok = studio::data::Tokenizer::load(dir.toStdString());
  const std::vector<int32_t> prompt = tok.encode("Tell me about sequence parallelism.");
  SamplingOptions o;
  o.max_new_tokens = 40;
  std::string streamed;
  const Generation all = generate(lm, tok, prompt, o, {}, [&](const std::string& s) {
    streamed += s;
  });
  QCOMPARE(all.stop, StopReason::Length);
  QCOMPARE(all.ids.size(), std::size_t(40));
  QCOMPARE(all.prompt_tokens, int64_t(prompt.size()));
  QCOMPARE(streamed, all.text);
  QCOMPARE(all.text, tok.decode(all.ids, true));

  // Ending at an eos id: the first 5 tokens, then the stop.
  StopCriteria at_id;
  at_id.ids = {all.ids[5]};
  const auto first = std::find(all.ids.begin(), all.ids.end(), all.ids[5]) - all.ids.begin();
  const Generation cut = generate(lm, tok, prompt, o, at_id);
  QCOMPARE(cut.stop, StopReason::Eos);
  QCOMPARE(cut.ids, std::vector<int32_t>(all.ids.begin(), all.ids.begin() + first));

  // A stop word of 3 characters taken from the middle of the answer.
  const std::string text = all.text;
  std::size_t start = text.size() / 2;
  while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
  std::size_t end = start;
  for (int chars = 0; chars < 3 && end < text.size(); ++chars)
    do ++end;
    while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80);
  StopCriteria word;
  word.words = {text.substr(start, end - start)};
  streamed.clear();
  const Generation w = generate(lm, tok, prompt, o, word, [&](const std::string& s) {
    streamed += s;
  });
  QCOMPARE(w.stop, StopReason::StopWord);
  QCOMPARE(w.text, text.substr(0, text.find(word.words[0])));
  QCOMPARE(streamed, w.text);

  std::atomic<bool> cancel{false};
  int pieces = 0;
  const Generation c = generate(
      lm, tok, prompt, o, {},
      [&](const std::string&) {
        if (++pieces == 3) cancel.store(true);
      },
      &cancel);
  QCOMPARE(c.stop, StopReason::Cancelled);
  QVERIFY2(c.ids.size() < 10, qPrintable(QString::number(c.ids.size())));

  // The prompt must be in the vocabulary.
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, generate(lm, tok, {5000}, o, {}));
}

QTEST_GUILESS_MAIN(TestGenerate)
#include "tst_generate.moc"
