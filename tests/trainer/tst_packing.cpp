// Packing as LLaMA-Factory does it, and neat packing exact: the greedy knapsack, the packed
// rows (restarted positions, masked first labels, segment ids), and a neat-packed batch giving
// the loss sum and every parameter gradient of the same samples trained one by one, in fp64,
// on the local attention, on every SP block schedule's mask, with and without activation
// checkpointing. Plain packing (samples attend to each other) must differ, or the comparison
// would prove nothing.
#include <torch/torch.h>

#include <QtTest>

#include "studio/trainer/batching/batch.h"
#include "studio/trainer/loss.h"
#include "studio/trainer/model/decoder.h"

using namespace studio::trainer;

namespace {

studio::ModelInfo tiny() {
  const char* json = R"({"architectures": ["Qwen2ForCausalLM"], "hidden_size": 16,
      "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4,
      "num_key_value_heads": 2, "vocab_size": 40, "max_position_embeddings": 128,
      "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": false})";
  std::string error;
  auto info = studio::parse_model_info(json, error);
  if (!info) qFatal("tiny config: %s", error.c_str());
  return *info;
}

// A sample of `n` tokens whose first `prompt` labels are masked.
TokenizedSample sample(int64_t n, int64_t prompt, int64_t seed) {
  TokenizedSample s;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = (seed * 7 + i * 13) % 37 + 1;
    s.input_ids.push_back(id);
    s.labels.push_back(i < prompt ? kIgnoreIndex : id);
  }
  return s;
}

struct LossAndGrads {
  double loss = 0;
  std::vector<torch::Tensor> grads;
};

LossAndGrads run(CausalLM& model, const std::vector<std::vector<const TokenizedSample*>>& batches,
                 bool neat) {
  model->zero_grad();
  double total = 0;
  for (const auto& rows : batches) {
    const Batch b = make_batch(rows, /*pad_id=*/0, /*pad_multiple=*/8, neat);
    model->set_attention_segments(b.segment_ids);
    auto hidden = model->hidden_states(b.input_ids, b.position_ids);
    auto loss = lm_cross_entropy_sum(hidden, model->lm_head_weight(), b.targets);
    loss.backward();
    total += loss.item<double>();
  }
  model->set_attention_segments({});
  LossAndGrads out{total, {}};
  for (const auto& [name, p] : model->hf_state()) out.grads.push_back(p.grad().clone());
  return out;
}

double max_grad_error(const LossAndGrads& a, const LossAndGrads& b) {
  double worst = 0;
  for (size_t i = 0; i < a.grads.size(); ++i) {
    const double scale = std::max(a.grads[i].abs().max().item<double>(), 1e-12);
    worst = std::max(worst, (a.grads[i] - b.grads[i]).abs().max().item<double>() / scale);
  }
  return worst;
}

std::vector<int64_t> values(const torch::Tensor& t) {
  auto c = t.contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

}  // namespace

class TestPacking : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  // LLaMA-Factory's greedy_knapsack: lengths ascending, each pack takes the longest remaining
  // length that still fits; samples longer than the capacity are dropped.
  void knapsackAsLlamaFactory() {
    std::vector<TokenizedSample> samples;
    for (int64_t n : {5, 3, 8, 2, 7, 12}) samples.push_back(sample(n, 1, n));
    const auto packs = pack_samples(samples, 10);
    QCOMPARE(packs.size(), size_t(3));
    QCOMPARE(packs[0].segment_lengths, (std::vector<int64_t>{8, 2}));
    QCOMPARE(packs[1].segment_lengths, (std::vector<int64_t>{7, 3}));
    QCOMPARE(packs[2].segment_lengths, (std::vector<int64_t>{5}));
    // The pack is the samples concatenated; each sample's first label is masked.
    QCOMPARE(packs[0].input_ids.size(), size_t(10));
    QCOMPARE(packs[0].input_ids[8], samples[3].input_ids[0]);
    QCOMPARE(packs[0].labels[8], kIgnoreIndex);
    QCOMPARE(packs[0].labels[7], samples[2].labels[7]);
  }

  // Positions restart per packed sample; segment ids number the samples, -1 on padding.
  void packedBatchRows() {
    std::vector<TokenizedSample> samples{sample(3, 1, 1), sample(4, 1, 2)};
    const auto packs = pack_samples(samples, 10);
    QCOMPARE(packs.size(), size_t(1));
    const Batch b = make_batch({&packs[0]}, 0, 8, /*segment_ids=*/true);
    QCOMPARE(values(b.position_ids[0].slice(0, 0, 7)),
             (std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2}));
    QCOMPARE(values(b.segment_ids[0]),
             (std::vector<int64_t>{0, 0, 0, 0, 1, 1, 1, -1}));
    // The last token of sample 0 predicts nothing (the next sample's first label is masked).
    QCOMPARE(b.targets[0][3].item<int64_t>(), kIgnoreIndex);
    QCOMPARE(make_batch({&packs[0]}, 0, 8).segment_ids.defined(), false);
  }

  void neatPackingEqualsUnpacked_data() {
    QTest::addColumn<bool>("checkpointing");
    QTest::newRow("plain") << false;
    QTest::newRow("activation checkpointing") << true;
  }
  // The same six samples: one by one, neat-packed into two rows of one batch, plain-packed.
  void neatPackingEqualsUnpacked() {
    QFETCH(bool, checkpointing);
    ModelOptions opt;
    opt.dtype = torch::kDouble;
    opt.warn = [](const std::string&) {};
    CausalLM model(tiny(), opt);
    model->init_weights(3);
    model->set_gradient_checkpointing(checkpointing);
    std::vector<TokenizedSample> samples;
    for (int64_t i = 0; i < 6; ++i) samples.push_back(sample(5 + 3 * i, 2 + i % 3, i));
    std::vector<std::vector<const TokenizedSample*>> one_by_one;
    for (const auto& s : samples) one_by_one.push_back({&s});
    const auto packs = pack_samples(samples, 40);
    QVERIFY(packs.size() >= 2 && packs.size() < samples.size());
    std::vector<const TokenizedSample*> packed_rows;
    for (const auto& p : packs) packed_rows.push_back(&p);

    const LossAndGrads ref = run(model, one_by_one, false);
    const LossAndGrads neat = run(model, {packed_rows}, true);
    const LossAndGrads plain = run(model, {packed_rows}, false);
    // The LM head's cross-entropy runs in fp32 (loss.h), everything before it in fp64.
    QVERIFY2(std::abs(ref.loss - neat.loss) <= 1e-6 * std::abs(ref.loss),
             qPrintable(QStringLiteral("%1 vs %2").arg(ref.loss, 0, 'g', 17).arg(neat.loss, 0, 'g', 17)));
    const double err = max_grad_error(ref, neat);
    QVERIFY2(err <= 1e-5, qPrintable(QStringLiteral("max relative gradient error %1").arg(err)));
    const double plain_err = max_grad_error(ref, plain);
    QVERIFY2(plain_err > 1e-3, qPrintable(QStringLiteral("plain packing attends across samples: "
                                                         "its gradients must differ (%1)").arg(plain_err)));
  }
};

QTEST_MAIN(TestPacking)
#include "tst_packing.moc"
