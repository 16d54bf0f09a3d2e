#pragma once
// Checks run configs off the GUI thread. Each request gets an id; finished() reports only the
// newest request's result, so a slow old check can never overwrite a newer one.
#include <atomic>

#include <QObject>
#include <QString>
#include <QThread>

#include "studio/ui/editor/validation_result.h"

namespace studio::ui {

class ValidationWorker;

class ConfigValidator : public QObject {
  Q_OBJECT

 public:
  explicit ConfigValidator(QObject* parent = nullptr);
  ~ConfigValidator() override;

  // The world size the config must fit: processes per node x nodes; 0 processes: not checked.
  void setProcessesPerNode(int n) { processesPerNode_ = n; }
  void setNodes(int n) { nodes_ = n; }
  // Relative paths in LLaMA-Factory files are relative to the working directory the training
  // is launched from; empty: QDir::currentPath() at the time of each request.
  void setBaseDir(const QString& dir) { baseDir_ = dir; }
  int processesPerNode() const { return processesPerNode_; }
  int nodes() const { return nodes_; }
  QString baseDir() const { return baseDir_; }

  // Unsaved editor text; `displayName` is the file name used in messages. Returns the request id.
  quint64 validateText(const QString& yaml, const QString& displayName);
  // A file as it is on disk. Returns the request id.
  quint64 validateFile(const QString& path);

  quint64 latestRequest() const { return latest_.load(); }
  // True while the newest request's result has not arrived yet.
  bool isBusy() const { return delivered_ != latest_.load(); }

 signals:
  void finished(const studio::ui::ValidationResult& result);

 private:
  quint64 submit(ValidationRequest request);
  void deliver(const ValidationResult& result);
  studio::ValidateOptions options() const;

  QThread thread_;
  ValidationWorker* worker_ = nullptr;  // lives on thread_, deleted when it finishes
  std::atomic<quint64> latest_{0};
  quint64 delivered_ = 0;
  int processesPerNode_ = 0;
  int nodes_ = 1;
  QString baseDir_;
};

}  // namespace studio::ui
