// The fused linear + cross-entropy CUDA path against the unchunked long-double evaluation, for
// fp32 and bf16 inputs, several chunkings, ignored tokens and an upstream scale, within the
// bounds of tst_fused_linear_ce_support.h with eps = 2 * FLT_EPSILON: fp32 accumulation, where
// tensor-core GEMMs truncate rather than round their additions (Fasi, Higham, Mikaitis and
// Pranesh, "Numerical behavior of NVIDIA tensor cores", 2021) and expf may be off by 2 ulp, so
// each step may cost one ulp instead of half; plus for bf16 the rounding of dlogits (the GEMM
// operand) and of grad_x to 8 significant bits (unit 2^-8).
// Functions that need a GPU skip themselves where none is usable; the failure path of the
// launcher (no device: cuBLAS cannot start) is exercised everywhere.
#include "cuda_test_support.h"
#include "studio/kernels/cuda_check.h"
#include "studio/kernels/fused_linear_ce.h"
#include "tst_fused_linear_ce_support.h"

#include <QtTest>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

using namespace studio::kernels;
using namespace linear_ce_test;

namespace {

constexpr double kBf16Unit = 1.0 / 256;
constexpr double kDeviceEps = 2.0 * FLT_EPSILON;
constexpr std::int64_t kIgnore = kCrossEntropyIgnoreIndex;

class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes_ > 0) STUDIO_CUDA_CHECK(cudaMalloc(&ptr_, bytes_));
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(DeviceBuffer&& other) noexcept : ptr_(other.ptr_), bytes_(other.bytes_) {
    other.ptr_ = nullptr;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;
  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

  // Fills with 0xff bytes (NaN in fp32 and bf16), so an output that is not written shows.
  void poison() { STUDIO_CUDA_CHECK(cudaMemset(ptr_, 0xff, bytes_)); }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_;
};

DeviceBuffer upload(const Vec& v, DType t) {
  DeviceBuffer buf(v.size() * dtype_size(t));
  std::vector<unsigned char> host(buf.bytes());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (t == DType::kFloat32) {
      const auto f = static_cast<float>(v[i]);
      std::memcpy(host.data() + 4 * i, &f, 4);
    } else {
      const std::uint16_t h = to_bf16(static_cast<float>(v[i]));
      std::memcpy(host.data() + 2 * i, &h, 2);
    }
  }
  STUDIO_CUDA_CHECK(cudaMemcpy(buf.get(), host.data(), host.size(), cudaMemcpyHostToDevice));
  return buf;
}

Vec download(const DeviceBuffer& buf, DType t) {
  std::vector<unsigned char> host(buf.bytes());
  STUDIO_CUDA_CHECK(cudaMemcpy(host.data(), buf.get(), host.size(), cudaMemcpyDeviceToHost));
  Vec v(host.size() / dtype_size(t));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (t == DType::kFloat32) {
      float f;
      std::memcpy(&f, host.data() + 4 * i, 4);
      v[i] = f;
    } else {
      std::uint16_t h;
      std::memcpy(&h, host.data() + 2 * i, 2);
      v[i] = from_bf16(h);
    }
  }
  return v;
}

struct DeviceResult {
  double loss_sum = 0;
  std::int64_t count = -1;
  Vec logprobs, grad_x, grad_w;
};

