// The RMSNorm CUDA kernels against the double-precision CPU reference, for fp32 and bf16
// activations and weights, padded rows, in-place forward and both backward modes (saved or
// recomputed rstd). Functions that need a GPU skip themselves where none is usable; the error
// path is exercised everywhere.
//
// Tolerances follow tst_rmsnorm_ref.cpp: fp32 accumulation over n terms is held to
// (8 + sqrt(n)) * FLT_EPSILON relative to the magnitudes summed; a bf16 output adds its own
// rounding, at most 2^-8 relative (8 significant bits).
#include "cuda_test_support.h"
#include "studio/kernels/cuda_check.h"
#include "studio/kernels/rmsnorm.h"
#include "studio/kernels/rmsnorm_ref.h"

#include <QtTest>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace studio::kernels;

namespace {

using Vec = std::vector<double>;

constexpr double kBf16Unit = 1.0 / 256;  // unit roundoff of bfloat16

std::uint16_t to_bf16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if (std::isnan(f)) return 0x7fc0;
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<std::uint16_t>(bits >> 16);
}

float from_bf16(std::uint16_t h) {
  const std::uint32_t bits = std::uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Values exactly representable in `t`, so host reference and device see the same inputs.
Vec random_values(std::size_t n, double scale, DType t, unsigned seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> dist(-scale, scale);
  Vec v(n);
  for (auto& e : v) {
    const float f = static_cast<float>(dist(gen));
    e = t == DType::kBFloat16 ? from_bf16(to_bf16(f)) : f;
  }
  return v;
}

class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    if (bytes_ > 0) STUDIO_CUDA_CHECK(cudaMalloc(&ptr_, bytes_));
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_;
};

// A [rows, cols] matrix (or a vector when rows == 1) in device memory with a row stride.
struct Matrix {
  std::int64_t rows;
  std::int64_t cols;
  std::int64_t stride;
  DType dtype;
  DeviceBuffer buffer;

  Matrix(std::int64_t r, std::int64_t c, std::int64_t s, DType t)
      : rows(r),
        cols(c),
        stride(s),
        dtype(t),
        buffer(static_cast<std::size_t>(r * s) * dtype_size(t)) {}

  void upload(const Vec& v) {
    std::vector<unsigned char> host(buffer.bytes(), 0);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) put(host, r * stride + c, v[r * cols + c]);
    }
    STUDIO_CUDA_CHECK(cudaMemcpy(buffer.get(), host.data(), host.size(), cudaMemcpyHostToDevice));
  }

  Vec download() const {
    std::vector<unsigned char> host(buffer.bytes());
    STUDIO_CUDA_CHECK(cudaMemcpy(host.data(), buffer.get(), host.size(), cudaMemcpyDeviceToHost));
    Vec v(static_cast<std::size_t>(rows * cols));
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) v[r * cols + c] = get(host, r * stride + c);
    }
    return v;
  }

 private:
  void put(std::vector<unsigned char>& host, std::int64_t i, double v) const {
    if (dtype == DType::kFloat32) {
      const float f = static_cast<float>(v);
      std::memcpy(host.data() + i * 4, &f, 4);
    } else {
      const std::uint16_t h = to_bf16(static_cast<float>(v));
      std::memcpy(host.data() + i * 2, &h, 2);
    }
  }
  double get(const std::vector<unsigned char>& host, std::int64_t i) const {
    if (dtype == DType::kFloat32) {
      float f;
      std::memcpy(&f, host.data() + i * 4, 4);
      return f;
    }
    std::uint16_t h;
    std::memcpy(&h, host.data() + i * 2, 2);
    return from_bf16(h);
  }
};

double accumulation_tolerance(std::int64_t n) {
  return (8.0 + std::sqrt(static_cast<double>(n))) * FLT_EPSILON;
}

double output_rounding(DType t) {
  return t == DType::kBFloat16 ? kBf16Unit : 0.0;
}

