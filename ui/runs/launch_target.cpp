#include "studio/ui/runs/launch_target.h"

#include <QStandardPaths>

namespace studio::ui {

QString defaultLlamaFactoryCli() {
  const QString env = qEnvironmentVariable("STUDIO_LLAMAFACTORY_CLI");
  if (!env.isEmpty()) return env;
  const QString found = QStandardPaths::findExecutable(QStringLiteral("llamafactory-cli"));
  return found.isEmpty() ? QStringLiteral("llamafactory-cli") : found;
}

}  // namespace studio::ui
