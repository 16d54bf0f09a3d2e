#include "studio/ui/editor/config_validator.h"

#include <QDir>

#include "studio/ui/base/local_path.h"
#include "validation_worker.h"

namespace studio::ui {

ConfigValidator::ConfigValidator(QObject* parent) : QObject(parent) {
  qRegisterMetaType<ValidationResult>();
  thread_.setObjectName(QStringLiteral("config-validator"));
  worker_ = new ValidationWorker(latest_);
  worker_->moveToThread(&thread_);
  connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
  connect(worker_, &ValidationWorker::done, this, &ConfigValidator::deliver, Qt::QueuedConnection);
  thread_.start();
}

ConfigValidator::~ConfigValidator() {
  // Superseding every request lets a worker still holding queued ones skip them and stop soon.
  latest_.fetch_add(1);
  thread_.quit();
  thread_.wait();
}

studio::ValidateOptions ConfigValidator::options() const {
  studio::ValidateOptions opt;
  opt.nproc_per_node = processesPerNode_;
  opt.nnodes = nodes_;
  opt.base_dir = localPath(baseDir_.isEmpty() ? QDir::currentPath() : baseDir_);
  return opt;
}

quint64 ConfigValidator::validateText(const QString& yaml, const QString& displayName) {
  return submit({0, displayName, yaml, false, options()});
}

quint64 ConfigValidator::validateFile(const QString& path) {
  return submit({0, path, QString(), true, options()});
}

quint64 ConfigValidator::submit(ValidationRequest request) {
  request.id = latest_.fetch_add(1) + 1;
  QMetaObject::invokeMethod(
      worker_, [worker = worker_, request] { worker->run(request); }, Qt::QueuedConnection);
  return request.id;
}

void ConfigValidator::deliver(const ValidationResult& result) {
  if (result.id != latest_.load()) return;  // a newer request is on its way
  delivered_ = result.id;
  emit finished(result);
}

}  // namespace studio::ui
