// Runtime and memory reporting: version and CUDA fields, /proc parsing, and RSS that follows a
// real 200 MiB allocation.
#include "studio/trainer/runtime_info.h"
#include "studio/trainer/metrics/gpu_activity.h"

#include <torch/version.h>

#include <QtTest>

#include <memory>

using namespace studio::trainer;

class TestRuntimeInfo : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void versionIsTheCompiledOne();
  void cudaFieldsMatchTheBuild();
  void formatMentionsVersionAndCuda();
  void parseProcStatus_data();
  void parseProcStatus();
  void rssFollowsAllocation();
  void gpuActivityFromNvml();
};

void TestRuntimeInfo::versionIsTheCompiledOne() {
  const RuntimeInfo info = query_runtime_info();
  QCOMPARE(QString::fromStdString(info.torch_version), QString(TORCH_VERSION));
  QCOMPARE(info.torch_cuda_build, STUDIO_WITH_TORCH_CUDA != 0);
}

void TestRuntimeInfo::cudaFieldsMatchTheBuild() {
  const RuntimeInfo info = query_runtime_info();
#if STUDIO_WITH_TORCH_CUDA
  QCOMPARE(static_cast<int>(info.devices.size()), info.cuda_device_count);
  if (!info.cuda_available) QSKIP("CUDA build, but no usable device here");
  QVERIFY(info.cuda_device_count > 0);
  for (const auto& d : info.devices) {
    QVERIFY(!d.name.empty());
    QVERIFY(d.total_memory_bytes > 0);
    QVERIFY(d.compute_major > 0);
  }
  const auto stats = cuda_memory_stats();
  QVERIFY(stats.has_value());
  QVERIFY(stats->reserved_mib >= stats->allocated_mib);
  QVERIFY(stats->peak_allocated_mib >= stats->allocated_mib);
#else
  QVERIFY(!info.cuda_available);
  QCOMPARE(info.cuda_device_count, 0);
  QVERIFY(info.devices.empty());
  QVERIFY(!cuda_memory_stats().has_value());
  QVERIFY(!cuda_memory_stats(0).has_value());
  reset_cuda_peak_memory();  // must be a harmless no-op
#endif
  QVERIFY(!cuda_memory_stats(-2).has_value());
}

void TestRuntimeInfo::formatMentionsVersionAndCuda() {
  const QString text = QString::fromStdString(format_runtime_info());
  QVERIFY2(text.contains(QString("LibTorch ") + TORCH_VERSION), qPrintable(text));
  QVERIFY2(text.contains("CUDA: "), qPrintable(text));

  RuntimeInfo cpu;
  cpu.torch_version = "1.2.3";
  QCOMPARE(QString::fromStdString(format_runtime_info(cpu)),
           QString("LibTorch 1.2.3 (CPU build)\nCUDA: not available\n"));

  RuntimeInfo fake;
  fake.torch_version = "9.9.9";
  fake.torch_cuda_build = true;
  fake.cuda_available = true;
  fake.cuda_device_count = 1;
  fake.devices.push_back({0, "Test GPU", std::uint64_t{80} << 30, 9, 0});
  const QString gpu = QString::fromStdString(format_runtime_info(fake));
  QCOMPARE(gpu, QString("LibTorch 9.9.9 (CUDA build)\nCUDA: 1 device(s)\n"
                        "  cuda:0 Test GPU, sm_90, 80.0 GiB\n"));
}

