// The LibTorch adapter of the RMSNorm kernels (studio_kernels_torch) against the plain-ATen
// reference the engine uses (studio::trainer::rms_norm_reference, autograd for its backward):
// fp32 and bf16, a multi-dimensional x, both backward modes, on the current CUDA stream of a
// non-default stream. The argument checks run everywhere (a CPU tensor is refused with a message);
// everything that launches a kernel skips itself where no GPU is usable.
#include <QtTest>

#include <torch/torch.h>

#include "torch_test_support.h"

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "studio/kernels/rmsnorm_torch.h"
#include "studio/trainer/model/layers.h"
#include "studio/trainer/rmsnorm_reference.h"

using namespace studio;

class TestRmsNormTorch : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void refusesCpuTensors() {
    auto x = torch::ones({2, 8});
    auto w = torch::ones({8});
    try {
      kernels::rmsnorm_forward(x, w, 1e-6);
      QFAIL("a CPU x was accepted");
    } catch (const c10::Error& e) {
      QVERIFY2(std::string(e.what()).find("rmsnorm: x must be a CUDA tensor") != std::string::npos,
               e.what());
    }
  }

  void matchesAtenReference_data() {
    QTest::addColumn<bool>("bf16");
    QTest::addColumn<bool>("saved_rstd");
    QTest::newRow("fp32, saved rstd") << false << true;
    QTest::newRow("fp32, recomputed rstd") << false << false;
    QTest::newRow("bf16, saved rstd") << true << true;
    QTest::newRow("bf16, recomputed rstd") << true << false;
  }
  void matchesAtenReference() {
    QFETCH(bool, bf16);
    QFETCH(bool, saved_rstd);
    REQUIRE_TORCH_GPU();
    const auto dtype = bf16 ? torch::kBFloat16 : torch::kFloat;
    const double eps = 1e-6;
    torch::manual_seed(3);
    const torch::Device dev(torch::kCUDA, 0);
    auto x = torch::randn({3, 37, 1000}, torch::TensorOptions().dtype(dtype).device(dev));
    auto w = (1 + 0.1 * torch::randn({1000})).to(dev, dtype);
    auto dy = torch::randn_like(x);

    // The reference, with autograd, in fp32 from the same (rounded) inputs.
    auto xr = x.to(torch::kFloat).requires_grad_(true);
    auto wr = w.to(torch::kFloat).requires_grad_(true);
    auto yr = trainer::rms_norm_reference(xr, wr, eps);
    yr.backward(dy.to(torch::kFloat));

    // The kernels on a side stream: the adapter must use the current stream.
    auto stream = c10::cuda::getStreamFromPool(false, 0);
    c10::cuda::CUDAStreamGuard guard(stream);
    auto fwd = kernels::rmsnorm_forward(x, w, eps);
    auto bwd = kernels::rmsnorm_backward(dy, x, w, saved_rstd ? fwd.rstd : at::Tensor(), eps, true);
    stream.synchronize();

    const double tol = bf16 ? 1.0 / 64 : 1e-5;  // bf16: a few units of its 2^-8 rounding
    auto close = [&](const torch::Tensor& got, const torch::Tensor& want, const char* what) {
      const double err = (got.to(torch::kFloat) - want).abs().max().item<double>();
      const double scale = std::max(1.0, want.abs().max().item<double>());
      QVERIFY2(err <= tol * scale, qPrintable(QString("%1: max |diff| %2 (scale %3)")
                                                  .arg(what).arg(err).arg(scale)));
    };
    QCOMPARE(fwd.y.scalar_type(), dtype);
    close(fwd.y, yr.detach(), "y");
    close(bwd.dx, xr.grad(), "dx");
    // dweight sums 111 rows: bf16's output rounding is relative to the sum.
    close(bwd.dweight, wr.grad(), "dweight");
  }

  // The engine's RMSNorm module runs these kernels on CUDA (trainer/model/layers.cpp): its
  // output and both gradients against the same module on the CPU.
  void engineNormOnCudaMatchesCpu_data() {
    QTest::addColumn<bool>("bf16");
    QTest::newRow("fp32") << false;
    QTest::newRow("bf16") << true;
  }
  void engineNormOnCudaMatchesCpu() {
    QFETCH(bool, bf16);
    REQUIRE_TORCH_GPU();
    torch::manual_seed(9);
    const auto dtype = bf16 ? torch::kBFloat16 : torch::kFloat;
    const auto x = torch::randn({2, 33, 256}).to(dtype);
    const auto w = (1 + 0.1 * torch::randn({256})).to(dtype);
    const auto dy = torch::randn({2, 33, 256}).to(dtype);
    auto run = [&](const torch::Device& d) {
      trainer::RMSNorm norm(256, 1e-6, torch::TensorOptions().dtype(dtype).device(d));
      {
        torch::NoGradGuard no_grad;
        norm->weight.copy_(w);
      }
      auto xd = x.to(d).requires_grad_();
      auto y = norm(xd);
      y.backward(dy.to(d));
      return std::tuple{y.detach().to(torch::kCPU, torch::kDouble),
                        xd.grad().to(torch::kCPU, torch::kDouble),
                        norm->weight.grad().to(torch::kCPU, torch::kDouble)};
    };
    const auto [y0, dx0, dw0] = run(torch::kCPU);
    const auto [y1, dx1, dw1] = run(torch::Device(torch::kCUDA, 0));
    const double tol = bf16 ? 2e-2 : 1e-5;
    for (const auto& [a, b] : {std::pair{y1, y0}, std::pair{dx1, dx0}, std::pair{dw1, dw0}})
      QVERIFY2(((a - b).abs().max() / b.abs().max()).item<double>() <= tol,
               qPrintable(QString::number(((a - b).abs().max() / b.abs().max()).item<double>())));
  }
};

QTEST_MAIN(TestRmsNormTorch)
#include "tst_rmsnorm_torch.moc"