DeviceResult run_device(const Vec& x, const Vec& w, const std::vector<std::int64_t>& tg,
                        LinearCeShape s, DType t, std::int64_t chunk, double scale, bool grads) {
  const DeviceBuffer xd = upload(x, t), wd = upload(w, t);
  DeviceBuffer td(tg.size() * sizeof(std::int64_t));
  STUDIO_CUDA_CHECK(cudaMemcpy(td.get(), tg.data(), td.bytes(), cudaMemcpyHostToDevice));
  DeviceBuffer loss(sizeof(float)), count(sizeof(std::int64_t));
  DeviceBuffer lp(tg.size() * sizeof(float));
  DeviceBuffer gx(grads ? x.size() * dtype_size(t) : 0);
  DeviceBuffer gw(grads ? w.size() * sizeof(float) : 0);
  DeviceBuffer ws(fused_linear_ce_workspace_bytes(s, chunk, t, grads));
  for (DeviceBuffer* b : {&loss, &count, &lp, &gx, &gw, &ws}) {
    if (b->bytes() > 0) b->poison();
  }
  FusedLinearCeParams p;
  p.x = xd.get();
  p.weight = wd.get();
  p.targets = static_cast<const std::int64_t*>(td.get());
  p.shape = s;
  p.chunk_tokens = chunk;
  p.grad_scale = static_cast<float>(scale);
  p.dtype = t;
  p.loss_sum = static_cast<float*>(loss.get());
  p.target_count = static_cast<std::int64_t*>(count.get());
  p.target_logprobs = static_cast<float*>(lp.get());
  p.grad_x = grads ? gx.get() : nullptr;
  p.grad_weight = grads ? static_cast<float*>(gw.get()) : nullptr;
  p.workspace = ws.get();
  p.workspace_bytes = ws.bytes();
  fused_linear_ce(p, nullptr, nullptr);
  STUDIO_CUDA_CHECK(cudaDeviceSynchronize());

  DeviceResult r;
  r.loss_sum = download(loss, DType::kFloat32)[0];
  STUDIO_CUDA_CHECK(cudaMemcpy(&r.count, count.get(), sizeof r.count, cudaMemcpyDeviceToHost));
  r.logprobs = download(lp, DType::kFloat32);
  if (grads) {
    r.grad_x = download(gx, t);
    r.grad_w = download(gw, DType::kFloat32);
  }
  return r;
}

}  // namespace

class TestFusedLinearCeCuda : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void matchesExact_data();
  void matchesExact();
  void isDeterministic();
  void launchWithoutDeviceThrows();
};

void TestFusedLinearCeCuda::matchesExact_data() {
  QTest::addColumn<int>("dtype");
  QTest::addColumn<qint64>("tokens");
  QTest::addColumn<qint64>("hidden");
  QTest::addColumn<qint64>("vocab");
  QTest::addColumn<qint64>("chunk");
  QTest::addColumn<int>("ignored");  // 0 none, 1 every third, 2 all
  QTest::addColumn<double>("scale");
  for (const DType t : {DType::kFloat32, DType::kBFloat16}) {
    const QByteArray n = dtype_name(t);
    const int d = int(t);
    QTest::newRow((n + " one token").constData())
        << d << qint64(1) << qint64(64) << qint64(50) << qint64(0) << 0 << 1.0;
    QTest::newRow((n + " T not a multiple of chunk, every third ignored").constData())
        << d << qint64(300) << qint64(128) << qint64(1000) << qint64(64) << 1 << 1.0 / 300;
    QTest::newRow((n + " large-ish vocab, automatic chunk").constData())
        << d << qint64(96) << qint64(128) << qint64(4099) << qint64(0) << 1 << 1.0;
    QTest::newRow((n + " all ignored").constData())
        << d << qint64(9) << qint64(32) << qint64(17) << qint64(4) << 2 << 1.0;
    QTest::newRow((n + " one chunk, negative scale").constData())
        << d << qint64(40) << qint64(96) << qint64(33) << qint64(0) << 0 << -0.5;
  }
}

