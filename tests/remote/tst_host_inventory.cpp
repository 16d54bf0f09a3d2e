// The host inventory: its parsers on outputs recorded in tests/remote/data/inventory_*.txt
// (written in the exact format the probe script prints, with nvidia-smi, studio-train --version
// and sinfo lines as those tools print them), and one real probe of this machine through a real
// sshd, checked against what the machine reports directly.
#include <QFile>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QtTest>

#include <optional>
#include <stdexcept>
#include <string>

#include "sshd_server.h"
#include "studio/remote/host_inventory.h"

using namespace studio::remote;

namespace {

std::string recorded(const QString& name) {
  QFile file(QStringLiteral(STUDIO_SOURCE_DIR "/tests/remote/data/") + name);
  if (!file.open(QIODevice::ReadOnly)) qFatal("cannot read recorded output %s", qPrintable(name));
  return file.readAll().toStdString();
}

bool contains(const std::string& text, const QString& part) {
  return QString::fromStdString(text).contains(part);
}

// Replaces the first line equal to `line` in `text`.
std::string with_line_replaced(std::string text, const std::string& line,
                               const std::string& replacement) {
  const auto at = text.find("\n" + line + "\n");
  if (at == std::string::npos) qFatal("recorded output has no line '%s'", line.c_str());
  return text.replace(at + 1, line.size(), replacement);
}

}  // namespace

class TestHostInventory : public QObject {
  Q_OBJECT

 private:
  SshdFixture server_;
  QTemporaryDir local_;
  std::optional<SshSession> session_;

 private slots:
  void gpuNodeWithSlurm() {
    const HostInventory inv = parse_inventory_output(recorded("inventory_h100_slurm.txt"));
    QCOMPARE(inv.hostname, std::string("dgx-h100-07"));
    QCOMPARE(inv.os, std::string("Linux 5.15.0-1042-nvidia"));
    QCOMPARE(inv.cpu_count, 224);
    QCOMPARE(inv.mem_total_kib, 2113394944LL);
    QCOMPARE(inv.mem_available_kib, 2049761280LL);

    QCOMPARE(inv.gpus.size(), std::size_t(8));
    for (std::size_t i = 0; i < inv.gpus.size(); ++i) {
      QCOMPARE(inv.gpus[i].index, static_cast<int>(i));
      QCOMPARE(inv.gpus[i].name, std::string("NVIDIA H100 80GB HBM3"));
      QCOMPARE(inv.gpus[i].memory_total_mib, 81559LL);
    }
    QCOMPARE(inv.gpus[4].memory_used_mib, 71234LL);
    QCOMPARE(inv.gpus[7].memory_used_mib, 1LL);
    QVERIFY(inv.gpu_note.empty());

    QVERIFY(inv.engine_found);
    QCOMPARE(inv.engine_path, std::string("/opt/seqstudio/bin/studio-train"));
    QCOMPARE(inv.engine_version, std::string("0.1.0"));
    QVERIFY(contains(inv.engine_details, "LibTorch 2.3.1 (CUDA build)"));
    QVERIFY(contains(inv.engine_details, "cuda:7 NVIDIA H100 80GB HBM3"));
    QVERIFY(inv.engine_note.empty());

    // sinfo's stderr warning does not become a partition; gpu's two lines become one.
    QVERIFY(inv.slurm);
    QCOMPARE(inv.partitions.size(), std::size_t(2));
    const SlurmPartition& gpu = inv.partitions[0];
    QCOMPARE(gpu.name, std::string("gpu"));
    QVERIFY(gpu.is_default);
    QCOMPARE(gpu.availability, std::string("up"));
    QCOMPARE(gpu.nodes, 16);
    QCOMPARE(gpu.gres, std::string("gpu:h100:8(S:0-1), gpu:h100:4(S:0)"));
    QCOMPARE(gpu.time_limit, std::string("2-00:00:00"));
    const SlurmPartition& debug = inv.partitions[1];
    QCOMPARE(debug.name, std::string("debug"));
    QVERIFY(!debug.is_default);
    QCOMPARE(debug.nodes, 1);
    QCOMPARE(debug.gres, std::string());
    QCOMPARE(debug.time_limit, std::string("1:00:00"));
  }

  void workstationWithoutTools() {
    const HostInventory inv = parse_inventory_output(recorded("inventory_workstation.txt"));
    QCOMPARE(inv.hostname, std::string("build-box"));
    QCOMPARE(inv.cpu_count, 16);
    QVERIFY(inv.gpus.empty());
    QCOMPARE(inv.gpu_note, std::string("no GPUs: nvidia-smi not found in PATH"));
    QVERIFY(!inv.engine_found);
    QVERIFY(inv.engine_version.empty());
    QCOMPARE(inv.engine_note,
             std::string("studio-train not found in PATH (/usr/local/bin:/usr/bin:/bin)"));
    QVERIFY(!inv.slurm);
    QVERIFY(inv.partitions.empty());
    QCOMPARE(inv.slurm_note, std::string("sinfo not found in PATH"));
  }

