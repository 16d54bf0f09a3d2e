// nvidia-smi's CSV (the studio's GPU sampling of runs that report no memory): real lines as an
// H100 host, a GPU without power readings and a name with a comma print them, and the lines
// that are refused with their number.
#include <QtTest>

#include <cmath>

#include "studio/ui/runs/nvidia_smi.h"

using namespace studio;

class TestNvidiaSmi : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void parses();
  void refuses_data();
  void refuses();
};

void TestNvidiaSmi::parses() {
  const std::string text =
      "0, 65432, 81559, 97, 652.31, 700.00, NVIDIA H100 80GB HBM3\n"
      "1, 1, 81559, 0, 71.02, 700.00, NVIDIA H100 80GB HBM3\n"
      "2, 300, 15360, [N/A], [N/A], [Not Supported], Tesla T4, rev. B\n";
  std::vector<GpuMemory> gpus;
  std::string error;
  QVERIFY2(parse_nvidia_smi(text, gpus, error), error.c_str());
  QCOMPARE(int(gpus.size()), 3);
  QCOMPARE(gpus[0].rank, 0);
  QCOMPARE(gpus[0].allocated_mib, 65432.0);
  QCOMPARE(gpus[0].total_mib, 81559.0);
  QCOMPARE(gpus[0].util_percent, 97.0);
  QCOMPARE(gpus[0].power_w, 652.31);
  QCOMPARE(gpus[0].power_limit_w, 700.0);
  QVERIFY(std::isnan(gpus[0].reserved_mib));  // nvidia-smi has no allocator view
  QCOMPARE(gpus[2].device, 2);
  QCOMPARE(gpus[2].total_mib, 15360.0);
  QVERIFY(std::isnan(gpus[2].util_percent) && std::isnan(gpus[2].power_w) &&
          std::isnan(gpus[2].power_limit_w));
  QCOMPARE(nvidia_smi_query_args().size(), std::size_t(2));
  // As the lent H200 printed it (docs/PERFORMANCE.md, 2026-11-26).
  QVERIFY2(parse_nvidia_smi("0, 0, 143771, 0, 80.03, 700.00, NVIDIA H200\n", gpus, error), error.c_str());
  QCOMPARE(gpus[0].total_mib, 143771.0);
  QCOMPARE(gpus[0].power_w, 80.03);
}

void TestNvidiaSmi::refuses_data() {
  QTest::addColumn<QString>("text");
  QTest::addColumn<QString>("message");
  QTest::newRow("nothing") << "" << "nvidia-smi listed no GPU";
  QTest::newRow("no devices message")
      << "No devices were found\n" << "nvidia-smi line 1 has 1 fields, 7 expected";
  QTest::newRow("index") << "0, 1, 2, 3, 4, 5, A\nx, 1, 2, 3, 4, 5, B\n"
                         << "nvidia-smi line 2: the GPU index 'x' is not a number";
}

void TestNvidiaSmi::refuses() {
  QFETCH(QString, text);
  QFETCH(QString, message);
  std::vector<GpuMemory> gpus;
  std::string error;
  QVERIFY(!parse_nvidia_smi(text.toStdString(), gpus, error));
  QVERIFY2(QString::fromStdString(error).startsWith(message), error.c_str());
}

QTEST_GUILESS_MAIN(TestNvidiaSmi)
#include "tst_nvidia_smi.moc"
