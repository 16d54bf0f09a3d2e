#pragma once
// Samples a host's GPUs with nvidia-smi (studio/ui/runs/nvidia_smi.h) for the runs that do not
// report their own memory (LLaMA-Factory runs): on this machine, or over SSH on the host of a
// remote run (its saved record's target; only hosts already in known_hosts, no prompt). Every
// sample runs on the sampler's own thread; results come back as signals.
#include <map>
#include <vector>

#include <QMetaType>
#include <QObject>
#include <QString>
#include <QThread>

#include "studio/runs/events.h"

Q_DECLARE_METATYPE(std::vector<studio::GpuMemory>)

namespace studio::ui {

class GpuSampleWorker;

class GpuSampler : public QObject {
  Q_OBJECT

 public:
  explicit GpuSampler(QObject* parent = nullptr);
  ~GpuSampler() override;

  // Samples the GPUs where the run in `runDir` trains: this machine for a local folder, the SSH
  // host of a remote run's mirror folder. Requests for a run whose last sample is still running
  // are dropped.
  void sample(const QString& runDir);
  // The program run on this machine (tests point it elsewhere); default "nvidia-smi".
  void setProgram(const QString& program);

 signals:
  // `host` names the machine ("this machine" or the SSH target).
  void sampled(const QString& runDir, const QString& host, const std::vector<studio::GpuMemory>& gpus);
  // Once per run and reason: nvidia-smi missing, failing, or the host unreachable.
  void failed(const QString& runDir, const QString& message);

 private:
  QThread thread_;
  GpuSampleWorker* worker_;
};

}  // namespace studio::ui
