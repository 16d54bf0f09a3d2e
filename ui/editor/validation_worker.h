#pragma once
// Runs config checks on the validator's thread. Private to studio_editor: ConfigValidator is the
// interface the widgets use.
#include <atomic>

#include <QObject>

#include "studio/ui/editor/validation_result.h"

namespace studio::ui {

class ValidationWorker : public QObject {
  Q_OBJECT

 public:
  // `latest` is the newest request id handed out; requests older than it are skipped unrun.
  explicit ValidationWorker(const std::atomic<quint64>& latest) : latest_(latest) {}

  void run(const ValidationRequest& request);

 signals:
  void done(const studio::ui::ValidationResult& result);

 private:
  const std::atomic<quint64>& latest_;
};

}  // namespace studio::ui
