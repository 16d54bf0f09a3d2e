// The host-side rules the RMSNorm launchers apply before touching a GPU: every launch goes
// through validate(), so these run (and must hold) on machines without CUDA as well.
#include "studio/kernels/rmsnorm.h"

#include <QtTest>

#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <vector>

using namespace studio::kernels;

using ForwardEdit = std::function<void(RmsNormForwardParams&)>;
using BackwardEdit = std::function<void(RmsNormBackwardParams&)>;
Q_DECLARE_METATYPE(ForwardEdit)
Q_DECLARE_METATYPE(BackwardEdit)

namespace {

constexpr std::int64_t kRows = 4;
constexpr std::int64_t kCols = 6;

// Host buffers stand in for device memory: validate() only looks at values and addresses.
struct Buffers {
  std::vector<float> x = std::vector<float>(kRows * kCols);
  std::vector<float> y = std::vector<float>(kRows * kCols);
  std::vector<float> w = std::vector<float>(kCols);
  std::vector<float> rstd = std::vector<float>(kRows);
  std::vector<float> ws = std::vector<float>(kRows * kCols);
};

RmsNormForwardParams valid_forward(Buffers& b) {
  RmsNormForwardParams p;
  p.x = b.x.data();
  p.weight = b.w.data();
  p.y = b.y.data();
  p.rstd = b.rstd.data();
  p.rows = kRows;
  p.cols = kCols;
  p.x_row_stride = kCols;
  p.y_row_stride = kCols;
  return p;
}

RmsNormBackwardParams valid_backward(Buffers& b) {
  RmsNormBackwardParams p;
  p.dy = b.y.data();
  p.x = b.x.data();
  p.weight = b.w.data();
  p.rstd = b.rstd.data();
  p.dx = b.y.data();
  p.dweight = b.w.data();
  p.workspace = b.ws.data();
  p.workspace_bytes = b.ws.size() * sizeof(float);
  p.rows = kRows;
  p.cols = kCols;
  p.dy_row_stride = kCols;
  p.x_row_stride = kCols;
  p.dx_row_stride = kCols;
  return p;
}

const void* offset_bytes(const void* p, std::ptrdiff_t n) {
  return static_cast<const char*>(p) + n;
}

// Checks that validate() accepts (empty `error`) or rejects with a message containing `error`.
template <typename Params>
void expect_validation(const Params& p, const QString& error) {
  try {
    validate(p);
    QVERIFY2(error.isEmpty(), qPrintable("accepted, expected: " + error));
  } catch (const std::invalid_argument& e) {
    QVERIFY2(!error.isEmpty(), e.what());
    QVERIFY2(QString::fromUtf8(e.what()).contains(error), e.what());
  }
}

}  // namespace

class TestRmsNormParams : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void forward_data();
  void forward();
  void backward_data();
  void backward();
  void workspaceSize_data();
  void workspaceSize();
  void dtypes();
};

void TestRmsNormParams::forward_data() {
  QTest::addColumn<ForwardEdit>("edit");
  QTest::addColumn<QString>("error");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  using P = RmsNormForwardParams;
  QTest::newRow("valid") << ForwardEdit([](P&) {}) << QString();
  QTest::newRow("no rstd") << ForwardEdit([](P& p) { p.rstd = nullptr; }) << QString();
  QTest::newRow("in place") << ForwardEdit([](P& p) { p.y = const_cast<void*>(p.x); }) << QString();
  QTest::newRow("padded rows") << ForwardEdit([](P& p) {
    p.x_row_stride = kCols + 1;
    p.rows = 3;
  }) << QString();
  QTest::newRow("eps 0") << ForwardEdit([](P& p) { p.eps = 0; }) << QString();
  QTest::newRow("empty batch, null pointers") << ForwardEdit([](P& p) {
    p.rows = 0;
    p.x = p.y = nullptr;
    p.weight = nullptr;
  }) << QString();
  QTest::newRow("negative rows") << ForwardEdit([](P& p) { p.rows = -1; }) << "rows must be >= 0";
  QTest::newRow("zero cols") << ForwardEdit([](P& p) { p.cols = 0; }) << "cols must be > 0";
  QTest::newRow("stride < cols") << ForwardEdit([](P& p) { p.y_row_stride = kCols - 1; })
                                 << "y_row_stride";
  QTest::newRow("negative eps") << ForwardEdit([](P& p) { p.eps = -1e-6f; }) << "eps";
  QTest::newRow("NaN eps") << ForwardEdit([nan](P& p) { p.eps = nan; }) << "eps";
  QTest::newRow("null x") << ForwardEdit([](P& p) { p.x = nullptr; }) << "x is null";
  QTest::newRow("null weight") << ForwardEdit([](P& p) { p.weight = nullptr; }) << "weight is null";
  QTest::newRow("misaligned fp32 y")
      << ForwardEdit([](P& p) { p.y = const_cast<void*>(offset_bytes(p.y, 2)); })
      << "y is not aligned to 4";
  QTest::newRow("bf16 needs only 2-byte alignment") << ForwardEdit([](P& p) {
    p.dtype = DType::kBFloat16;
    p.x = offset_bytes(p.x, 2);
  }) << QString();
  QTest::newRow("misaligned bf16") << ForwardEdit([](P& p) {
    p.dtype = DType::kBFloat16;
    p.x = offset_bytes(p.x, 1);
  }) << "x is not aligned to 2";
  QTest::newRow("unknown dtype") << ForwardEdit([](P& p) {
    p.weight_dtype = static_cast<DType>(7);
  }) << "unknown dtype";
  QTest::newRow("in place with other stride") << ForwardEdit([](P& p) {
    p.y = const_cast<void*>(p.x);
    p.rows = 3;
    p.y_row_stride = kCols + 1;
  }) << "in-place";
}

