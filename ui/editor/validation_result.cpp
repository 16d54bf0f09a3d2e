#include "studio/ui/editor/validation_result.h"

#include <QCoreApplication>
#include <QStringList>

#include "studio/config/config_io.h"

namespace studio::ui {
namespace {

QString tr(const char* text) {
  return QCoreApplication::translate("studio::ui", text);
}

QString plural(int n, const char* one, const char* many) {
  return QStringLiteral("%1 %2").arg(n).arg(n == 1 ? tr(one) : tr(many));
}

QString fromView(std::string_view text) {
  return QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size()));
}

QString describe(const studio::CheckResult& check) {
  const studio::RunConfig& c = check.config;
  QStringList parts;
  parts << tr("stage %1").arg(fromView(to_string(c.stage)));
  parts << tr("SP %1 %2")
               .arg(c.sequence_parallel_size)
               .arg(fromView(to_string(c.sequence_parallel_mode)));
  parts << tr("cutoff %1").arg(c.cutoff_len);
  if (check.model)
    parts << tr("model %1 %2")
                 .arg(QString::fromStdString(check.model->architecture),
                      QString::fromStdString(format_size(*check.model)));
  return parts.join(QStringLiteral(", "));
}

}  // namespace

studio::CheckResult checkConfigText(const QString& yaml, const QString& displayName,
                                    const studio::ValidateOptions& options) {
  studio::LoadResult loaded = load_config_string(yaml.toStdString(), displayName.toStdString());
  studio::CheckResult res{std::move(loaded.config), std::move(loaded.diagnostics), std::nullopt};
  // Without a single key there is nothing to validate beyond the parse error already reported.
  if (!res.config.source.key_pos.empty()) {
    auto more = validate_config(res.config, options, &res.model);
    res.diagnostics.insert(res.diagnostics.end(), more.begin(), more.end());
    sort_by_position(res.diagnostics);
  }
  return res;
}

QString summarize(const studio::CheckResult& check) {
  int errors = 0;
  for (const auto& d : check.diagnostics) errors += d.severity == studio::Severity::Error;
  const int warnings = static_cast<int>(check.diagnostics.size()) - errors;
  if (errors > 0) {
    QString text = plural(errors, "error", "errors");
    if (warnings > 0) text += QStringLiteral(", ") + plural(warnings, "warning", "warnings");
    return text;
  }
  const QString head =
      warnings > 0 ? tr("valid (%1)").arg(plural(warnings, "warning", "warnings")) : tr("valid");
  return head + QStringLiteral(": ") + describe(check);
}

}  // namespace studio::ui
