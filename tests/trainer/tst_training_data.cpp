// Batches (global label shift, padding), the epoch planner and the chunked LM loss.
#include <QtTest>

#include <random>
#include <set>

#include "studio/trainer/batching/batch.h"
#include "studio/trainer/batching/sampler.h"
#include "studio/config/memory_estimate.h"
#include "studio/kernels/fused_linear_ce.h"
#include "studio/trainer/tensors/host_allocator.h"
#include "studio/trainer/loss.h"

using namespace studio::trainer;

class TestTrainingData : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void batchShiftsLabelsGlobally();
  void batchPadsToMultiple_data();
  void batchPadsToMultiple();
  void batchRejectsMismatchedLabels();
  void plannerIsDeterministicPermutation();
  void plannerShardsOverDataParallel_data();
  void plannerShardsOverDataParallel();
  void dynamicBatchingCutsAsLlamaFactory_data();
  void dynamicBatchingCutsAsLlamaFactory();
  void dynamicBatchingCoversEverySampleOnEveryRank_data();
  void dynamicBatchingCoversEverySampleOnEveryRank();
  void lossEqualsReferenceForAnyChunk_data();
  void lossEqualsReferenceForAnyChunk();
  void logprobsMatchLogSoftmax();
  void logprobGradientsMatchReference_data();
  void logprobGradientsMatchReference();
  void lossWithoutTargetsStillReachesTheHead();
  void bf16LossMatchesFp32Reference();
  void fusedLossNeverHoldsTokensTimesVocab_data();
  void fusedLossNeverHoldsTokensTimesVocab();
  void chunkRuleAgreesWithTheKernelsAndTheEstimate();
};

void TestTrainingData::batchShiftsLabelsGlobally() {
  TokenizedSample a{{10, 11, 12, 13}, {kIgnoreIndex, kIgnoreIndex, 12, 13}};
  TokenizedSample b{{20, 21}, {20, 21}};
  Batch batch = make_batch({&a, &b}, /*pad_id=*/0);
  QCOMPARE(batch.input_ids.size(1), int64_t{4});
  // position i predicts labels[i + 1]; the last position and padding predict nothing
  std::vector<int64_t> ta(batch.targets[0].data_ptr<int64_t>(), batch.targets[0].data_ptr<int64_t>() + 4);
  std::vector<int64_t> tb(batch.targets[1].data_ptr<int64_t>(), batch.targets[1].data_ptr<int64_t>() + 4);
  QCOMPARE(ta, (std::vector<int64_t>{kIgnoreIndex, 12, 13, kIgnoreIndex}));
  QCOMPARE(tb, (std::vector<int64_t>{21, kIgnoreIndex, kIgnoreIndex, kIgnoreIndex}));
  QCOMPARE(batch.input_ids[1][3].item<int64_t>(), int64_t{0});
  QCOMPARE(batch.valid_tokens, int64_t{3});
  QCOMPARE(batch.tokens, int64_t{6});
  QCOMPARE(batch.position_ids[1][3].item<int64_t>(), int64_t{3});
}

void TestTrainingData::batchPadsToMultiple_data() {
  QTest::addColumn<int>("length");
  QTest::addColumn<int>("multiple");
  QTest::addColumn<int>("expected");
  QTest::newRow("exact") << 16 << 8 << 16;
  QTest::newRow("round up") << 17 << 8 << 24;
  QTest::newRow("zigzag 2*sp") << 5 << 4 << 8;
  QTest::newRow("no multiple") << 7 << 1 << 7;
}

void TestTrainingData::batchPadsToMultiple() {
  QFETCH(int, length);
  QFETCH(int, multiple);
  QFETCH(int, expected);
  TokenizedSample s{std::vector<int64_t>(length, 5), std::vector<int64_t>(length, 5)};
  QCOMPARE(make_batch({&s}, 0, multiple).input_ids.size(1), int64_t(expected));
}

