// The LibTorch adapter of the fused linear + cross-entropy kernel (studio_kernels_torch), and
// the engine's loss on CUDA, which runs through it (trainer/loss.cpp), against the engine's own
// loss on the CPU (the same chunked algorithm as ATen calls): loss, per-token log-probs and both
// gradients, fp32 and bf16, with ignored targets and a rank whose chunk has none. The argument
// checks run everywhere; everything that launches a kernel skips itself where no GPU is usable.
#include <QtTest>

#include <torch/torch.h>

#include "torch_test_support.h"

#include "studio/kernels/fused_linear_ce_torch.h"
#include "studio/trainer/batching/batch.h"
#include "studio/trainer/loss.h"

using namespace studio;

namespace {


double rel(const torch::Tensor& a, const torch::Tensor& b) {
  auto x = a.to(torch::kCPU, torch::kDouble), y = b.to(torch::kCPU, torch::kDouble);
  return ((x - y).abs().max() / y.abs().max().clamp_min(1e-30)).item<double>();
}

}  // namespace

class TestFusedLinearCeTorch : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void refusesCpuTensors() {
    auto x = torch::ones({2, 8}), w = torch::ones({5, 8});
    auto t = torch::zeros({2}, torch::kLong);
    try {
      kernels::fused_linear_ce(x, w, t, {true, true, false});
      QFAIL("a CPU x was accepted");
    } catch (const c10::Error& e) {
      QVERIFY2(std::string(e.what()).find("fused_linear_ce: x must be a CUDA tensor") !=
                   std::string::npos,
               e.what());
    }
  }

  void engineLossOnCudaMatchesCpu_data() {
    QTest::addColumn<bool>("bf16");
    QTest::addColumn<bool>("no_targets");
    QTest::newRow("fp32") << false << false;
    QTest::newRow("bf16") << true << false;
    QTest::newRow("fp32, no target on this rank") << false << true;
  }
  void engineLossOnCudaMatchesCpu() {
    QFETCH(bool, bf16);
    QFETCH(bool, no_targets);
    REQUIRE_TORCH_GPU();
    torch::manual_seed(4);
    const auto dtype = bf16 ? torch::kBFloat16 : torch::kFloat;
    const int64_t T = 700, H = 96, V = 5000;
    auto h = torch::randn({1, T, H}).to(dtype);
    auto w = (torch::randn({V, H}) * 0.05).to(dtype);
    auto t = torch::randint(0, V, {1, T}, torch::kLong);
    t.narrow(1, 0, 100).fill_(trainer::kIgnoreIndex);
    if (no_targets) t.fill_(trainer::kIgnoreIndex);
    const torch::Device dev(torch::kCUDA, 0);
    auto run = [&](const torch::Device& d) {
      auto hd = h.to(d).requires_grad_(), wd = w.to(d).requires_grad_();
      auto loss = trainer::lm_cross_entropy_sum(hd, wd, t.to(d));
      (loss * 0.5).backward();
      return std::tuple{loss.detach(), hd.grad(), wd.grad()};
    };
    const auto [l_cpu, gh_cpu, gw_cpu] = run(torch::kCPU);
    const auto [l_gpu, gh_gpu, gw_gpu] = run(dev);
    const double tol = bf16 ? 2e-2 : 1e-4;
    QVERIFY2(std::fabs(l_gpu.item<double>() - l_cpu.item<double>()) <=
                 tol * std::max(1.0, std::fabs(l_cpu.item<double>())),
             qPrintable(QString("loss %1 vs %2").arg(l_gpu.item<double>()).arg(l_cpu.item<double>())));
    if (no_targets) {
      QCOMPARE(gw_gpu.abs().sum().item<double>(), 0.0);
      return;
    }
    QVERIFY2(rel(gh_gpu, gh_cpu) <= tol, qPrintable(QString::number(rel(gh_gpu, gh_cpu))));
    QVERIFY2(rel(gw_gpu, gw_cpu) <= tol, qPrintable(QString::number(rel(gw_gpu, gw_cpu))));
  }

  // DPO's gathering on CUDA: the forward's log-probs from the kernel, the backward's recompute.
  void logprobsOnCudaMatchCpu() {
    REQUIRE_TORCH_GPU();
    torch::manual_seed(5);
    const int64_t T = 300, H = 64, V = 3000;
    auto h = torch::randn({2, T, H});
    auto w = torch::randn({V, H}) * 0.05;
    auto t = torch::randint(0, V, {2, T}, torch::kLong);
    t.narrow(1, 0, 40).fill_(trainer::kIgnoreIndex);
    const auto up = torch::randn({2, T});
    auto run = [&](const torch::Device& d) {
      auto hd = h.to(d).requires_grad_(), wd = w.to(d).requires_grad_();
      auto lp = trainer::lm_target_logprobs(hd, wd, t.to(d));
      (lp * up.to(d)).sum().backward();
      return std::tuple{lp.detach(), hd.grad(), wd.grad()};
    };
    const auto [lp_cpu, gh_cpu, gw_cpu] = run(torch::kCPU);
    const auto [lp_gpu, gh_gpu, gw_gpu] = run(torch::Device(torch::kCUDA, 0));
    QVERIFY2(rel(lp_gpu, lp_cpu) <= 1e-4, qPrintable(QString::number(rel(lp_gpu, lp_cpu))));
    QVERIFY2(rel(gh_gpu, gh_cpu) <= 1e-4, qPrintable(QString::number(rel(gh_gpu, gh_cpu))));
    QVERIFY2(rel(gw_gpu, gw_cpu) <= 1e-4, qPrintable(QString::number(rel(gw_gpu, gw_cpu))));
  }
};

QTEST_MAIN(TestFusedLinearCeTorch)
#include "tst_fused_linear_ce_torch.moc"
