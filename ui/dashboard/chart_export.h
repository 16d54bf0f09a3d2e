#pragma once
// A chart's data as CSV and its picture as PNG, and writing either atomically. Private to
// studio_dashboard: RunDashboard::exportCsv and exportPng are the interface.
#include <QByteArray>
#include <QSize>
#include <QString>

class QCustomPlot;

namespace studio::ui {

// Every graph of the plot as one column, named by the graph, with the x values first: one row
// per x of the union of all graphs' keys, in ascending order, an empty cell where a graph has
// no point at that x or its value is NaN. Numbers are written in their shortest round-trip form.
QByteArray chartCsv(const QCustomPlot& plot, const QString& xHeader);

// The plot rendered at `size` (its on-screen size when that is empty) as PNG bytes.
QByteArray chartPng(QCustomPlot& plot, QSize size = {});

// Writes bytes to path with studio::write_file_atomic (temporary file, fsync, rename): readers
// see the old file or the new one. Returns false and sets `error` (naming the path) on failure.
bool writeFileAtomically(const QString& path, const QByteArray& bytes, QString* error);

}  // namespace studio::ui
