#include "chart_export.h"

#include "chart_panel.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <QBuffer>
#include <QPixmap>
#include <qcustomplot.h>

#include "studio/ui/base/local_path.h"
#include "studio/base/atomic_file.h"

namespace studio::ui {

namespace {

void appendField(std::string& out, const QString& text) {
  const std::string utf8 = text.toStdString();
  if (utf8.find_first_of(",\"\r\n") == std::string::npos) {
    out += utf8;
    return;
  }
  out += '"';
  for (char c : utf8) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

void appendNumber(std::string& out, double value) {
  if (!std::isfinite(value)) return;  // an empty cell: no value at this x
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  out.append(buffer, result.ptr);
}

// Where the merge stands in one graph's data (sorted by key).
struct Cursor {
  QCPGraphDataContainer::const_iterator it;
  QCPGraphDataContainer::const_iterator end;
};

}  // namespace

QByteArray chartCsv(const QCustomPlot& plot, const QString& xHeader) {
  std::string out;
  appendField(out, xHeader);
  std::vector<Cursor> cursors;
  std::vector<bool> marks;  // a column of steps written non-finite: the word, as Python writes it
  for (int i = 0; i < plot.graphCount(); ++i) {
    const QCPGraph* graph = plot.graph(i);
    out += ',';
    appendField(out, graph->name());
    cursors.push_back({graph->data()->constBegin(), graph->data()->constEnd()});
    marks.push_back(ChartPanel::isMarks(graph));
  }
  out += '\n';

  for (;;) {
    double x = std::numeric_limits<double>::infinity();
    for (const Cursor& c : cursors)
      if (c.it != c.end && c.it->key < x) x = c.it->key;
    if (std::isinf(x)) break;
    appendNumber(out, x);
    // One point per graph per row: a graph with two points at one x gets two rows.
    for (std::size_t i = 0; i < cursors.size(); ++i) {
      Cursor& c = cursors[i];
      out += ',';
      if (c.it != c.end && c.it->key == x) {
        if (marks[i])
          out += ChartPanel::notFiniteMarkText(c.it->value).toStdString();
        else
          appendNumber(out, c.it->value);
        ++c.it;
      }
    }
    out += '\n';
  }
  return QByteArray(out.data(), static_cast<qsizetype>(out.size()));
}

QByteArray chartPng(QCustomPlot& plot, QSize size) {
  if (size.isEmpty()) size = plot.size();
  const QPixmap pixmap = plot.toPixmap(size.width(), size.height());
  QByteArray bytes;
  QBuffer buffer(&bytes);
  buffer.open(QIODevice::WriteOnly);
  if (!pixmap.save(&buffer, "PNG")) return {};
  return bytes;
}

bool writeFileAtomically(const QString& path, const QByteArray& bytes, QString* error) {
  const std::string failure = studio::write_file_atomic(
      localPath(path), std::string_view(bytes.constData(), static_cast<std::size_t>(bytes.size())));
  if (failure.empty()) return true;
  if (error != nullptr) *error = QString::fromStdString(failure);
  return false;
}

}  // namespace studio::ui