void TestRuntimeInfo::parseProcStatus_data() {
  QTest::addColumn<QString>("text");
  QTest::addColumn<bool>("ok");
  QTest::addColumn<double>("rss");
  QTest::addColumn<double>("peak");
  QTest::newRow("typical") << "Name:\tx\nVmPeak:\t  999 kB\nVmHWM:\t    4096 kB\n"
                              "VmRSS:\t    2048 kB\nThreads:\t1\n"
                           << true << 2.0 << 4.0;
  QTest::newRow("no trailing newline") << "VmRSS:\t1536 kB\nVmHWM:\t1536 kB" << true << 1.5 << 1.5;
  QTest::newRow("missing VmHWM") << "VmRSS:\t1024 kB\n" << false << 0.0 << 0.0;
  QTest::newRow("kernel thread (no Vm lines)") << "Name:\tkthreadd\nState:\tS\n"
                                               << false << 0.0 << 0.0;
  QTest::newRow("unexpected unit") << "VmRSS:\t1 MB\nVmHWM:\t1 MB\n" << false << 0.0 << 0.0;
  QTest::newRow("garbage number") << "VmRSS:\tlots kB\nVmHWM:\t1 kB\n" << false << 0.0 << 0.0;
  QTest::newRow("empty") << "" << false << 0.0 << 0.0;
}

void TestRuntimeInfo::parseProcStatus() {
  QFETCH(QString, text);
  QFETCH(bool, ok);
  QFETCH(double, rss);
  QFETCH(double, peak);
  const std::string utf8 = text.toStdString();
  const auto stats = parse_proc_status(utf8);
  QCOMPARE(stats.has_value(), ok);
  if (!ok) return;
  QCOMPARE(stats->rss_mib, rss);
  QCOMPARE(stats->peak_rss_mib, peak);
}

void TestRuntimeInfo::rssFollowsAllocation() {
  const auto before = host_memory_stats();
  QVERIFY(before.has_value());
  QVERIFY(before->rss_mib > 0);
  QVERIFY(before->peak_rss_mib >= before->rss_mib);

  // 200 MiB with every page written so that it is resident (new[] alone only reserves address
  // space). Volatile stores cannot be dropped as dead even though the block is never read.
  constexpr std::size_t kMiB = 1024 * 1024;
  constexpr std::size_t kBytes = 200 * kMiB;
  std::unique_ptr<char[]> block(new char[kBytes]);
  volatile char* bytes = block.get();
  for (std::size_t i = 0; i < kBytes; i += 4096) bytes[i] = 1;
  const auto after = host_memory_stats();
  QVERIFY(after.has_value());
  // A few MiB of slack for pages the kernel may not have counted yet (RSS is updated in
  // per-thread batches).
  QVERIFY2(after->rss_mib >= before->rss_mib + 190,
           qPrintable(QString("RSS %1 -> %2 MiB").arg(before->rss_mib).arg(after->rss_mib)));
  QVERIFY(after->peak_rss_mib >= after->rss_mib);
  QVERIFY(after->peak_rss_mib >= before->rss_mib + 190);
}

QTEST_MAIN(TestRuntimeInfo)
// NVML by PCI bus id: on a GPU machine every visible device reports utilisation and power; where
// there is no driver library nothing is reported and the reason says why.
void TestRuntimeInfo::gpuActivityFromNvml() {
  QCOMPARE(studio::trainer::pci_bus_id(0, 0x17, 0), std::string("0000:17:00.0"));
  QCOMPARE(studio::trainer::pci_bus_id(1, 0xc1, 0x1f), std::string("0001:c1:1f.0"));
  const auto info = studio::trainer::query_runtime_info();
  if (!info.cuda_available) {
    QVERIFY(!studio::trainer::gpu_activity(0));
    QVERIFY(!studio::trainer::nvml_unavailable_reason().empty());
    return;
  }
  QVERIFY2(studio::trainer::nvml_unavailable_reason().empty(),
           studio::trainer::nvml_unavailable_reason().c_str());
  for (const auto& d : info.devices) {
    const auto a = studio::trainer::gpu_activity(d.index);
    QVERIFY2(a, qPrintable(QString("cuda:%1 reports no NVML activity").arg(d.index)));
    QVERIFY(a->util_percent >= 0 && a->util_percent <= 100);
    QVERIFY(a->power_w > 0 && a->power_limit_w > 0);
  }
}

#include "tst_runtime_info.moc"
