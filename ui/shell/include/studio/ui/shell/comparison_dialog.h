#pragma once
// Runs compared by what differs: a table of each run's final and best losses and of the config
// keys whose values differ between them (studio/ui/runs/run_comparison.h), read off the GUI
// thread; exported as CSV, and as PNG together with the chart the runs are overlaid on.
#include <QDialog>
#include <QPointer>

#include "studio/ui/runs/run_comparison.h"

class QLabel;
class QTableWidget;

namespace studio::ui {

class ComparisonDialog : public QDialog {
  Q_OBJECT

 public:
  // `chart`: the dashboard chart showing the runs overlaid, drawn above the table in the PNG
  // (may be nullptr).
  ComparisonDialog(const QStringList& runDirs, QWidget* chart, QWidget* parent = nullptr);

  const RunComparison& comparison() const { return comparison_; }
  bool isLoaded() const { return loaded_; }
  QTableWidget* table() const { return table_; }
  // The exports behind the dialog's buttons, without their file dialogs.
  bool exportCsv(const QString& path, QString* error = nullptr) const;
  bool exportPng(const QString& path, QString* error = nullptr) const;

 Q_SIGNALS:
  void loaded();

 private:
  void fill(const RunComparison& comparison);
  void fillSweep(const RunComparison& comparison);

  QPointer<QWidget> chart_;
  QTableWidget* table_;
  QLabel* summary_;
  RunComparison comparison_;
  bool loaded_ = false;
};

}  // namespace studio::ui
