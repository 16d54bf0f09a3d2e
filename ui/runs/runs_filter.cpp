#include "studio/ui/runs/runs_filter.h"

#include "studio/ui/runs/runs_model.h"

namespace studio::ui {

RunsFilter::RunsFilter(QObject* parent) : QSortFilterProxyModel(parent) {
  setSortRole(RunsModel::SortRole);
  setDynamicSortFilter(true);  // a run's new step or loss moves it where the sort says
}

void RunsFilter::setNameFilter(const QString& text) {
  if (text == name_) return;
  name_ = text;
  invalidateFilter();
}

void RunsFilter::setStateFilter(std::optional<RunState> state) {
  if (state == state_) return;
  state_ = state;
  invalidateFilter();
}

void RunsFilter::setHostFilter(const QString& host) {
  if (host == host_) return;
  host_ = host;
  invalidateFilter();
}

void RunsFilter::setStageFilter(const QString& stage) {
  if (stage == stage_) return;
  stage_ = stage;
  invalidateFilter();
}

bool RunsFilter::filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const {
  const auto* runs = qobject_cast<const RunsModel*>(sourceModel());
  if (runs == nullptr || sourceParent.isValid()) return true;
  const RunInfo& run = runs->runAt(sourceRow);
  if (!name_.isEmpty() && !run.name.contains(name_, Qt::CaseInsensitive)) return false;
  if (state_ && run.state != *state_) return false;
  if (!host_.isEmpty() && run.host != host_) return false;
  if (!stage_.isEmpty() && run.stage.compare(stage_, Qt::CaseInsensitive) != 0) return false;
  return true;
}

}  // namespace studio::ui