// |got - want| <= rel * mag + out_unit * |want| for every element.
void expect_within(const Vec& got, const Vec& want, const Vec& mag, double rel, double out_unit,
                   const char* what) {
  QCOMPARE(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double tol = rel * mag[i] + out_unit * std::abs(want[i]);
    if (std::abs(got[i] - want[i]) > tol) {
      QFAIL(qPrintable(QStringLiteral("%1[%2]: got %3, want %4, tol %5")
                           .arg(what)
                           .arg(i)
                           .arg(got[i], 0, 'g', 9)
                           .arg(want[i], 0, 'g', 12)
                           .arg(tol)));
    }
  }
}

Vec abs_of(const Vec& v) {
  Vec a(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) a[i] = std::abs(v[i]);
  return a;
}

}  // namespace

class TestRmsNormCuda : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void forward_data();
  void forward();
  void backward_data();
  void backward();
  void backwardIsDeterministic();
  void checkMacroCarriesContext();
  void launchWithoutDeviceThrows();

 private:
  void add_cases();
};

void TestRmsNormCuda::add_cases() {
  QTest::addColumn<int>("dtype");
  QTest::addColumn<int>("weight_dtype");
  QTest::addColumn<qint64>("rows");
  QTest::addColumn<qint64>("cols");
  QTest::addColumn<qint64>("pad");
  QTest::addColumn<double>("scale");
  const int f32 = int(DType::kFloat32), b16 = int(DType::kBFloat16);
  QTest::newRow("fp32 1x1") << f32 << f32 << qint64(1) << qint64(1) << qint64(0) << 1.0;
  QTest::newRow("fp32 odd 7x33") << f32 << f32 << qint64(7) << qint64(33) << qint64(0) << 2.0;
  QTest::newRow("fp32 512x4096") << f32 << f32 << qint64(512) << qint64(4096) << qint64(0) << 1.0;
  QTest::newRow("fp32 padded 300x4097")
      << f32 << f32 << qint64(300) << qint64(4097) << qint64(3) << 1.0;
  QTest::newRow("fp32 large 1e15") << f32 << f32 << qint64(16) << qint64(1000) << qint64(0) << 1e15;
  QTest::newRow("bf16 1000x2048") << b16 << b16 << qint64(1000) << qint64(2048) << qint64(0) << 1.0;
  QTest::newRow("bf16 x, fp32 w, odd")
      << b16 << f32 << qint64(33) << qint64(4099) << qint64(1) << 3.0;
  QTest::newRow("fp32 x, bf16 w") << f32 << b16 << qint64(64) << qint64(768) << qint64(0) << 1.0;
}

void TestRmsNormCuda::forward_data() {
  add_cases();
}

void TestRmsNormCuda::forward() {
  REQUIRE_DEVICE();
  QFETCH(int, dtype);
  QFETCH(int, weight_dtype);
  QFETCH(qint64, rows);
  QFETCH(qint64, cols);
  QFETCH(qint64, pad);
  QFETCH(double, scale);
  const DType t = static_cast<DType>(dtype), wt = static_cast<DType>(weight_dtype);
  const float eps = 1e-6f;
  const Vec x = random_values(static_cast<std::size_t>(rows * cols), scale, t, 1);
  const Vec w = random_values(static_cast<std::size_t>(cols), 1.0, wt, 2);
  Vec y_ref(x.size()), rstd_ref(static_cast<std::size_t>(rows));
  rmsnorm_forward_ref(x.data(), w.data(), y_ref.data(), rstd_ref.data(), {rows, cols}, eps);

  // In place: x is overwritten by y (same buffer and stride).
  Matrix xm(rows, cols, cols + pad, t), wm(1, cols, cols, wt), rstd(1, rows, rows, DType::kFloat32);
  xm.upload(x);
  wm.upload(w);
  RmsNormForwardParams p;
  p.x = p.y = xm.buffer.get();
  p.weight = wm.buffer.get();
  p.rstd = static_cast<float*>(rstd.buffer.get());
  p.rows = rows;
  p.cols = cols;
  p.x_row_stride = p.y_row_stride = cols + pad;
  p.eps = eps;
  p.dtype = t;
  p.weight_dtype = wt;
  rmsnorm_forward(p, nullptr);
  STUDIO_CUDA_CHECK(cudaDeviceSynchronize());

  const double rel = accumulation_tolerance(cols);
  expect_within(xm.download(), y_ref, abs_of(y_ref), rel, output_rounding(t), "y");
  expect_within(rstd.download(), rstd_ref, rstd_ref, rel, 0.0, "rstd");
}