void TestTrainingData::batchRejectsMismatchedLabels() {
  TokenizedSample s{{1, 2, 3}, {1, 2}};
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, make_batch({&s}, 0));
}

void TestTrainingData::plannerIsDeterministicPermutation() {
  SamplerOptions opt;
  opt.seed = 7;
  EpochPlanner p(100, opt);
  auto o0 = p.order(0);
  QCOMPARE(o0, EpochPlanner(100, opt).order(0));
  QVERIFY(o0 != p.order(1));
  QCOMPARE(std::set<size_t>(o0.begin(), o0.end()).size(), size_t{100});
  opt.shuffle = false;
  auto plain = EpochPlanner(5, opt).order(3);
  QCOMPARE(plain, (std::vector<size_t>{0, 1, 2, 3, 4}));
}

void TestTrainingData::plannerShardsOverDataParallel_data() {
  QTest::addColumn<int>("samples");
  QTest::addColumn<int>("dp");
  QTest::addColumn<int>("micro");
  QTest::addColumn<int>("accum");
  QTest::addColumn<int>("steps");
  QTest::newRow("single rank") << 10 << 1 << 2 << 2 << 3;  // 5 micro -> 2 full + 1 partial
  QTest::newRow("two ranks") << 10 << 2 << 1 << 2 << 3;    // 5 per rank
  QTest::newRow("uneven pads") << 7 << 4 << 1 << 1 << 2;   // 2 per rank after padding
  QTest::newRow("one step") << 3 << 1 << 4 << 4 << 1;
}

void TestTrainingData::plannerShardsOverDataParallel() {
  QFETCH(int, samples);
  QFETCH(int, dp);
  QFETCH(int, micro);
  QFETCH(int, accum);
  QFETCH(int, steps);
  std::multiset<size_t> seen;
  for (int r = 0; r < dp; ++r) {
    SamplerOptions opt;
    opt.dp_rank = r;
    opt.dp_size = dp;
    opt.micro_batch = micro;
    opt.accumulation = accum;
    EpochPlanner p(static_cast<size_t>(samples), opt);
    auto plan = p.plan(2);
    QCOMPARE(int64_t(plan.size()), p.steps_per_epoch());
    QCOMPARE(int(plan.size()), steps);
    for (const auto& step : plan) {
      QVERIFY(int(step.size()) <= accum);
      for (const auto& mb : step) {
        QVERIFY(!mb.empty() && int(mb.size()) <= micro);
        seen.insert(mb.begin(), mb.end());
      }
    }
  }
  // Every sample is seen; only the padding repeats some.
  QCOMPARE(std::set<size_t>(seen.begin(), seen.end()).size(), size_t(samples));
  QCOMPARE(int(seen.size()), (samples + dp - 1) / dp * dp);
}

using MicroBatches = std::vector<std::vector<size_t>>;
Q_DECLARE_METATYPE(MicroBatches)