  void failingToolsBecomeNotes() {
    const HostInventory inv = parse_inventory_output(recorded("inventory_driver_down.txt"));
    QCOMPARE(inv.cpu_count, 64);
    QCOMPARE(inv.mem_total_kib, 528012344LL);
    QCOMPARE(inv.mem_available_kib, 0LL);  // older kernels have no MemAvailable
    QVERIFY(inv.gpus.empty());
    QVERIFY2(contains(inv.gpu_note,
                      "no GPUs: nvidia-smi failed, exit status 9: NVIDIA-SMI has "
                      "failed because it couldn't communicate"),
             inv.gpu_note.c_str());
    QVERIFY(!inv.engine_found);
    QCOMPARE(inv.engine_path, std::string("/home/ana/bin/studio-train"));
    QVERIFY2(contains(inv.engine_note,
                      "/home/ana/bin/studio-train --version failed, exit status "
                      "127: /home/ana/bin/studio-train: error while loading"),
             inv.engine_note.c_str());
    QVERIFY(!inv.slurm);
    QCOMPARE(inv.slurm_note, std::string("sinfo failed, exit status 1: sinfo: error: Unable to "
                                         "contact slurm controller (connect failure)"));
  }

  void otherEngineVersion_data() {
    QTest::addColumn<QString>("firstLine");
    QTest::addColumn<QString>("note");
    QTest::newRow("another program") << "train 2.0"
                                     << "printed 'train 2.0', not";
    QTest::newRow("no version") << "studio-train "
                                << "printed 'studio-train ', not";
  }

  void otherEngineVersion() {
    QFETCH(QString, firstLine);
    QFETCH(QString, note);
    const HostInventory inv = parse_inventory_output(with_line_replaced(
        recorded("inventory_h100_slurm.txt"), "studio-train 0.1.0", firstLine.toStdString()));
    QVERIFY(!inv.engine_found);
    QVERIFY2(contains(inv.engine_note, note), inv.engine_note.c_str());
    QVERIFY(contains(inv.engine_note, "is it the studio's engine?"));
  }

  void rejectsForeignOutput_data() {
    QTest::addColumn<QString>("line");
    QTest::addColumn<QString>("replacement");
    QTest::addColumn<QString>("error");
    QTest::newRow("cut short") << "@@studio-inventory:end"
                               << ""
                               << "no 'end' section";
    QTest::newRow("cpus") << "224"
                          << "many"
                          << "CPU count 'many' is not a positive number";
    QTest::newRow("zero cpus") << "224"
                               << "0"
                               << "CPU count '0'";
    QTest::newRow("meminfo unit") << "MemTotal:       2113394944 kB"
                                  << "MemTotal: 2 GB"
                                  << "meminfo line 'MemTotal: 2 GB'";
    QTest::newRow("no MemTotal") << "MemTotal:       2113394944 kB"
                                 << ""
                                 << "/proc/meminfo has no MemTotal";
    QTest::newRow("nvidia-smi fields")
        << "3, NVIDIA H100 80GB HBM3, 81559, 0"
        << "3, NVIDIA H100 80GB HBM3, 81559"
        << "nvidia-smi line '3, NVIDIA H100 80GB HBM3, 81559' is not";
    QTest::newRow("nvidia-smi memory") << "3, NVIDIA H100 80GB HBM3, 81559, 0"
                                       << "3, NVIDIA H100 80GB HBM3, 80 GiB, 0"
                                       << "in MiB";
    QTest::newRow("sinfo fields") << "debug|up|1|(null)|1:00:00"
                                  << "debug|up|1"
                                  << "sinfo line 'debug|up|1' is not";
    QTest::newRow("sinfo nodes") << "debug|up|1|(null)|1:00:00"
                                 << "debug|up|one|(null)|1:00:00"
                                 << "sinfo line 'debug|up|one|(null)|1:00:00'";
    QTest::newRow("no exit status") << "@@exit 1"
                                    << ""
                                    << "section 'slurm' has no exit status";
    QTest::newRow("no hostname") << "dgx-h100-07"
                                 << ""
                                 << "section 'hostname' is empty";
  }

  void rejectsForeignOutput() {
    QFETCH(QString, line);
    QFETCH(QString, replacement);
    QFETCH(QString, error);
    std::string text = recorded("inventory_h100_slurm.txt");
    if (line == "@@exit 1") text = recorded("inventory_driver_down.txt");
    text = with_line_replaced(text, line.toStdString(), replacement.toStdString());
    try {
      parse_inventory_output(text);
      QFAIL("no error");
    } catch (const std::runtime_error& e) {
      QVERIFY2(contains(e.what(), error), e.what());
    }
  }

