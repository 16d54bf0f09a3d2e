#pragma once
// A problem found in a run config, located in its file. Formatted as
//   FILE:LINE:COL: key: message (allowed: a | b)
// with "warning: " (or "note: ") before the message for warnings (notes), so editors and CI logs
// can jump to the line.
#include <string>
#include <vector>

namespace studio {

// A note says what studio-train decided for the file (a v1 config's chat template); nothing is wrong.
enum class Severity { Error, Warning, Note };

struct Diagnostic {
  Severity severity = Severity::Error;
  std::string file;     // the YAML file, or "<config>" for configs built in memory
  int line = 0;         // 1-based; 0 when the problem has no place in the file
  int column = 0;       // 1-based
  std::string key;      // the config key the problem is about
  std::string message;  // what is wrong and what to do
  std::string allowed;  // the valid values or range, empty when not a choice
  bool in_file = true;  // false for command-line overrides: no LINE:COL is printed

  std::string format() const;
};

bool has_errors(const std::vector<Diagnostic>& diags);
// Sorts by line, then column, keeping the order of diagnostics found at the same place.
void sort_by_position(std::vector<Diagnostic>& diags);
std::string format_all(const std::vector<Diagnostic>& diags);

}  // namespace studio