// Samples of 3, 4, 2, 1, 1, 4, 2, 3 tokens under a budget of 8 (cutoff_len 4 x micro_batch_size
// 2), in order: LLaMA-Factory v1's _get_dynamic_micro_batch_sizes gives [2, 3, 2] and
// _get_dynamic_padding_free_micro_batch_sizes [2, 4] (run on these lengths); it keeps the
// incomplete rest for the next fill, where an epoch here ends with it as a last micro-batch.
void TestTrainingData::dynamicBatchingCutsAsLlamaFactory_data() {
  QTest::addColumn<bool>("unpadded");
  QTest::addColumn<int>("dp");
  QTest::addColumn<int>("rank");
  QTest::addColumn<int>("accumulation");
  QTest::addColumn<MicroBatches>("all");    // the epoch's micro-batches before dealing
  QTest::addColumn<MicroBatches>("mine");   // this rank's, in step order
  QTest::addColumn<int>("steps");
  // Padded: 3,4 (4 x 2 = 8, full) | 2,1,1 (+4 would pad to 16) | 4,2 (full) | 3.
  const MicroBatches padded{{0, 1}, {2, 3, 4}, {5, 6}, {7}};
  // Unpadded: 3+4 (+2 = 9) | 2+1+1+4 = 8 (+2 = 10) | 2+3.
  const MicroBatches unpadded{{0, 1}, {2, 3, 4, 5}, {6, 7}};
  QTest::newRow("dynamic_batching") << false << 1 << 0 << 1 << padded << padded << 4;
  QTest::newRow("dynamic_batching, accumulation 3") << false << 1 << 0 << 3 << padded << padded << 2;
  QTest::newRow("dynamic_batching, dp 2, rank 1")
      << false << 2 << 1 << 1 << padded << MicroBatches{{2, 3, 4}, {7}} << 2;
  QTest::newRow("dynamic_padding_free") << true << 1 << 0 << 2 << unpadded << unpadded << 2;
  // Three micro-batches on two ranks: the first comes again, as samples wrap without dynamic
  // batching.
  QTest::newRow("dynamic_padding_free, dp 2, rank 1")
      << true << 2 << 1 << 1 << unpadded << MicroBatches{{2, 3, 4, 5}, {0, 1}} << 2;
}

void TestTrainingData::dynamicBatchingCutsAsLlamaFactory() {
  QFETCH(bool, unpadded);
  QFETCH(int, dp);
  QFETCH(int, rank);
  QFETCH(int, accumulation);
  QFETCH(MicroBatches, all);
  QFETCH(MicroBatches, mine);
  QFETCH(int, steps);
  SamplerOptions o;
  o.shuffle = false;
  o.dp_size = dp;
  o.dp_rank = rank;
  o.accumulation = accumulation;
  o.lengths = {3, 4, 2, 1, 1, 4, 2, 3};
  o.token_budget = 8;
  o.unpadded = unpadded;
  EpochPlanner p(8, o);
  QCOMPARE(p.dynamic_micro_batches(0), all);
  const auto plan = p.plan(0);
  MicroBatches got;
  for (const auto& step : plan) {
    QVERIFY(int(step.size()) <= accumulation);
    got.insert(got.end(), step.begin(), step.end());
  }
  QCOMPARE(got, mine);
  QCOMPARE(int(plan.size()), steps);
  QCOMPARE(p.steps_per_epoch(), int64_t(steps));
}

// Shuffled epochs of random lengths: every micro-batch within the budget (a lone sample may
// fill it), every sample in one micro-batch of the epoch, and every rank with as many steps
// and micro-batches per step (the collectives of a step are the same on all).
void TestTrainingData::dynamicBatchingCoversEverySampleOnEveryRank_data() {
  QTest::addColumn<bool>("unpadded");
  QTest::addColumn<int>("dp");
  QTest::newRow("padded, dp 1") << false << 1;
  QTest::newRow("padded, dp 3") << false << 3;
  QTest::newRow("unpadded, dp 4") << true << 4;
}

void TestTrainingData::dynamicBatchingCoversEverySampleOnEveryRank() {
  QFETCH(bool, unpadded);
  QFETCH(int, dp);
  const int64_t budget = 512;
  SamplerOptions o;
  o.seed = 7;
  o.dp_size = dp;
  o.accumulation = 2;
  o.token_budget = budget;
  o.unpadded = unpadded;
  std::mt19937 rng(11);
  for (int i = 0; i < 301; ++i) o.lengths.push_back(1 + int64_t(rng() % 256));
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    EpochPlanner whole(o.lengths.size(), o);
    const auto all = whole.dynamic_micro_batches(epoch);
    std::multiset<size_t> seen;
    for (const auto& mb : all) {
      QVERIFY(!mb.empty());
      int64_t longest = 0, sum = 0;
      for (size_t i : mb) longest = std::max(longest, o.lengths[i]), sum += o.lengths[i];
      QVERIFY(mb.size() == 1 || (unpadded ? sum : longest * int64_t(mb.size())) <= budget);
      seen.insert(mb.begin(), mb.end());
    }
    QCOMPARE(seen.size(), o.lengths.size());
    QCOMPARE(std::set<size_t>(seen.begin(), seen.end()).size(), o.lengths.size());
    std::vector<std::vector<size_t>> shape;  // micro-batches per step, of rank 0
    for (int r = 0; r < dp; ++r) {
      SamplerOptions ro = o;
      ro.dp_rank = r;
      std::vector<size_t> counts;
      for (const auto& step : EpochPlanner(o.lengths.size(), ro).plan(epoch)) counts.push_back(step.size());
      if (r == 0) shape.push_back(counts);
      else QCOMPARE(counts, shape.front());
    }
  }
}