void TestRmsNormCuda::backward_data() {
  add_cases();
}

void TestRmsNormCuda::backward() {
  REQUIRE_DEVICE();
  QFETCH(int, dtype);
  QFETCH(int, weight_dtype);
  QFETCH(qint64, rows);
  QFETCH(qint64, cols);
  QFETCH(qint64, pad);
  QFETCH(double, scale);
  const DType t = static_cast<DType>(dtype), wt = static_cast<DType>(weight_dtype);
  const float eps = 1e-6f;
  const Vec x = random_values(static_cast<std::size_t>(rows * cols), scale, t, 3);
  const Vec w = random_values(static_cast<std::size_t>(cols), 1.0, wt, 4);
  const Vec dy = random_values(x.size(), 1.0, t, 5);
  Vec dx_ref(x.size()), dw_ref(w.size()), y(x.size()), rstd_ref(static_cast<std::size_t>(rows));
  rmsnorm_backward_ref(dy.data(), x.data(), w.data(), dx_ref.data(), dw_ref.data(), {rows, cols},
                       eps);
  rmsnorm_forward_ref(x.data(), w.data(), y.data(), rstd_ref.data(), {rows, cols}, eps);

  const std::int64_t stride = cols + pad;
  Matrix xm(rows, cols, stride, t), dym(rows, cols, stride, t), dxm(rows, cols, stride, t);
  Matrix wm(1, cols, cols, wt), dwm(1, cols, cols, wt);
  Matrix rstd(1, rows, rows, DType::kFloat32);
  xm.upload(x);
  dym.upload(dy);
  wm.upload(w);
  rstd.upload(rstd_ref);
  DeviceBuffer ws(rmsnorm_backward_workspace_bytes(rows, cols));

  // Both modes: rstd saved by a forward (here the reference's, rounded to fp32) and recomputed.
  RmsNormBackwardParams p;
  p.dy = dym.buffer.get();
  p.x = xm.buffer.get();
  p.weight = wm.buffer.get();
  p.dx = dxm.buffer.get();
  p.dweight = dwm.buffer.get();
  p.workspace = ws.get();
  p.workspace_bytes = ws.bytes();
  p.rows = rows;
  p.cols = cols;
  p.dy_row_stride = p.x_row_stride = p.dx_row_stride = stride;
  p.eps = eps;
  p.dtype = t;
  p.weight_dtype = wt;
  for (const bool saved : {true, false}) {
    p.rstd = saved ? static_cast<const float*>(rstd.buffer.get()) : nullptr;
    rmsnorm_backward(p, nullptr);
    STUDIO_CUDA_CHECK(cudaDeviceSynchronize());

    Vec mag_dx(x.size()), mag_dw(w.size(), 0.0);
    for (std::int64_t r = 0; r < rows; ++r) {
      double abs_dot = 0;
      for (std::int64_t c = 0; c < cols; ++c) {
        abs_dot += std::abs(dy[r * cols + c] * w[c] * x[r * cols + c]);
      }
      const double rs = rstd_ref[r];
      for (std::int64_t c = 0; c < cols; ++c) {
        const std::size_t i = static_cast<std::size_t>(r * cols + c);
        mag_dx[i] = rs * std::abs(dy[i] * w[c]) + std::abs(x[i]) * rs * rs * rs * abs_dot / cols;
        mag_dw[c] += std::abs(dy[i] * x[i]) * rs;
      }
    }
    const double rel_dx = accumulation_tolerance(cols);
    const double rel_dw = accumulation_tolerance(cols) + std::sqrt(double(rows)) * FLT_EPSILON;
    expect_within(dxm.download(), dx_ref, mag_dx, rel_dx, output_rounding(t), "dx");
    expect_within(dwm.download(), dw_ref, mag_dw, rel_dw, output_rounding(wt), "dw");
  }
}

