#pragma once
// The runs of a RunStore as a table, newest first. Rows are inserted, moved and removed as the
// store's scans report, never reset, so a view keeps its selection while runs come and go.
#include <QAbstractTableModel>
#include <QHash>
#include <QIcon>
#include <QVector>

#include "studio/ui/runs/run_info.h"

namespace studio::ui {

class RunStore;

class RunsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    NameColumn,
    StateColumn,
    StageColumn,
    SpColumn,
    StepColumn,
    LossColumn,
    StartedColumn,
    HostColumn,
    ColumnCount
  };
  enum Role {
    DirRole = Qt::UserRole,  // QString: the run folder (any column)
    StateRole,               // int: RunState (any column)
    SortRole,                // what a column sorts by: numbers as numbers, times as times
  };

  explicit RunsModel(RunStore* store, QObject* parent = nullptr);

  const RunInfo& runAt(int row) const { return rows_.at(row); }
  // Row of a run folder, or -1.
  int rowOf(const QString& dir) const;

  // The colour a state is drawn in (its icon in the State column).
  static QColor stateColor(RunState state);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  void sync();
  void reorder(const QVector<RunInfo>& target);
  QVariant display(const RunInfo& run, int column) const;
  QIcon stateIcon(RunState state) const;

  RunStore* store_;
  QVector<RunInfo> rows_;
  mutable QHash<int, QIcon> icons_;  // drawn on first use: pixmaps need the application
};

// What the SP column shows: "4 (ulysses)", "1", or "" when unknown.
QString spText(const RunInfo& run);
// What the Step column shows: "120/500", "120", or "" before the first step.
QString stepText(const RunInfo& run);

}  // namespace studio::ui