// dft: LLaMA-Factory's _dft_cross_entropy, each token's cross-entropy times its target
// probability computed without gradient.
void TestTrainingData::lossEqualsReferenceForAnyChunk_data() {
  QTest::addColumn<int>("chunk");
  QTest::addColumn<QString>("weighting");  // "", "dft", "eaft" with alpha 0.7, "asft" with 0.3
  QTest::addColumn<double>("softcap");
  QTest::newRow("1") << 1 << "" << 0.0;
  QTest::newRow("3") << 3 << "" << 0.0;
  QTest::newRow("all") << 1000 << "" << 0.0;
  QTest::newRow("1, DFT loss") << 1 << "dft" << 0.0;
  QTest::newRow("all, DFT loss") << 1000 << "dft" << 0.0;
  QTest::newRow("3, EAFT loss") << 3 << "eaft" << 0.0;
  QTest::newRow("all, EAFT loss") << 1000 << "eaft" << 0.0;
  QTest::newRow("1, ASFT loss") << 1 << "asft" << 0.0;
  QTest::newRow("3, ASFT loss") << 3 << "asft" << 0.0;
  QTest::newRow("rule, ASFT loss") << 0 << "asft" << 0.0;
  QTest::newRow("all, ASFT loss, soft cap") << 1000 << "asft" << 2.5;
  QTest::newRow("all, soft cap") << 1000 << "" << 2.5;
}

void TestTrainingData::lossEqualsReferenceForAnyChunk() {
  QFETCH(int, chunk);
  QFETCH(QString, weighting);
  QFETCH(double, softcap);
  TokenWeighting tw;
  tw.dft = weighting == "dft" || weighting == "asft";
  tw.eaft = weighting == "eaft";
  tw.eaft_alpha = 0.7;
  torch::manual_seed(3);
  // 30 words (more than EAFT's top 20).
  auto hidden = torch::randn({2, 5, 8}, torch::kDouble).requires_grad_();
  auto weight = torch::randn({30, 8}, torch::kDouble).requires_grad_();
  auto targets = torch::randint(0, 30, {2, 5}, torch::kLong);
  targets[0][0] = kIgnoreIndex;
  targets[1][4] = kIgnoreIndex;
  // ASFT's reference: other hidden states and head (a model that has drifted apart).
  KlReference kl;
  if (weighting == "asft") {
    kl.hidden = torch::randn({2, 5, 8}, torch::kDouble);
    kl.weight = torch::randn({30, 8}, torch::kDouble);
    kl.alpha = 0.3;
    kl.softcap = softcap;
  }
  auto loss = lm_cross_entropy_sum(hidden, weight, targets, chunk, softcap, tw, kl);
  auto grads = torch::autograd::grad({loss}, {hidden, weight});

  auto cap = [&](const torch::Tensor& z) { return softcap > 0 ? softcap * torch::tanh(z / softcap) : z; };
  auto logits = cap(torch::matmul(hidden, weight.t()));
  auto logp = torch::log_softmax(logits, -1);
  auto valid = targets != kIgnoreIndex;
  auto picked = logp.gather(2, targets.clamp_min(0).unsqueeze(2)).squeeze(2);
  // LLaMA-Factory's _eaft_cross_entropy, as it writes it.
  auto top = std::get<0>(logits.detach().topk(20, -1));
  auto logq = top - top.logsumexp(-1, true);
  auto eaft = (-(logq.exp() * logq).sum(-1) / 3.0).pow(0.7);
  auto w = tw.dft ? picked.detach().exp() : tw.eaft ? eaft : torch::ones_like(picked);
  auto ref = -(picked * w * valid).sum();
  if (kl.any()) {
    // LLaMA-Factory's _kl_divergence, as it writes it: F.kl_div(log p, softmax(reference)),
    // summed over the vocabulary and masked (here as a sum, not a mean over the tokens).
    auto q = torch::softmax(cap(torch::matmul(kl.hidden, kl.weight.t())), -1);
    namespace F = torch::nn::functional;
    auto token_kl = F::kl_div(logp, q, F::KLDivFuncOptions().reduction(torch::kNone)).sum(-1);
    ref = ref + kl.alpha * (token_kl * valid).sum();
  }
  auto ref_grads = torch::autograd::grad({ref}, {hidden, weight});
  QVERIFY2(std::fabs(loss.item<double>() - ref.item<double>()) < 1e-5,
           qPrintable(QString("%1 vs %2").arg(loss.item<double>()).arg(ref.item<double>())));
  QVERIFY(torch::allclose(grads[0].to(torch::kDouble), ref_grads[0], 1e-5, 1e-6));
  QVERIFY(torch::allclose(grads[1].to(torch::kDouble), ref_grads[1], 1e-5, 1e-6));
}

