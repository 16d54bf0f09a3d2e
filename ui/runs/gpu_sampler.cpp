#include "studio/ui/runs/gpu_sampler.h"

#include <QProcess>
#include <QSet>

#include "studio/ui/runs/nvidia_smi.h"
#include "studio/remote/shell_quote.h"
#include "studio/remote/ssh_session.h"
#include "studio/ui/runs/remote_mirror.h"

namespace studio::ui {

class GpuSampleWorker : public QObject {
  Q_OBJECT

 public:
  QString program = QStringLiteral("nvidia-smi");

  void sample(const QString& runDir) {
    QString host = QObject::tr("this machine");
    std::string text;
    QString error;
    try {
      if (isRemoteRunFolder(runDir)) {
        const auto record = RemoteMirror(runDir).readRecord();
        host = QString::fromStdString(record.host.target);
        std::vector<std::string> argv{"nvidia-smi"};
        for (const auto& a : nvidia_smi_query_args()) argv.push_back(a);
        const auto session = studio::remote::SshSession::connect(
            studio::remote::ssh_options(record.host), studio::remote::reject_unknown_host_keys());
        const auto r = session.exec(studio::remote::shell_join(argv), std::chrono::seconds(20));
        if (r.exit_status != 0)
          error = QObject::tr("nvidia-smi failed on %1 (exit %2): %3")
                      .arg(host)
                      .arg(r.exit_status)
                      .arg(QString::fromStdString(r.std_err).trimmed().left(300));
        text = r.std_out;
      } else {
        QProcess p;
        QStringList args;
        for (const auto& a : nvidia_smi_query_args()) args << QString::fromStdString(a);
        p.start(program, args);
        if (!p.waitForStarted(5000))
          error = QObject::tr("%1 cannot be run on %2 (%3): no GPU memory for this run")
                      .arg(program, host, p.errorString());
        else if (!p.waitForFinished(20000) || p.exitCode() != 0)
          error = QObject::tr("%1 failed on %2: %3")
                      .arg(program, host, QString::fromUtf8(p.readAllStandardError()).trimmed().left(300));
        else
          text = p.readAllStandardOutput().toStdString();
      }
    } catch (const std::exception& e) {
      error = QObject::tr("cannot sample the GPUs of %1: %2").arg(host, QString::fromStdString(e.what()));
    }
    std::vector<studio::GpuMemory> gpus;
    std::string why;
    if (error.isEmpty() && !parse_nvidia_smi(text, gpus, why))
      error = QObject::tr("%1 on %2: %3").arg(program, host, QString::fromStdString(why));
    busy_.remove(runDir);
    if (!error.isEmpty()) {
      if (!reported_.contains(runDir + error)) {
        reported_.insert(runDir + error);
        emit failed(runDir, error);
      }
      return;
    }
    emit sampled(runDir, host, gpus);
  }

  bool claim(const QString& runDir) {
    if (busy_.contains(runDir)) return false;
    busy_.insert(runDir);
    return true;
  }

 signals:
  void sampled(const QString& runDir, const QString& host, const std::vector<studio::GpuMemory>& gpus);
  void failed(const QString& runDir, const QString& message);

 private:
  QSet<QString> busy_;
  QSet<QString> reported_;
};

GpuSampler::GpuSampler(QObject* parent) : QObject(parent), worker_(new GpuSampleWorker) {
  qRegisterMetaType<std::vector<studio::GpuMemory>>();
  worker_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
  connect(worker_, &GpuSampleWorker::sampled, this, &GpuSampler::sampled);
  connect(worker_, &GpuSampleWorker::failed, this, &GpuSampler::failed);
  thread_.setObjectName(QStringLiteral("gpu-sampler"));
  thread_.start();
}

GpuSampler::~GpuSampler() {
  thread_.quit();
  thread_.wait();
}

void GpuSampler::setProgram(const QString& program) {
  QMetaObject::invokeMethod(worker_, [w = worker_, program] { w->program = program; },
                            Qt::QueuedConnection);
}

void GpuSampler::sample(const QString& runDir) {
  QMetaObject::invokeMethod(
      worker_,
      [w = worker_, runDir] {
        if (w->claim(runDir)) w->sample(runDir);
      },
      Qt::QueuedConnection);
}

}  // namespace studio::ui

#include "gpu_sampler.moc"
