#pragma once
// The problems found in a run config as a table: severity, line, key, message. Views jump to a
// problem through LineRole and ColumnRole.
#include <vector>

#include <QAbstractTableModel>

#include "studio/config/diagnostic.h"

namespace studio::ui {

class DiagnosticsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column { SeverityColumn, LineColumn, KeyColumn, MessageColumn, ColumnCount };
  enum Role {
    LineRole = Qt::UserRole + 1,  // int, 1-based; 0 when the problem has no place in the file
    ColumnRole,                   // int, 1-based
    SeverityRole,                 // int: studio::Severity
  };

  explicit DiagnosticsModel(QObject* parent = nullptr);

  void setDiagnostics(std::vector<studio::Diagnostic> diagnostics);
  const std::vector<studio::Diagnostic>& diagnostics() const { return diagnostics_; }
  const studio::Diagnostic& diagnostic(int row) const { return diagnostics_.at(row); }
  int errorCount() const;
  int warningCount() const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  QVariant display(const studio::Diagnostic& d, int column) const;

  std::vector<studio::Diagnostic> diagnostics_;
};

// The message as the table shows it: the message followed by "(allowed: ...)" when given.
QString messageText(const studio::Diagnostic& d);

}  // namespace studio::ui