void TestTrainingData::logprobsMatchLogSoftmax() {
  torch::manual_seed(4);
  auto hidden = torch::randn({1, 6, 4});
  auto weight = torch::randn({9, 4});
  auto targets = torch::randint(0, 9, {1, 6}, torch::kLong);
  targets[0][5] = kIgnoreIndex;
  auto lp = lm_target_logprobs(hidden, weight, targets, 4);
  auto ref = torch::log_softmax(torch::matmul(hidden, weight.t()), -1);
  for (int i = 0; i < 5; ++i)
    QVERIFY(std::fabs(lp[0][i].item<float>() -
                      ref[0][i][targets[0][i].item<int64_t>()].item<float>()) < 1e-5);
  QCOMPARE(lp[0][5].item<float>(), 0.0f);
}

void TestTrainingData::logprobGradientsMatchReference_data() {
  QTest::addColumn<int>("chunk");
  QTest::newRow("rule") << 0;
  QTest::newRow("2") << 2;
  QTest::newRow("all") << 1000;
}

// DPO's gathering: an upstream gradient that differs per token (as a preference loss of the
// sequences' sums gives) reaches the hidden states and the head exactly as through the plain
// log-softmax, although the backward runs the head again chunk by chunk.
void TestTrainingData::logprobGradientsMatchReference() {
  QFETCH(int, chunk);
  torch::manual_seed(8);
  auto hidden = torch::randn({2, 7, 6}, torch::kDouble).requires_grad_();
  auto weight = torch::randn({13, 6}, torch::kDouble).requires_grad_();
  auto targets = torch::randint(0, 13, {2, 7}, torch::kLong);
  targets[0][0] = kIgnoreIndex;
  targets[1][3] = kIgnoreIndex;
  const auto upstream = torch::randn({2, 7}, torch::kDouble);
  auto lp = lm_target_logprobs(hidden, weight, targets, chunk);
  QCOMPARE(lp.scalar_type(), torch::kDouble);
  auto grads = torch::autograd::grad({(lp * upstream).sum()}, {hidden, weight});

  auto logp = torch::log_softmax(torch::matmul(hidden, weight.t()), -1);
  auto valid = targets != kIgnoreIndex;
  auto ref = logp.gather(2, targets.clamp_min(0).unsqueeze(2)).squeeze(2) * valid;
  auto ref_grads = torch::autograd::grad({(ref * upstream).sum()}, {hidden, weight});
  QVERIFY(torch::allclose(lp, ref, 1e-12, 1e-12));
  QVERIFY(torch::allclose(grads[0], ref_grads[0], 1e-10, 1e-12));
  QVERIFY(torch::allclose(grads[1], ref_grads[1], 1e-10, 1e-12));
}

