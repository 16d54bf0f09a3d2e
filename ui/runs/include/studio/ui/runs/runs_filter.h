#pragma once
// The runs list as the user narrows and orders it: a proxy over RunsModel that keeps the rows
// whose name contains a text (any case) and whose state, host and stage are the ones asked for
// (each "any" when unset), and sorts by any column by its RunsModel::SortRole (numbers as
// numbers, times as times). Unsorted (column -1) it keeps the model's order, newest first.
#include <QSortFilterProxyModel>
#include <optional>

#include "studio/ui/runs/run_info.h"

namespace studio::ui {

class RunsFilter : public QSortFilterProxyModel {
  Q_OBJECT

 public:
  explicit RunsFilter(QObject* parent = nullptr);

  void setNameFilter(const QString& text);
  void setStateFilter(std::optional<RunState> state);
  // "" any host; else the RunInfo::host shown in the Host column.
  void setHostFilter(const QString& host);
  // "" any stage; else "sft" or "dpo".
  void setStageFilter(const QString& stage);

  QString nameFilter() const { return name_; }
  std::optional<RunState> stateFilter() const { return state_; }
  QString hostFilter() const { return host_; }
  QString stageFilter() const { return stage_; }

 protected:
  bool filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const override;

 private:
  QString name_;
  std::optional<RunState> state_;
  QString host_;
  QString stage_;
};

}  // namespace studio::ui
