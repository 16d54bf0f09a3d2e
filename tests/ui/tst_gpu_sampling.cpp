// GPU memory for runs that report none (LLaMA-Factory): the studio samples the host's GPUs with
// nvidia-smi while the run lives and draws them per GPU. This machine has no GPU and no
// nvidia-smi, so the sampler's missing-program path runs for real, and the drawing path runs with
// a stand-in program that prints nvidia-smi's CSV as an 8-GPU H100 host prints it (the parser's
// own tests hold the same lines).
#include <QSignalSpy>
#include <QtTest>

#include <qcustomplot.h>

#include "studio/ui/dashboard/run_dashboard.h"
#include "studio/ui/runs/gpu_sampler.h"

using namespace studio::ui;

class TestGpuSampling : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void missingNvidiaSmiIsSaidOnce();
  void samplesBecomeMemoryPerGpu();
};

void TestGpuSampling::missingNvidiaSmiIsSaidOnce() {
  QTemporaryDir dir;
  GpuSampler sampler;
  sampler.setProgram(dir.filePath("no-such-nvidia-smi"));
  QSignalSpy failed(&sampler, &GpuSampler::failed);
  QSignalSpy sampled(&sampler, &GpuSampler::sampled);
  sampler.sample(dir.path());
  QVERIFY(failed.wait(10000));
  QVERIFY2(failed.at(0).at(1).toString().contains("cannot be run on this machine"),
           qPrintable(failed.at(0).at(1).toString()));
  sampler.sample(dir.path());  // the same reason again: not repeated
  QTest::qWait(500);
  QCOMPARE(failed.count(), 1);
  QCOMPARE(sampled.count(), 0);
}

void TestGpuSampling::samplesBecomeMemoryPerGpu() {
  QTemporaryDir dir;
  const QString program = dir.filePath("nvidia-smi");
  {
    QFile f(program);
    QVERIFY(f.open(QIODevice::WriteOnly));
    QByteArray script = "#!/bin/sh\n";
    for (int i = 0; i < 8; ++i)
      script += "echo '" + QByteArray::number(i) + ", " + QByteArray::number(40000 + 100 * i) +
                ", 81559, 9" + QByteArray::number(i) + ", 600.5, 700.00, NVIDIA H100 80GB HBM3'\n";
    f.write(script);
    f.setPermissions(f.permissions() | QFileDevice::ExeOwner);
  }
  // A LLaMA-Factory folder: steps, no memory.
  const QString run = dir.filePath("lf-run");
  QVERIFY(QDir().mkpath(run));
  QFile log(run + "/trainer_log.jsonl");
  QVERIFY(log.open(QIODevice::WriteOnly));
  log.write(R"({"current_steps": 1, "total_steps": 100, "loss": 2.5, "lr": 0.001})" "\n");
  log.close();
  RunDashboard dash;
  dash.showRun(run);
  QTRY_VERIFY(dash.series(run) && dash.series(run)->size() == 1);
  QVERIFY(dash.wantsDeviceSamples(run));

  GpuSampler sampler;
  sampler.setProgram(program);
  connect(&sampler, &GpuSampler::sampled, &dash, &RunDashboard::addDeviceSample);
  QSignalSpy sampled(&sampler, &GpuSampler::sampled);
  sampler.sample(run);
  QVERIFY(sampled.wait(10000));
  QCOMPARE(sampled.at(0).at(1).toString(), QStringLiteral("this machine"));
  dash.flush();
  const auto lines = dash.graphs(ChartKind::Memory, run);
  QCOMPARE(int(lines.size()), 16);  // used (and the empty reserved) of 8 GPUs
  QCOMPARE(lines[0]->name(), QStringLiteral("lf-run: GPU 0"));
  QCOMPARE(lines[0]->data()->constBegin()->value, 40000.0);
  QVERIFY(dash.chartShown(ChartKind::GpuActivity));
  bool titled = false;
  for (const QLabel* label : dash.findChildren<QLabel*>())
    titled = titled || label->text().contains("sampled with nvidia-smi on this machine");
  QVERIFY(titled);
  QVERIFY(dash.wantsDeviceSamples(run));  // it goes on sampling while the run lives
}

QTEST_MAIN(TestGpuSampling)
#include "tst_gpu_sampling.moc"