  void nvidiaSmiNames_data() {
    QTest::addColumn<QString>("line");
    QTest::addColumn<QString>("name");
    QTest::addColumn<qlonglong>("total");
    QTest::addColumn<qlonglong>("used");
    QTest::newRow("plain") << "0, NVIDIA A100-SXM4-40GB, 40960, 3"
                           << "NVIDIA A100-SXM4-40GB" << 40960LL << 3LL;
    QTest::newRow("comma in name") << "1, Tesla V100, PCIe, 16GB, 16160, 0"
                                   << "Tesla V100, PCIe, 16GB" << 16160LL << 0LL;
    QTest::newRow("MIG memory n/a") << "2, NVIDIA H100 80GB HBM3, [N/A], [N/A]"
                                    << "NVIDIA H100 80GB HBM3" << 0LL << 0LL;
    QTest::newRow("CRLF") << "3, NVIDIA L4, 23034, 100\r"
                          << "NVIDIA L4" << 23034LL << 100LL;
  }

  void nvidiaSmiNames() {
    QFETCH(QString, line);
    QFETCH(QString, name);
    QFETCH(qlonglong, total);
    QFETCH(qlonglong, used);
    const std::vector<GpuInfo> gpus = parse_nvidia_smi_gpus(line.toStdString() + "\n");
    QCOMPARE(gpus.size(), std::size_t(1));
    QCOMPARE(QString::fromStdString(gpus[0].name), name);
    QCOMPARE(gpus[0].memory_total_mib, total);
    QCOMPARE(gpus[0].memory_used_mib, used);
  }

  void engineThatIsAnOption_data() {
    QTest::addColumn<QString>("engine");
    QTest::newRow("empty") << "";
    QTest::newRow("option") << "--version";
  }

  void engineThatIsAnOption() {
    QFETCH(QString, engine);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, inventory_command(engine.toStdString()));
  }

  // The real thing: this machine through sshd, the engine a small script at a path that needs
  // quoting.
  void initTestCase() {
    QVERIFY(local_.isValid());
    const QString error = server_.set_up(local_.path());
    QVERIFY2(error.isEmpty(), qPrintable(error));
    session_.emplace(server_.connect());
  }

  void probeThisMachine() {
    const QString engine = local_.filePath("bin $x 'it'/studio-train");
    QVERIFY(QDir().mkpath(QFileInfo(engine).path()));
    {
      QFile script(engine);
      QVERIFY(script.open(QIODevice::WriteOnly));
      script.write(
          "#!/bin/sh\necho 'studio-train 0.1.0'\necho 'LibTorch 2.3.1 (CPU build)'\n"
          "echo 'CUDA: not available'\n");
    }
    QVERIFY(QFile::setPermissions(engine, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));

    QProcess nproc;
    nproc.start(QStringLiteral("nproc"), {});
    QVERIFY(nproc.waitForFinished(5000));
    const int local_cpus = nproc.readAllStandardOutput().trimmed().toInt();
    QVERIFY(local_cpus > 0);

    const HostInventory inv = probe_inventory(*session_, engine.toStdString());
    QCOMPARE(inv.cpu_count, local_cpus);
    QVERIFY(inv.mem_total_kib > 0);
    QVERIFY(inv.mem_available_kib > 0 && inv.mem_available_kib <= inv.mem_total_kib);
    QCOMPARE(QString::fromStdString(inv.hostname), QSysInfo::machineHostName());
    QVERIFY2(contains(inv.os, QSysInfo::kernelVersion()), inv.os.c_str());
    if (QStandardPaths::findExecutable(QStringLiteral("nvidia-smi")).isEmpty()) {
      QVERIFY(inv.gpus.empty());
      QCOMPARE(inv.gpu_note, std::string("no GPUs: nvidia-smi not found in PATH"));
    }
    QVERIFY2(inv.engine_found, inv.engine_note.c_str());
    QCOMPARE(QString::fromStdString(inv.engine_path), engine);
    QCOMPARE(inv.engine_version, std::string("0.1.0"));
    QCOMPARE(inv.engine_details, std::string("LibTorch 2.3.1 (CPU build)\nCUDA: not available"));
    // sinfo may exist here without a cluster: then it failed and says why.
    QVERIFY(inv.slurm || !inv.slurm_note.empty());
  }

  void probeMissingEngine_data() {
    QTest::addColumn<QString>("engine");
    QTest::addColumn<QString>("note");
    const QString missing = local_.filePath("no such dir/studio-train");
    QTest::newRow("path") << missing << missing + " not found: no executable file at " + missing;
    QTest::newRow("PATH name") << "studio-train-not-installed"
                               << "studio-train-not-installed not found in PATH (";
    // A directory is not an engine, even though it is "executable".
    QTest::newRow("directory") << local_.path()
                               << " not found: no executable file at " + local_.path();
  }

  void probeMissingEngine() {
    QFETCH(QString, engine);
    QFETCH(QString, note);
    const HostInventory inv = probe_inventory(*session_, engine.toStdString());
    QVERIFY(!inv.engine_found);
    QVERIFY(inv.engine_version.empty());
    QVERIFY2(contains(inv.engine_note, note), inv.engine_note.c_str());
    QVERIFY(inv.cpu_count > 0);  // the rest of the probe is unaffected
  }
};

QTEST_MAIN(TestHostInventory)
#include "tst_host_inventory.moc"