void TestRmsNormParams::forward() {
  QFETCH(ForwardEdit, edit);
  QFETCH(QString, error);
  Buffers b;
  RmsNormForwardParams p = valid_forward(b);
  edit(p);
  expect_validation(p, error);
}

void TestRmsNormParams::backward_data() {
  QTest::addColumn<BackwardEdit>("edit");
  QTest::addColumn<QString>("error");
  using P = RmsNormBackwardParams;
  QTest::newRow("valid") << BackwardEdit([](P&) {}) << QString();
  QTest::newRow("recompute rstd") << BackwardEdit([](P& p) { p.rstd = nullptr; }) << QString();
  QTest::newRow("no dweight, no workspace") << BackwardEdit([](P& p) {
    p.dweight = p.workspace = nullptr;
    p.workspace_bytes = 0;
  }) << QString();
  QTest::newRow("null dy") << BackwardEdit([](P& p) { p.dy = nullptr; }) << "dy is null";
  QTest::newRow("null dx") << BackwardEdit([](P& p) { p.dx = nullptr; }) << "dx is null";
  QTest::newRow("dx stride") << BackwardEdit([](P& p) { p.dx_row_stride = 1; }) << "dx_row_stride";
  QTest::newRow("dweight without workspace")
      << BackwardEdit([](P& p) { p.workspace = nullptr; }) << "workspace is null";
  QTest::newRow("short workspace")
      << BackwardEdit([](P& p) { p.workspace_bytes -= sizeof(float); }) << "workspace_bytes";
  QTest::newRow("bad eps is rejected even with rstd")
      << BackwardEdit([](P& p) { p.eps = -1.0f; }) << "eps";
}

void TestRmsNormParams::backward() {
  QFETCH(BackwardEdit, edit);
  QFETCH(QString, error);
  Buffers b;
  RmsNormBackwardParams p = valid_backward(b);
  edit(p);
  expect_validation(p, error);
}

void TestRmsNormParams::workspaceSize_data() {
  QTest::addColumn<qint64>("rows");
  QTest::addColumn<qint64>("cols");
  QTest::addColumn<qint64>("partials");
  QTest::addColumn<qint64>("bytes");
  QTest::newRow("empty") << qint64(0) << qint64(8) << qint64(0) << qint64(0);
  QTest::newRow("one row") << qint64(1) << qint64(10) << qint64(1) << qint64(40);
  QTest::newRow("fewer rows than blocks")
      << qint64(100) << qint64(3) << qint64(100) << qint64(1200);
  // Capped: many rows share a partial row, so the workspace does not grow with the batch.
  QTest::newRow("one wide row") << qint64(1) << qint64(4096) << qint64(1) << qint64(16384);
  QTest::newRow("capped") << qint64(1 << 20) << qint64(4096) << qint64(256)
                          << qint64(256 * 4096 * 4);
}

void TestRmsNormParams::workspaceSize() {
  QFETCH(qint64, rows);
  QFETCH(qint64, cols);
  QFETCH(qint64, partials);
  QFETCH(qint64, bytes);
  QCOMPARE(rmsnorm_backward_partials(rows), partials);
  QCOMPARE(static_cast<qint64>(rmsnorm_backward_workspace_bytes(rows, cols)), bytes);
}

void TestRmsNormParams::dtypes() {
  QCOMPARE(dtype_size(DType::kFloat32), std::size_t{4});
  QCOMPARE(dtype_size(DType::kBFloat16), std::size_t{2});
  QCOMPARE(QString(dtype_name(DType::kBFloat16)), QString("bfloat16"));
  QVERIFY_THROWS_EXCEPTION(std::invalid_argument, dtype_size(static_cast<DType>(-1)));
}

QTEST_MAIN(TestRmsNormParams)
#include "tst_rmsnorm_params.moc"