// The dweight reduction has a fixed order, so repeated runs agree bit for bit.
void TestRmsNormCuda::backwardIsDeterministic() {
  REQUIRE_DEVICE();
  const std::int64_t rows = 3000, cols = 1024;
  const Vec x = random_values(rows * cols, 1.0, DType::kFloat32, 6);
  const Vec w = random_values(cols, 1.0, DType::kFloat32, 7);
  Matrix xm(rows, cols, cols, DType::kFloat32), dxm(rows, cols, cols, DType::kFloat32);
  Matrix wm(1, cols, cols, DType::kFloat32), dwm(1, cols, cols, DType::kFloat32);
  xm.upload(x);
  wm.upload(w);
  DeviceBuffer ws(rmsnorm_backward_workspace_bytes(rows, cols));
  RmsNormBackwardParams p;
  p.dy = p.x = xm.buffer.get();
  p.weight = wm.buffer.get();
  p.dx = dxm.buffer.get();
  p.dweight = dwm.buffer.get();
  p.workspace = ws.get();
  p.workspace_bytes = ws.bytes();
  p.rows = rows;
  p.cols = cols;
  p.dy_row_stride = p.x_row_stride = p.dx_row_stride = cols;
  rmsnorm_backward(p, nullptr);
  STUDIO_CUDA_CHECK(cudaDeviceSynchronize());
  const Vec first = dwm.download();
  rmsnorm_backward(p, nullptr);
  STUDIO_CUDA_CHECK(cudaDeviceSynchronize());
  QVERIFY(dwm.download() == first);
}

void TestRmsNormCuda::checkMacroCarriesContext() {
  try {
    STUDIO_CUDA_CHECK(cudaSetDevice(1 << 20));
    QFAIL("cudaSetDevice of a nonexistent device succeeded");
  } catch (const KernelError& e) {
    const QString what = e.what();
    QVERIFY2(what.contains("cudaSetDevice(1 << 20)"), qPrintable(what));
    QVERIFY2(what.contains("tst_rmsnorm_cuda.cpp:"), qPrintable(what));
    QVERIFY(e.code() != 0);
    QVERIFY(!e.error_text().empty());
  }
  cudaGetLastError();
}

// Without a driver or device every launch fails; that must surface as KernelError, not pass
// silently. (With a device there is no harmless way to make a valid launch fail.)
void TestRmsNormCuda::launchWithoutDeviceThrows() {
  QString why;
  if (cuda_test::device_usable(&why)) QSKIP("a device is usable here");
  std::vector<float> x(8, 1.0f), w(4, 1.0f), y(8);
  RmsNormForwardParams p;
  p.x = x.data();
  p.weight = w.data();
  p.y = y.data();
  p.rows = 2;
  p.cols = 4;
  p.x_row_stride = p.y_row_stride = 4;
  try {
    rmsnorm_forward(p, nullptr);
    QFAIL("launch without a device did not throw");
  } catch (const KernelError& e) {
    QCOMPARE(QString::fromStdString(e.statement()), QString("kernel launch"));
    QVERIFY2(QString(e.what()).contains("rmsnorm.cu:"), e.what());
  }
}

QTEST_MAIN(TestRmsNormCuda)
#include "tst_rmsnorm_cuda.moc"