// A rank whose chunk has no target at all still runs the head and gives it a zero gradient,
// so that its backward (and every collective in it) is the same as the other ranks'.
void TestTrainingData::lossWithoutTargetsStillReachesTheHead() {
  auto hidden = torch::randn({1, 4, 6}).requires_grad_();
  auto weight = torch::randn({9, 6}).requires_grad_();
  auto targets = torch::full({1, 4}, kIgnoreIndex, torch::kLong);
  auto loss = lm_cross_entropy_sum(hidden, weight, targets);
  QCOMPARE(loss.item<float>(), 0.0f);
  loss.backward();
  QVERIFY(weight.grad().defined());
  QCOMPARE(weight.grad().abs().sum().item<float>(), 0.0f);
  QCOMPARE(hidden.grad().abs().sum().item<float>(), 0.0f);
  auto lp = lm_target_logprobs(hidden, weight, targets);
  QCOMPARE(lp.abs().sum().item<float>(), 0.0f);
}

// bf16 hidden states and head: the loss and both gradients as the fp32 computation gives them
// from the same bf16 values, within bf16's rounding of the gradients.
void TestTrainingData::bf16LossMatchesFp32Reference() {
  torch::manual_seed(9);
  auto h32 = torch::randn({3, 40, 32}).to(torch::kBFloat16).to(torch::kFloat);
  auto w32 = (torch::randn({300, 32}) * 0.2).to(torch::kBFloat16).to(torch::kFloat);
  auto targets = torch::randint(0, 300, {3, 40}, torch::kLong);
  targets.narrow(1, 0, 10).fill_(kIgnoreIndex);
  auto hidden = h32.to(torch::kBFloat16).requires_grad_();
  auto weight = w32.to(torch::kBFloat16).requires_grad_();
  auto loss = lm_cross_entropy_sum(hidden, weight, targets);
  QCOMPARE(loss.scalar_type(), torch::kFloat);
  (loss / 90.0).backward();
  QCOMPARE(hidden.grad().scalar_type(), torch::kBFloat16);
  QCOMPARE(weight.grad().scalar_type(), torch::kBFloat16);

  auto hr = h32.clone().requires_grad_(), wr = w32.clone().requires_grad_();
  auto logp = torch::log_softmax(torch::matmul(hr, wr.t()), -1);
  auto valid = targets != kIgnoreIndex;
  auto ref = -(logp.gather(2, targets.clamp_min(0).unsqueeze(2)).squeeze(2) * valid).sum();
  (ref / 90.0).backward();
  QVERIFY2(std::fabs(loss.item<double>() - ref.item<double>()) < 1e-3 * ref.item<double>(),
           qPrintable(QString("%1 vs %2").arg(loss.item<double>()).arg(ref.item<double>())));
  auto rel = [](const torch::Tensor& a, const torch::Tensor& b) {
    return ((a.to(torch::kFloat) - b).abs().max() / b.abs().max()).item<double>();
  };
  QVERIFY2(rel(hidden.grad(), hr.grad()) < 2e-2, qPrintable(QString::number(rel(hidden.grad(), hr.grad()))));
  QVERIFY2(rel(weight.grad(), wr.grad()) < 2e-2, qPrintable(QString::number(rel(weight.grad(), wr.grad()))));
}

void TestTrainingData::fusedLossNeverHoldsTokensTimesVocab_data() {
  QTest::addColumn<bool>("dpo");
  QTest::addColumn<bool>("asft");
  QTest::newRow("sft") << false << false;
  QTest::newRow("dpo log-probs") << true << false;
  QTest::newRow("sft ASFT (reference logits alongside)") << false << true;
}

