// The 4-bit weight format (kernels/quant4.h, QLoRA's NF4 and FP4) against bitsandbytes itself
// (tests/reference/bnb_quant.py, run by the project's Python environment, STUDIO_PYTHON, on the
// CPU): the CPU reference (with bitsandbytes' dynamic map as the engine builds it, bnb_dynamic_map)
// quantized bytes, absmax values, double-quantized statistics, codes and
// dequantized values must be bitsandbytes' own, byte for byte (the double quantization's offset,
// its offset being torch's own fp32 mean, as the engine computes it).
#include <QtTest>

#include <cmath>
#include <cstring>
#include <random>

#include "studio/kernels/quant4_ref.h"
#include "studio/trainer/model/quant4_weight.h"
#include "studio/trainer/tensors/safetensors.h"

using namespace studio::kernels;
using namespace studio::trainer;

namespace {

const QString kScript = QStringLiteral(STUDIO_SOURCE_DIR "/tests/reference/bnb_quant.py");

template <typename T>
std::vector<T> values(const SafetensorsFile& f, const std::string& name) {
  const auto t = f.tensor(name).contiguous();
  const T* p = t.data_ptr<T>();
  return std::vector<T>(p, p + t.numel());
}

}  // namespace

class TestQuant4Reference : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void matchesBitsandbytes_data();
  void matchesBitsandbytes();

 private:
  QTemporaryDir tmp_;
};

void TestQuant4Reference::matchesBitsandbytes_data() {
  QTest::addColumn<QString>("type");
  QTest::addColumn<int>("blocksize");
  QTest::addColumn<bool>("double_quant");
  QTest::addColumn<int>("rows");
  QTest::addColumn<int>("cols");
  QTest::addColumn<double>("scale");
  for (const QString type : {"nf4", "fp4"})
    for (const bool dq : {false, true}) {
      const QByteArray t = type.toUtf8() + (dq ? " double" : "");
      QTest::newRow(t + ", 64, 37x101 (odd count, short last block)") << type << 64 << dq << 37 << 101 << 0.05;
      QTest::newRow(t + ", 128, 64x512 (more than 256 blocks)") << type << 128 << dq << 64 << 512 << 1.0;
      QTest::newRow(t + ", 64, 300x64 (a 2nd absmax2 block)") << type << 64 << dq << 300 << 64 << 3.0;
    }
}

