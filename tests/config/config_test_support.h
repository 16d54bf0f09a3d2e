#pragma once
// What the run-config tests (tst_run_config, tst_config_save) share.
#include <QFile>
#include <QString>

#include <vector>

#include "studio/config/diagnostic.h"

namespace config_test {

// Four required keys on lines 1-4; each test case appends its own lines from line 5 on.
inline const QString kBase = QStringLiteral(
    "model_name_or_path: models/qwen2.5-7b-shape\n"
    "dataset: long_docs\n"
    "template: qwen\n"
    "output_dir: out/run-that-does-not-exist\n");

// The diagnostics as the studio prints them (in a failure's message).
inline QString dump(const std::vector<studio::Diagnostic>& diags) {
  return QString::fromStdString(studio::format_all(diags));
}

inline QString readAll(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QString::fromUtf8(f.readAll());
}

}  // namespace config_test
