#include "studio/ui/shell/runs_panel.h"

#include <QAction>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QTableView>
#include <QToolBar>
#include <QVBoxLayout>

#include "studio/ui/runs/run_store.h"
#include "studio/ui/runs/runs_model.h"

namespace studio::ui {

RunsPanel::RunsPanel(RunStore* store, QWidget* parent)
    : QWidget(parent),
      store_(store),
      model_(new RunsModel(store, this)),
      view_(new QTableView),
      toolbar_(new QToolBar) {
  // While the model changes (runs found, gone, re-sorted), the view moves its current row by
  // itself: to a neighbour of a removed run, to row 0 after a reset. None of that is the user's
  // choice, so none of it selects a run; afterwards the run selected before is selected again,
  // or, gone from the list, reported. Connected before the view's selection model is: these
  // run first, before it moves anything.
  auto begin = [this] { ++changing_; };
  auto end = [this] {
    if (changing_ > 0) --changing_;
    if (changing_ == 0) reselect();
  };
  connect(model_, &QAbstractItemModel::rowsAboutToBeInserted, this, begin);
  connect(model_, &QAbstractItemModel::rowsInserted, this, end);
  connect(model_, &QAbstractItemModel::rowsAboutToBeRemoved, this, begin);
  connect(model_, &QAbstractItemModel::rowsRemoved, this, end);
  connect(model_, &QAbstractItemModel::rowsAboutToBeMoved, this, begin);
  connect(model_, &QAbstractItemModel::rowsMoved, this, end);
  connect(model_, &QAbstractItemModel::layoutAboutToBeChanged, this, begin);
  connect(model_, &QAbstractItemModel::layoutChanged, this, end);
  connect(model_, &QAbstractItemModel::modelAboutToBeReset, this, begin);
  connect(model_, &QAbstractItemModel::modelReset, this, end);
  view_->setModel(model_);
  view_->setSelectionBehavior(QAbstractItemView::SelectRows);
  view_->setSelectionMode(QAbstractItemView::SingleSelection);
  view_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  view_->verticalHeader()->hide();
  view_->horizontalHeader()->setStretchLastSection(true);
  view_->setAlternatingRowColors(true);
  view_->setObjectName(QStringLiteral("runsView"));

  newRun_ = toolbar_->addAction(tr("New Run..."));
  newRun_->setShortcut(QKeySequence::New);
  newRun_->setToolTip(tr("Build a run with the wizard (Ctrl+N)"));
  openRun_ = toolbar_->addAction(tr("Open Run..."));
  openRun_->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+O")));
  openRun_->setToolTip(tr("Add a run folder (holding events.jsonl) to the list"));
  toolbar_->addSeparator();
  stop_ = toolbar_->addAction(tr("Stop"));
  stop_->setShortcut(QKeySequence(QStringLiteral("Ctrl+.")));
  stop_->setToolTip(
      tr("Stop the selected run: SIGTERM, then SIGKILL after a grace period (on its host for a "
         "remote run)"));
  overlay_ = toolbar_->addAction(tr("Overlay"));
  overlay_->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+L")));
  overlay_->setToolTip(tr("Draw other runs on the same charts as this one (e.g. SP=1 vs SP=4)"));
  forget_ = toolbar_->addAction(tr("Forget"));
  forget_->setToolTip(tr("Remove the selected run from the list (its files stay)"));
  for (QAction* a : {newRun_, openRun_, stop_, overlay_, forget_})
    a->setShortcutContext(Qt::WindowShortcut);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  layout->addWidget(toolbar_);
  layout->addWidget(view_);

  connect(view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            updateActions();
            if (changing_ > 0 || !current.isValid()) return;
            const QString dir = current.data(Qt::UserRole).toString();
            if (dir == selected_) return;
            selected_ = dir;
            emit runSelected(selected_);
          });
  connect(model_, &QAbstractItemModel::modelReset, this, &RunsPanel::updateActions);
  connect(model_, &QAbstractItemModel::dataChanged, this, &RunsPanel::updateActions);
  connect(forget_, &QAction::triggered, this, [this] {
    const QString dir = selectedRun();
    if (!dir.isEmpty()) store_->forgetRun(dir);
  });
  updateActions();
}

void RunsPanel::reselect() {
  if (selected_.isEmpty()) return;
  if (store_->run(selected_)) {
    const QString current = selectedRun();
    if (current != selected_) selectRun(selected_);
    return;
  }
  const QString gone = selected_;
  selected_.clear();
  view_->selectionModel()->clear();
  updateActions();
  emit selectedRunRemoved(gone);
}

QString RunsPanel::selectedRun() const {
  const QModelIndex current = view_->selectionModel()->currentIndex();
  return current.isValid() ? current.siblingAtColumn(0).data(Qt::UserRole).toString() : QString();
}

bool RunsPanel::selectRun(const QString& dir) {
  for (int row = 0; row < model_->rowCount(); ++row) {
    const QModelIndex index = model_->index(row, 0);
    if (index.data(Qt::UserRole).toString() != dir) continue;
    if (view_->selectionModel()->currentIndex().row() != row)
      view_->selectionModel()->setCurrentIndex(
          index, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    view_->scrollTo(index);
    return true;
  }
  return false;
}

void RunsPanel::updateActions() {
  const QString dir = selectedRun();
  const auto info = dir.isEmpty() ? std::nullopt : store_->run(dir);
  const bool alive = info && (info->state == RunState::Running || info->state == RunState::Starting);
  // A remote run is stopped on its host (RemoteRuns::cancel); a local one by its pid here.
  stop_->setEnabled(alive && (info->local || info->remote));
  overlay_->setEnabled(info.has_value() && store_->runs().size() > 1);
  forget_->setEnabled(info.has_value());
}

}  // namespace studio::ui