void TestFusedLinearCeCuda::matchesExact() {
  REQUIRE_DEVICE();
  QFETCH(int, dtype);
  QFETCH(qint64, tokens);
  QFETCH(qint64, hidden);
  QFETCH(qint64, vocab);
  QFETCH(qint64, chunk);
  QFETCH(int, ignored);
  QFETCH(double, scale);
  const DType t = static_cast<DType>(dtype);
  const bool bf16 = t == DType::kBFloat16;
  const LinearCeShape s{tokens, hidden, vocab};
  const Vec x = random_values(static_cast<std::size_t>(tokens * hidden), 1.0, 31, bf16);
  const Vec w = random_values(static_cast<std::size_t>(vocab * hidden), 0.3, 32, bf16);
  const auto tg = make_targets(tokens, vocab, ignored, kIgnore, 33);
  const Exact exact = exact_linear_ce(x, w, tg, s, kIgnore, scale);
  const double unit = bf16 ? kBf16Unit : 0.0;
  const Tolerances tol =
      linear_ce_tolerances(x, w, tg, s, kIgnore, scale, exact, kDeviceEps, unit, unit);

  const DeviceResult r = run_device(x, w, tg, s, t, chunk, scale, true);
  QCOMPARE(r.count, exact.count);
  // The loss is additionally rounded to fp32 once at the end.
  const double loss_tol = tol.loss_sum + kDeviceEps * std::abs(exact.loss_sum);
  QVERIFY2(std::abs(r.loss_sum - exact.loss_sum) <= loss_tol,
           qPrintable(QStringLiteral("loss %1 vs %2, tol %3")
                          .arg(r.loss_sum, 0, 'g', 9)
                          .arg(exact.loss_sum, 0, 'g', 12)
                          .arg(loss_tol)));
  expect_within(r.logprobs, exact.logprobs, tol.logprobs, "logprobs");
  expect_within(r.grad_x, exact.grad_x, tol.grad_x, "grad_x");
  expect_within(r.grad_w, exact.grad_w, tol.grad_w, "grad_weight");

  // Log-probs only: the same kernels up to the loss, so the same bits.
  const DeviceResult f = run_device(x, w, tg, s, t, chunk, scale, false);
  QCOMPARE(f.loss_sum, r.loss_sum);
  QVERIFY(f.logprobs == r.logprobs);
}

// Fixed-order reductions and no atomics: repeated runs agree bit for bit.
void TestFusedLinearCeCuda::isDeterministic() {
  REQUIRE_DEVICE();
  const LinearCeShape s{500, 256, 3000};
  const Vec x = random_values(static_cast<std::size_t>(s.tokens * s.hidden), 1.0, 41, true);
  const Vec w = random_values(static_cast<std::size_t>(s.vocab * s.hidden), 0.3, 42, true);
  const auto tg = make_targets(s.tokens, s.vocab, 1, kIgnore, 43);
  const DeviceResult a = run_device(x, w, tg, s, DType::kBFloat16, 128, 1e-3, true);
  const DeviceResult b = run_device(x, w, tg, s, DType::kBFloat16, 128, 1e-3, true);
  QCOMPARE(a.loss_sum, b.loss_sum);
  QVERIFY(a.logprobs == b.logprobs);
  QVERIFY(a.grad_x == b.grad_x);
  QVERIFY(a.grad_w == b.grad_w);
}

// Without a driver or device the launcher's first CUDA-side step (its private cuBLAS handle)
// fails; that must surface as KernelError naming the call, not pass silently or crash.
void TestFusedLinearCeCuda::launchWithoutDeviceThrows() {
  QString why;
  if (cuda_test::device_usable(&why)) QSKIP("a device is usable here");
  std::vector<float> x(8, 1.0f), w(12, 1.0f), lp(2);
  std::vector<std::int64_t> tg = {1, kIgnore};
  float loss = 0;
  const LinearCeShape s{2, 4, 3};
  alignas(256) static unsigned char ws[1024];
  FusedLinearCeParams p;
  p.x = x.data();
  p.weight = w.data();
  p.targets = tg.data();
  p.shape = s;
  p.loss_sum = &loss;
  p.target_logprobs = lp.data();
  p.workspace = ws;
  p.workspace_bytes = sizeof ws;
  QVERIFY(p.workspace_bytes >= fused_linear_ce_workspace_bytes(s, 0, DType::kFloat32, false));
  try {
    fused_linear_ce(p, nullptr, nullptr);
    QFAIL("launch without a device did not throw");
  } catch (const KernelError& e) {
    QVERIFY2(QString::fromStdString(e.statement()).contains("cublasCreate"), e.what());
    QVERIFY2(QString(e.what()).contains("fused_linear_ce.cu:"), e.what());
    QVERIFY(e.code() != 0);
  }
}

QTEST_MAIN(TestFusedLinearCeCuda)
#include "tst_fused_linear_ce_cuda.moc"
