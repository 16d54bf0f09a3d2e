#pragma once
// What the validator is asked to check and what it sends back to the GUI thread.
#include <QMetaType>
#include <QString>

#include "studio/config/validate.h"

class QThread;

namespace studio::ui {

struct ValidationRequest {
  quint64 id = 0;
  QString source;         // the file to read, or the name `text` goes by in messages
  QString text;           // the YAML to check when !readFile
  bool readFile = false;  // check the file at `source` instead of `text`
  studio::ValidateOptions options;
};

struct ValidationResult {
  quint64 id = 0;  // the request's id: results of superseded requests are dropped
  studio::CheckResult check;
  studio::ValidateOptions options;
  QThread* thread = nullptr;  // where the check ran; an identity only, never dereferenced
};

// Load + validate YAML text in one pass, as studio::check_config_file does for a file.
studio::CheckResult checkConfigText(const QString& yaml, const QString& displayName,
                                    const studio::ValidateOptions& options);

// One line for a status bar: "valid: stage sft, SP 8 zigzag-ring, cutoff 131072, model
// Qwen2ForCausalLM 7.62B" or "3 errors, 2 warnings".
QString summarize(const studio::CheckResult& check);

}  // namespace studio::ui

Q_DECLARE_METATYPE(studio::ui::ValidationResult)
