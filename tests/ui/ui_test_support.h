#pragma once
// Fixtures and look-ups shared by the studio tests of tests/ui.
#include <QFile>
#include <QString>

#include "studio/config/diagnostic.h"

namespace ui_test {

// The SP 8 Qwen2.5-7B fixture; its relative paths resolve against configsDir().
inline QString configsDir() {
  return QStringLiteral(STUDIO_TEST_FIXTURES_DIR "/configs");
}
inline QString fixturePath() {
  return configsDir() + QStringLiteral("/qwen2.5-7b-sft-sp8.yaml");
}

inline QString readText(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? QString::fromUtf8(f.readAll()) : QString();
}

// 1-based line of the first line equal to `text`, or 0.
inline int lineOf(const QString& yaml, const QString& text) {
  const QStringList lines = yaml.split(QLatin1Char('\n'));
  const int index = static_cast<int>(lines.indexOf(text));
  return index + 1;
}

// Index of the first diagnostic with this severity and key, or -1.
inline int find(const std::vector<studio::Diagnostic>& diags, studio::Severity severity,
                const QString& key) {
  for (size_t i = 0; i < diags.size(); ++i)
    if (diags[i].severity == severity && QString::fromStdString(diags[i].key) == key)
      return static_cast<int>(i);
  return -1;
}

}  // namespace ui_test
