// MasterWeights: bf16 model parameters with fp32 masters. The gradients of every micro-batch are
// summed in fp32 (a bf16 .grad would drop what is below its 8 significant bits), the update lands
// on the masters and is copied back to the model, and an fp32 model is its own master.
#include <QtTest>

#include <torch/torch.h>

#include "studio/trainer/optim/master_weights.h"

using namespace studio::trainer;

class TestMasterWeights : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void fp32ModelIsItsOwnMaster() {
    auto p = torch::ones({3}).requires_grad_(true);
    MasterWeights m({{"w", p}});
    QVERIFY(!m.separate());
    QVERIFY(m.params()[0].second.is_same(p));
  }

  // 1 + 2^-9 is not a bf16 number: summed in bf16 the second micro-batch's gradient vanishes.
  void accumulationIsFp32() {
    auto p = torch::full({4}, 0.5, torch::kBFloat16).requires_grad_(true);
    MasterWeights m({{"w", p}});
    QVERIFY(m.separate());
    const auto& master = m.params()[0].second;
    QCOMPARE(master.scalar_type(), torch::kFloat);
    (p.to(torch::kFloat) * 1.0).sum().backward();
    m.accumulate_grads();
    QVERIFY2(!p.grad().defined(), "the model's bf16 grad must be cleared after each accumulation");
    (p.to(torch::kFloat) * (1.0 / 512)).sum().backward();
    m.accumulate_grads();
    const float want = 1.0f + 1.0f / 512;
    QCOMPARE(master.grad().scalar_type(), torch::kFloat);
    QCOMPARE(master.grad()[0].item<float>(), want);
    // What a bf16 accumulation would have given, to show the test can tell them apart.
    auto bf16_sum = torch::ones({1}, torch::kBFloat16) + torch::full({1}, 1.0 / 512, torch::kBFloat16);
    QVERIFY(bf16_sum.item<float>() != want);
  }

  // The step updates the fp32 master; scatter_weights rounds it into the bf16 parameter, and
  // small updates accumulate in the master even when each is below the bf16 spacing.
  void smallUpdatesAccumulateInTheMaster() {
    auto p = torch::ones({2}, torch::kBFloat16).requires_grad_(true);
    MasterWeights m({{"w", p}});
    torch::optim::SGD sgd(std::vector<torch::Tensor>{m.params()[0].second}, torch::optim::SGDOptions(1.0));
    for (int i = 0; i < 8; ++i) {
      (p.to(torch::kFloat) * (1.0 / 1024)).sum().backward();  // each step moves by 2^-10
      m.accumulate_grads();
      sgd.step();
      sgd.zero_grad();
      m.scatter_weights();
    }
    // 8 x 2^-10 = 2^-7, a bf16 number below 1 (spacing 2^-8 there); one 2^-10 step alone
    // rounds back to 1 in bf16, so a bf16-only update would never have moved.
    QCOMPARE(m.params()[0].second[0].item<float>(), 1.0f - 8.0f / 1024);
    QCOMPARE(p[0].item<float>(), torch::tensor({1.0f - 8.0f / 1024}).to(torch::kBFloat16).item<float>());
    QVERIFY(!p.grad().defined());
  }
};

QTEST_MAIN(TestMasterWeights)
#include "tst_master_weights.moc"
