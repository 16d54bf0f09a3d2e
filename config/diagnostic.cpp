#include "studio/config/diagnostic.h"

#include <algorithm>

namespace studio {

std::string Diagnostic::format() const {
  std::string out = file.empty() ? "<config>" : file;
  if (in_file)
    out += ':' + std::to_string(line > 0 ? line : 1) + ':' + std::to_string(column > 0 ? column : 1);
  out += ": ";
  if (!key.empty()) out += key + ": ";
  if (severity == Severity::Warning) out += "warning: ";
  if (severity == Severity::Note) out += "note: ";
  out += message;
  if (!allowed.empty()) out += " (allowed: " + allowed + ")";
  return out;
}

bool has_errors(const std::vector<Diagnostic>& diags) {
  return std::any_of(diags.begin(), diags.end(),
                     [](const Diagnostic& d) { return d.severity == Severity::Error; });
}

void sort_by_position(std::vector<Diagnostic>& diags) {
  std::stable_sort(diags.begin(), diags.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return a.line != b.line ? a.line < b.line : a.column < b.column;
  });
}

std::string format_all(const std::vector<Diagnostic>& diags) {
  std::string out;
  for (const auto& d : diags) out += d.format() + '\n';
  return out;
}

}  // namespace studio
