// The 4-bit dequantization kernel (kernels/quant4.cu) against the CPU reference
// (kernels/quant4_ref.h, itself held to bitsandbytes by tst_quant4_reference): fp32 output equal
// to the reference bit for bit, bf16 output its round-to-nearest-even, for NF4 and FP4, with and
// without double quantization, odd counts and short last blocks. Functions that need a GPU skip
// themselves where none is usable; the parameter checks run everywhere.
#include "cuda_test_support.h"
#include "studio/kernels/cuda_check.h"
#include "studio/kernels/quant4.h"
#include "studio/kernels/quant4_ref.h"

#include <QtTest>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

using namespace studio::kernels;

namespace {

std::uint16_t to_bf16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest, ties to even (no NaNs here)
  return static_cast<std::uint16_t>(bits >> 16);
}

// A device copy of a host vector, freed with the object.
template <typename T>
class Device {
 public:
  explicit Device(const std::vector<T>& host) : n_(host.size()) {
    if (n_ == 0) return;
    STUDIO_CUDA_CHECK(cudaMalloc(&ptr_, n_ * sizeof(T)));
    STUDIO_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
  }
  explicit Device(std::size_t n) : n_(n) {
    if (n_ > 0) STUDIO_CUDA_CHECK(cudaMalloc(&ptr_, n_ * sizeof(T)));
  }
  ~Device() {
    if (ptr_) cudaFree(ptr_);
  }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  T* get() const { return static_cast<T*>(ptr_); }
  std::vector<T> host() const {
    std::vector<T> out(n_);
    if (n_ > 0) STUDIO_CUDA_CHECK(cudaMemcpy(out.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
  }

 private:
  void* ptr_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace

class TestQuant4Cuda : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void matchesReference_data();
  void matchesReference();
  void refusesBadParameters_data();
  void refusesBadParameters();
};

void TestQuant4Cuda::matchesReference_data() {
  QTest::addColumn<int>("type");
  QTest::addColumn<bool>("double_quant");
  QTest::addColumn<int>("dtype");
  QTest::addColumn<qint64>("n");
  QTest::addColumn<int>("blocksize");
  for (int type : {0, 1})
    for (bool dq : {false, true})
      for (int dtype : {0, 1}) {
        const QByteArray tag = QByteArray(type ? "fp4" : "nf4") + (dq ? " double" : "") +
                               (dtype ? " bf16" : " fp32");
        QTest::newRow(tag + ", 37x101 (odd, short block)") << type << dq << dtype << qint64(37 * 101) << 64;
        QTest::newRow(tag + ", 512x384, blocks of 128") << type << dq << dtype << qint64(512 * 384) << 128;
      }
}

void TestQuant4Cuda::matchesReference() {
  REQUIRE_DEVICE();
  QFETCH(int, type);
  QFETCH(bool, double_quant);
  QFETCH(int, dtype);
  QFETCH(qint64, n);
  QFETCH(int, blocksize);
  std::mt19937 gen(static_cast<unsigned>(n));
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = dist(gen);
  const Quant4Data q = quantize4_ref(x.data(), n, blocksize, static_cast<Quant4Type>(type), double_quant);
  const std::vector<float> want = dequantize4_ref(q);

  Device<std::uint8_t> packed(q.packed), qabsmax(q.qabsmax);
  Device<float> absmax(q.absmax), absmax2(q.absmax2);
  Device<float> code(q.dynamic);
  Dequant4Params p;
  p.packed = packed.get();
  p.n = n;
  p.blocksize = blocksize;
  p.type = static_cast<Quant4Type>(type);
  p.dtype = dtype ? DType::kBFloat16 : DType::kFloat32;
  if (double_quant) {
    p.qabsmax = qabsmax.get();
    p.absmax2 = absmax2.get();
    p.offset = q.offset;
    p.dynamic_code = code.get();
  } else {
    p.absmax = absmax.get();
  }
  if (dtype == 0) {
    Device<float> out(static_cast<size_t>(n));
    p.out = out.get();
    dequantize4_cuda(p, nullptr);
    STUDIO_CUDA_CHECK(cudaDeviceSynchronize());
    const auto got = out.host();
    for (size_t i = 0; i < got.size(); ++i)
      QVERIFY2(got[i] == want[i], qPrintable(QString("value %1: %2 vs %3").arg(i).arg(got[i]).arg(want[i])));
  } else {
    Device<std::uint16_t> out(static_cast<size_t>(n));
    p.out = out.get();
    dequantize4_cuda(p, nullptr);
    STUDIO_CUDA_CHECK(cudaDeviceSynchronize());
    const auto got = out.host();
    for (size_t i = 0; i < got.size(); ++i)
      QVERIFY2(got[i] == to_bf16(want[i]), qPrintable(QString("value %1").arg(i)));
  }
}

void TestQuant4Cuda::refusesBadParameters_data() {
  QTest::addColumn<QString>("what");
  QTest::addColumn<QString>("message");
  QTest::newRow("odd blocksize") << "blocksize" << "blocksize must be a positive even number";
  QTest::newRow("no packed") << "packed" << "packed is null";
  QTest::newRow("no absmax") << "absmax" << "absmax is null";
  QTest::newRow("double without its map") << "dynamic" << "double quantization needs absmax2 and dynamic_code";
}

void TestQuant4Cuda::refusesBadParameters() {
  QFETCH(QString, what);
  QFETCH(QString, message);
  std::uint8_t byte = 0;
  float value = 0, absmax = 1;
  Dequant4Params p;
  p.packed = &byte;
  p.absmax = &absmax;
  p.out = &value;
  p.n = 2;
  if (what == "blocksize") p.blocksize = 63;
  if (what == "packed") p.packed = nullptr;
  if (what == "absmax") p.absmax = nullptr;
  if (what == "dynamic") p.qabsmax = &byte;
  try {
    check_dequant4_params(p);
    QFAIL("accepted");
  } catch (const std::invalid_argument& e) {
    QVERIFY2(QString(e.what()).contains(message), e.what());
  }
}

QTEST_GUILESS_MAIN(TestQuant4Cuda)
#include "tst_quant4_cuda.moc"
