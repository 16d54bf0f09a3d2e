#include "validation_worker.h"

#include <QThread>

#include "studio/ui/base/local_path.h"

namespace studio::ui {

void ValidationWorker::run(const ValidationRequest& request) {
  // While the user types, requests queue up faster than model folders can be read; only the
  // newest one matters.
  if (request.id < latest_.load()) return;
  ValidationResult result;
  result.id = request.id;
  result.options = request.options;
  result.thread = QThread::currentThread();
  result.check = request.readFile
                     ? studio::check_config_file(localPath(request.source), request.options)
                     : checkConfigText(request.text, request.source, request.options);
  emit done(result);
}

}  // namespace studio::ui
