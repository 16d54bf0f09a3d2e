#include "studio/ui/editor/diagnostics_model.h"

#include <algorithm>

#include <QApplication>
#include <QIcon>
#include <QStyle>

namespace studio::ui {

QString messageText(const studio::Diagnostic& d) {
  QString text = QString::fromStdString(d.message);
  if (!d.allowed.empty())
    text += QStringLiteral(" (allowed: %1)").arg(QString::fromStdString(d.allowed));
  return text;
}

DiagnosticsModel::DiagnosticsModel(QObject* parent) : QAbstractTableModel(parent) {}

void DiagnosticsModel::setDiagnostics(std::vector<studio::Diagnostic> diagnostics) {
  beginResetModel();
  diagnostics_ = std::move(diagnostics);
  endResetModel();
}

int DiagnosticsModel::errorCount() const {
  return static_cast<int>(std::count_if(diagnostics_.begin(), diagnostics_.end(), [](auto& d) {
    return d.severity == studio::Severity::Error;
  }));
}

int DiagnosticsModel::warningCount() const {
  return static_cast<int>(diagnostics_.size()) - errorCount();
}

int DiagnosticsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(diagnostics_.size());
}

int DiagnosticsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : ColumnCount;
}

QVariant DiagnosticsModel::display(const studio::Diagnostic& d, int column) const {
  switch (column) {
    case SeverityColumn:
      return d.severity == studio::Severity::Error ? tr("error") : tr("warning");
    case LineColumn:
      return d.line > 0 ? QVariant(d.line) : QVariant(QString());
    case KeyColumn:
      return QString::fromStdString(d.key);
    case MessageColumn:
      return messageText(d);
    default:
      return {};
  }
}

QVariant DiagnosticsModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
    return {};
  const studio::Diagnostic& d = diagnostics_[static_cast<size_t>(index.row())];
  switch (role) {
    case Qt::DisplayRole:
      return display(d, index.column());
    case Qt::ToolTipRole:
      return QString::fromStdString(d.format());
    case Qt::DecorationRole:
      if (index.column() != SeverityColumn) return {};
      return QApplication::style()->standardIcon(d.severity == studio::Severity::Error
                                                     ? QStyle::SP_MessageBoxCritical
                                                     : QStyle::SP_MessageBoxWarning);
    case Qt::TextAlignmentRole:
      if (index.column() != LineColumn) return {};
      return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
    case LineRole:
      return d.line;
    case ColumnRole:
      return d.column;
    case SeverityRole:
      return static_cast<int>(d.severity);
    default:
      return {};
  }
}

QVariant DiagnosticsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case SeverityColumn:
      return tr("Severity");
    case LineColumn:
      return tr("Line");
    case KeyColumn:
      return tr("Key");
    case MessageColumn:
      return tr("Message");
    default:
      return {};
  }
}

}  // namespace studio::ui