void TestQuant4Reference::matchesBitsandbytes() {
  QFETCH(QString, type);
  QFETCH(int, blocksize);
  QFETCH(bool, double_quant);
  QFETCH(int, rows);
  QFETCH(int, cols);
  QFETCH(double, scale);
  const std::int64_t n = std::int64_t{rows} * cols;
  // Normal values (weights), some exact zeros and a block of exact code points and midpoints
  // (the ties bitsandbytes breaks downwards).
  std::mt19937 gen(static_cast<unsigned>(n + blocksize));
  std::normal_distribution<float> dist(0.0f, static_cast<float>(scale));
  auto x = torch::empty({rows, cols}, torch::kFloat);
  float* p = x.data_ptr<float>();
  for (std::int64_t i = 0; i < n; ++i) p[i] = dist(gen);
  for (std::int64_t i = 0; i < n; i += 97) p[i] = 0.0f;
  const Quant4Type t = type == "nf4" ? Quant4Type::kNf4 : Quant4Type::kFp4;
  const auto& code = quant4_code(t);
  if (n >= 2 * blocksize) {
    // Block 1: its absmax is 1 (one value), the rest code values and midpoints between them.
    float* b = p + blocksize;
    b[0] = 1.0f;
    for (int i = 1; i < blocksize; ++i) {
      const float c0 = code[static_cast<size_t>(i % 16)], c1 = code[static_cast<size_t>((i + 1) % 16)];
      b[i] = i % 2 ? c0 : (c0 + c1) / 2.0f;
    }
  }
  QVERIFY(tmp_.isValid());
  const QString in = tmp_.filePath(QString("x-%1.safetensors").arg(QTest::currentDataTag()).replace(' ', '_'));
  const QString out = in + ".bnb";
  write_safetensors(in.toStdString(), {{"x", x}});
  QProcess proc;
  QStringList args{kScript, in, out, "--blocksize", QString::number(blocksize), "--type", type};
  if (double_quant) args << "--double";
  proc.start(QStringLiteral(STUDIO_PYTHON), args);
  QVERIFY(proc.waitForFinished(180000));
  QVERIFY2(proc.exitCode() == 0, proc.readAllStandardError().constData());
  const auto ref = SafetensorsFile::open(out.toStdString());

  // The engine's quantization (quant4_weight.h: the reference with torch's mean and map), its
  // tensors back as the reference's record.
  Quant4Data q = quantize4_ref(p, n, blocksize, t, /*double_quant=*/false);
  if (double_quant) {
    Quant4Options opt;
    opt.type = t;
    opt.blocksize = blocksize;
    const auto w = Quant4Weight::quantize(x, opt, torch::kCPU);
    double_quantize_ref(q, static_cast<float>(w->offset), bnb_dynamic_map().data_ptr<float>());
    const auto* qa = w->qabsmax.data_ptr<std::uint8_t>();
    QVERIFY(std::equal(q.qabsmax.begin(), q.qabsmax.end(), qa));  // the engine's are the reference's
  }
  // The code tables.
  const auto ref_code = values<float>(ref, "code");
  for (size_t i = 0; i < 16; ++i) QCOMPARE(code[i], ref_code[i]);
  if (double_quant) {
    const auto dyn = values<float>(ref, "dynamic");
    QCOMPARE(dyn.size(), size_t(256));
    for (size_t i = 0; i < 256; ++i)
      QVERIFY2(q.dynamic[i] == dyn[i],
               qPrintable(QString("dynamic map [%1]: %2 vs bitsandbytes' %3").arg(i)
                              .arg(q.dynamic[i], 0, 'g', 9).arg(dyn[i], 0, 'g', 9)));
  }
  // The packed indices, byte for byte.
  const auto packed = values<std::uint8_t>(ref, "packed");
  QCOMPARE(q.packed.size(), packed.size());
  int differ = 0;
  for (size_t i = 0; i < packed.size(); ++i) differ += q.packed[i] != packed[i];
  QVERIFY2(differ == 0, qPrintable(QString("%1 of %2 packed bytes differ").arg(differ).arg(packed.size())));
  // The statistics.
  if (!double_quant) {
    const auto absmax = values<float>(ref, "absmax");
    QCOMPARE(q.absmax.size(), absmax.size());
    for (size_t i = 0; i < absmax.size(); ++i) QCOMPARE(q.absmax[i], absmax[i]);
  } else {
    const float offset = values<float>(ref, "offset")[0];
    QVERIFY2(q.offset == offset,
             qPrintable(QString("offset %1 vs %2").arg(q.offset, 0, 'g', 9).arg(offset, 0, 'g', 9)));
    const auto qabsmax = values<std::uint8_t>(ref, "qabsmax");
    const auto absmax2 = values<float>(ref, "absmax2");
    QCOMPARE(q.qabsmax.size(), qabsmax.size());
    QCOMPARE(q.absmax2.size(), absmax2.size());
    for (size_t i = 0; i < qabsmax.size(); ++i) QCOMPARE(int(q.qabsmax[i]), int(qabsmax[i]));
    for (size_t i = 0; i < absmax2.size(); ++i) QCOMPARE(q.absmax2[i], absmax2[i]);
  }
  // And what dequantization makes of them.
  const auto deq = values<float>(ref, "dequantized");
  const auto ours = dequantize4_ref(q);
  QCOMPARE(ours.size(), deq.size());
  for (size_t i = 0; i < deq.size(); ++i)
    QVERIFY2(ours[i] == deq[i],
             qPrintable(QString("value %1: %2 vs %3").arg(i).arg(ours[i], 0, 'g', 9).arg(deq[i], 0, 'g', 9)));
}

QTEST_GUILESS_MAIN(TestQuant4Reference)
#include "tst_quant4_reference.moc"