// 4096 tokens x a 4096-word vocabulary: one [tokens x vocab] fp32 tensor would be 64 MiB. The
// fused loss's peak, forward and backward, is the head's fp32 gradient, the hidden states'
// gradient and their copy, and one chunk's logits: what the memory estimate says, within 5%.
void TestTrainingData::fusedLossNeverHoldsTokensTimesVocab() {
  QFETCH(bool, dpo);
  QFETCH(bool, asft);
  install_counting_host_allocator();
  const int64_t T = 4096, H = 64, V = 4096;
  torch::manual_seed(10);
  auto hidden = torch::randn({1, T, H}).requires_grad_();
  auto weight = (torch::randn({V, H}) * 0.1).requires_grad_();
  auto targets = torch::randint(0, V, {1, T}, torch::kLong);
  KlReference kl;
  TokenWeighting tw;
  if (asft) {  // the reference's hidden states exist before the loss (the estimate counts them)
    kl.hidden = torch::randn({1, T, H});
    kl.weight = torch::randn({V, H}) * 0.1;
    tw.dft = true;
  }
  const int64_t base = host_allocator_stats().allocated;
  reset_host_allocator_peak();
  // 256-row chunks: the automatic rule's floor (1 GiB of logits) would take all 4096 rows of
  // this small vocabulary at once, which is right for it but would not show the bound.
  const int64_t rows = 256;
  torch::Tensor out = dpo ? lm_target_logprobs(hidden, weight, targets, rows).sum()
                          : lm_cross_entropy_sum(hidden, weight, targets, rows, 0.0, tw, kl);
  const int64_t forward_peak = host_allocator_stats().peak - base;
  const int64_t held = host_allocator_stats().allocated - base;
  reset_host_allocator_peak();
  const int64_t before_backward = host_allocator_stats().allocated;
  out.backward();
  const int64_t backward_peak = host_allocator_stats().peak - before_backward;
  const int64_t chunk = lm_loss_chunk_tokens(T, H, V, rows, asft);
  // ASFT: three fp32 [chunk x V] buffers (its chunk a third as long), and the reference's rows.
  const double predicted_chunk = double(chunk) * V * (asft ? 12 : 4);
  const double peak = double(std::max(forward_peak, held + backward_peak));
  // The estimate's terms (config/memory_estimate.cpp logits()): 4 V H + 2 x 4 T H + chunk.
  const double predicted =
      4.0 * V * H + 2 * 4.0 * T * H + (asft ? 4.0 * T * H : 0.0) + predicted_chunk;
  qInfo("chunk %lld rows; forward peak %lld, held %lld, backward peak %lld; predicted peak %.0f "
        "(one [T x V] fp32 tensor: %lld)",
        static_cast<long long>(chunk), static_cast<long long>(forward_peak),
        static_cast<long long>(held), static_cast<long long>(backward_peak), predicted,
        static_cast<long long>(T * V * 4));
  QVERIFY(peak < double(T) * V * 4 / 2);
  QVERIFY2(std::fabs(peak - predicted) <= 0.05 * predicted,
           qPrintable(QString("measured %1, predicted %2").arg(peak).arg(predicted)));
}

void TestTrainingData::chunkRuleAgreesWithTheKernelsAndTheEstimate() {
  for (int64_t t : {1, 7, 1000, 4096, 16384, 131072})
    for (auto [h, v] : {std::pair<int64_t, int64_t>{64, 4096}, {3584, 152064}, {4096, 128256}}) {
      const int64_t kernel = studio::kernels::fused_linear_ce_chunk_tokens({t, h, v});
      QCOMPARE(lm_loss_chunk_tokens(t, h, v), kernel);
      QCOMPARE(studio::loss_chunk_tokens(t, h, v), kernel);
    }
}

QTEST_MAIN(TestTrainingData)
#include "tst_training_data.moc"
