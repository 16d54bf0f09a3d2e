#include "studio/ui/wizard/dataset_registration.h"

#include <QCoreApplication>
#include <QFileInfo>

#include <nlohmann/json.hpp>

#include "studio/base/json_file.h"

namespace studio::ui {
namespace {

QString tr(const char* text) {
  return QCoreApplication::translate("studio::ui::DatasetRegistration", text);
}

// The first row of a JSON array or of JSON lines, without parsing the rest of the file: the
// object from the first '{' to its matching '}', skipping braces inside strings.
std::string firstObject(const QByteArray& head) {
  const std::string text = head.toStdString();
  const size_t start = text.find('{');
  if (start == std::string::npos) return {};
  int depth = 0;
  bool inString = false, escaped = false;
  for (size_t i = start; i < text.size(); ++i) {
    const char c = text[i];
    if (inString) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') inString = false;
      continue;
    }
    if (c == '"') inString = true;
    else if (c == '{') ++depth;
    else if (c == '}' && --depth == 0) return text.substr(start, i - start + 1);
  }
  return {};
}

}  // namespace

DatasetRegistration datasetRegistration(const QString& filePath, const QByteArray& head) {
  const QFileInfo file(filePath);
  DatasetRegistration r;
  r.name = file.completeBaseName();
  nlohmann::ordered_json entry = {{"file_name", file.fileName().toStdString()}};
  nlohmann::json row;  // a row of Python's may hold NaN or Infinity (studio::parse_json_text)
  studio::JsonSyntaxError syntax;
  if (!studio::parse_json_text(firstObject(head), row, syntax)) row = nullptr;
  if (!row.is_object()) {
    r.guess = tr("Its first row could not be read as a JSON object: give \"formatting\" and "
                 "\"columns\" as docs/datasets.md describes.");
  } else {
    QStringList seen;
    nlohmann::ordered_json columns = nlohmann::ordered_json::object();
    if (row.contains("conversations")) {
      entry["formatting"] = "sharegpt";
      seen << QStringLiteral("conversations: sharegpt");
    } else if (row.contains("messages")) {
      entry["formatting"] = "openai";
      seen << QStringLiteral("messages: openai");
    } else {
      seen << QStringLiteral("alpaca");
    }
    if (row.contains("chosen") && row.contains("rejected")) {
      entry["ranking"] = true;
      seen << QStringLiteral("chosen/rejected: preference pairs");
    }
    // Optional columns are read only when mapped (LLaMA-Factory's rule).
    for (const char* optional : {"system", "history", "tools"})
      if (row.contains(optional)) columns[optional] = optional;
    if (!columns.empty()) entry["columns"] = columns;
    r.guess = tr("Guessed from its first row (%1).").arg(seen.join(QStringLiteral(", ")));
  }
  r.entry = QString::fromStdString(nlohmann::json(r.name.toStdString()).dump() + ": " +
                                   entry.dump());
  return r;
}

}  // namespace studio::ui
