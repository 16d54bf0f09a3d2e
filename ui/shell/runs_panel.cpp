#include "studio/ui/shell/runs_panel.h"

#include <QAction>
#include <QComboBox>
#include <QDesktopServices>
#include <QDir>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLineEdit>
#include <QMenu>
#include <QSet>
#include <QTableView>
#include <QToolBar>
#include <QUrl>
#include <QVBoxLayout>

#include "studio/ui/runs/run_store.h"
#include "studio/ui/runs/runs_filter.h"
#include "studio/ui/runs/runs_model.h"

namespace studio::ui {

RunsPanel::RunsPanel(RunStore* store, QWidget* parent)
    : QWidget(parent),
      store_(store),
      model_(new RunsModel(store, this)),
      filter_(new RunsFilter(this)),
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
  // The view shows the filter's rows: its signals come once its own mapping follows the model's
  // change, so these read its rows as the view will.
  connect(filter_, &QAbstractItemModel::rowsAboutToBeInserted, this, begin);
  connect(filter_, &QAbstractItemModel::rowsInserted, this, end);
  connect(filter_, &QAbstractItemModel::rowsAboutToBeRemoved, this, begin);
  connect(filter_, &QAbstractItemModel::rowsRemoved, this, end);
  connect(filter_, &QAbstractItemModel::rowsAboutToBeMoved, this, begin);
  connect(filter_, &QAbstractItemModel::rowsMoved, this, end);
  connect(filter_, &QAbstractItemModel::layoutAboutToBeChanged, this, begin);
  connect(filter_, &QAbstractItemModel::layoutChanged, this, end);
  connect(filter_, &QAbstractItemModel::modelAboutToBeReset, this, begin);
  connect(filter_, &QAbstractItemModel::modelReset, this, end);
  filter_->setSourceModel(model_);
  view_->setModel(filter_);
  // Unsorted at first: the model's order, newest first. A header click sorts by that column; a
  // third click on it clears the sort.
  view_->horizontalHeader()->setSortIndicatorClearable(true);
  view_->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder);
  view_->setSortingEnabled(true);
  view_->setSelectionBehavior(QAbstractItemView::SelectRows);
  // Ctrl/Shift-click selects several runs to compare; the current row is the run shown.
  view_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  view_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  view_->verticalHeader()->hide();
  view_->horizontalHeader()->setStretchLastSection(true);
  view_->setAlternatingRowColors(true);
  view_->setObjectName(QStringLiteral("runsView"));
  view_->setAccessibleName(tr("Runs"));

  newRun_ = toolbar_->addAction(tr("&New Run..."));
  newRun_->setShortcut(QKeySequence::New);
  newRun_->setToolTip(tr("Build a run with the wizard (Ctrl+N)"));
  openRun_ = toolbar_->addAction(tr("&Open Run..."));
  openRun_->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+O")));
  openRun_->setToolTip(tr("Add a run folder (holding events.jsonl) to the list"));
  toolbar_->addSeparator();
  stop_ = toolbar_->addAction(tr("&Stop"));
  stop_->setShortcut(QKeySequence(QStringLiteral("Ctrl+.")));
  stop_->setToolTip(
      tr("Stop the selected run: SIGTERM, then SIGKILL after a grace period (on its host for a "
         "remote run)"));
  stopSweep_ = new QAction(tr("Stop Swee&p"), this);
  stopSweep_->setObjectName(QStringLiteral("stopSweep"));
  stopSweep_->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+K")));
  stopSweep_->setToolTip(tr("Stop the selected run's whole sweep: no point starts any more and the "
                            "running ones stop (a local sweep continues with studio-train sweep "
                            "--resume)"));
  overlay_ = toolbar_->addAction(tr("&Overlay"));
  overlay_->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+L")));
  overlay_->setToolTip(tr("Draw other runs on the same charts as this one (e.g. SP=1 vs SP=4)"));
  forget_ = toolbar_->addAction(tr("&Forget"));
  forget_->setToolTip(tr("Remove the selected run from the list (its files stay)"));
  // The run's own files, one click away (also in the list's context menu).
  openFolder_ = new QAction(tr("Open Run Fol&der"), this);
  openFolder_->setObjectName(QStringLiteral("openRunFolder"));
  openFolder_->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+F")));
  openFolder_->setToolTip(tr("Show the selected run's folder in the file manager"));
  openLog_ = new QAction(tr("Open Run &Log"), this);
  openLog_->setObjectName(QStringLiteral("openRunLog"));
  openLog_->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+G")));
  openLog_->setToolTip(tr("Open the selected run's train.log (else its events.jsonl)"));
  openConfig_ = new QAction(tr("Open Run Confi&g"), this);
  openConfig_->setObjectName(QStringLiteral("openRunConfig"));
  openConfig_->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+C")));
  openConfig_->setToolTip(tr("Show the config the selected run was launched with in the Config tab"));
  compare_ = toolbar_->addAction(tr("Co&mpare"));
  compare_->setObjectName(QStringLiteral("compareRuns"));
  compare_->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+M")));
  compare_->setToolTip(tr("Overlay the selected runs (Ctrl/Shift-click two or more) and list "
                          "their losses and the config keys that differ"));
  connect(compare_, &QAction::triggered, this, [this] {
    const QStringList dirs = selectedRuns();
    if (dirs.size() >= 2) emit compareRequested(dirs);
  });
  compareSweep_ = new QAction(tr("Compare S&weep"), this);
  compareSweep_->setObjectName(QStringLiteral("compareSweep"));
  compareSweep_->setShortcut(QKeySequence(QStringLiteral("Ctrl+Shift+W")));
  compareSweep_->setToolTip(tr("Overlay every point of the selected run's sweep and list them "
                               "with the swept keys as columns"));
  connect(compareSweep_, &QAction::triggered, this, [this] {
    const QStringList dirs = sweepRuns(selectedRun());
    if (!dirs.isEmpty()) emit compareRequested(dirs);
  });
  connect(view_->selectionModel(), &QItemSelectionModel::selectionChanged, this,
          &RunsPanel::updateActions);
  for (QAction* a :
       {newRun_, openRun_, stop_, stopSweep_, overlay_, forget_, openFolder_, openLog_, openConfig_,
        compare_, compareSweep_})
    a->setShortcutContext(Qt::WindowShortcut);
  addActions({stopSweep_, openFolder_, openLog_, openConfig_, compareSweep_});
  view_->setContextMenuPolicy(Qt::CustomContextMenu);
  connect(view_, &QWidget::customContextMenuRequested, this, [this](const QPoint& at) {
    QMenu menu(this);
    menu.addActions({openFolder_, openLog_, openConfig_});
    menu.addSeparator();
    menu.addActions({compare_, compareSweep_});
    menu.addActions({stop_, stopSweep_, overlay_, forget_});
    menu.exec(view_->viewport()->mapToGlobal(at));
  });
  auto openFile = [this](const QString& path) {
    if (!path.isEmpty()) QDesktopServices::openUrl(QUrl::fromLocalFile(path));
  };
  connect(openFolder_, &QAction::triggered, this, [this, openFile] { openFile(selectedRun()); });
  connect(openLog_, &QAction::triggered, this, [this, openFile] {
    const auto info = store_->run(selectedRun());
    if (!info) return;
    const QString events = QDir(info->dir).filePath(QStringLiteral("events.jsonl"));
    openFile(!info->logPath.isEmpty() ? info->logPath : events);
  });
  connect(openConfig_, &QAction::triggered, this, [this] {
    const auto info = store_->run(selectedRun());
    if (info && !info->configPath.isEmpty()) emit configRequested(info->configPath);
  });

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  layout->addWidget(toolbar_);
  layout->addWidget(createFilterBar());
  layout->addWidget(view_);
  setTabOrder(nameFilter_, stateFilter_);
  setTabOrder(stateFilter_, hostFilter_);
  setTabOrder(hostFilter_, stageFilter_);
  setTabOrder(stageFilter_, view_);
  connect(model_, &QAbstractItemModel::rowsInserted, this, &RunsPanel::updateHostChoices);
  connect(model_, &QAbstractItemModel::rowsRemoved, this, &RunsPanel::updateHostChoices);
  connect(model_, &QAbstractItemModel::dataChanged, this, &RunsPanel::updateHostChoices);
  updateHostChoices();

  connect(view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            updateActions();
            if (changing_ > 0 || !current.isValid()) return;
            const QString dir = current.data(Qt::UserRole).toString();
            if (dir == selected_) return;
            selected_ = dir;
            emit runSelected(selected_);
          });
  connect(filter_, &QAbstractItemModel::modelReset, this, &RunsPanel::updateActions);
  connect(filter_, &QAbstractItemModel::dataChanged, this, &RunsPanel::updateActions);
  connect(forget_, &QAction::triggered, this, [this] {
    const QString dir = selectedRun();
    if (!dir.isEmpty()) store_->forgetRun(dir);
  });
  updateActions();
}

QWidget* RunsPanel::createFilterBar() {
  auto* bar = new QWidget;
  auto* row = new QHBoxLayout(bar);
  row->setContentsMargins(2, 2, 2, 2);
  nameFilter_ = new QLineEdit;
  nameFilter_->setObjectName(QStringLiteral("filterName"));
  nameFilter_->setPlaceholderText(tr("Filter by name"));
  nameFilter_->setClearButtonEnabled(true);
  nameFilter_->setAccessibleName(tr("Filter runs by name"));
  stateFilter_ = new QComboBox;
  stateFilter_->setObjectName(QStringLiteral("filterState"));
  stateFilter_->setAccessibleName(tr("Filter runs by state"));
  stateFilter_->addItem(tr("Any state"), -1);
  for (RunState s : {RunState::Running, RunState::Starting, RunState::Queued, RunState::Finished,
                     RunState::Failed, RunState::Stopped, RunState::Lost})
    stateFilter_->addItem(runStateText(s), static_cast<int>(s));
  hostFilter_ = new QComboBox;
  hostFilter_->setObjectName(QStringLiteral("filterHost"));
  hostFilter_->setAccessibleName(tr("Filter runs by host"));
  hostFilter_->addItem(tr("Any host"), QString());
  stageFilter_ = new QComboBox;
  stageFilter_->setObjectName(QStringLiteral("filterStage"));
  stageFilter_->setAccessibleName(tr("Filter runs by stage"));
  stageFilter_->addItem(tr("Any stage"), QString());
  stageFilter_->addItem(QStringLiteral("sft"), QStringLiteral("sft"));
  stageFilter_->addItem(QStringLiteral("dpo"), QStringLiteral("dpo"));
  row->addWidget(nameFilter_, 1);
  row->addWidget(stateFilter_);
  row->addWidget(hostFilter_);
  row->addWidget(stageFilter_);
  connect(nameFilter_, &QLineEdit::textChanged, this,
          [this](const QString& text) { refilter([&] { filter_->setNameFilter(text.trimmed()); }); });
  connect(stateFilter_, &QComboBox::currentIndexChanged, this, [this] {
    const int state = stateFilter_->currentData().toInt();
    refilter([&] {
      filter_->setStateFilter(state < 0 ? std::nullopt : std::optional(static_cast<RunState>(state)));
    });
  });
  connect(hostFilter_, &QComboBox::currentIndexChanged, this, [this] {
    refilter([&] { filter_->setHostFilter(hostFilter_->currentData().toString()); });
  });
  connect(stageFilter_, &QComboBox::currentIndexChanged, this, [this] {
    refilter([&] { filter_->setStageFilter(stageFilter_->currentData().toString()); });
  });
  return bar;
}

template <class F>
void RunsPanel::refilter(F change) {
  ++changing_;
  change();
  --changing_;
  reselect();
  updateActions();
}

void RunsPanel::updateHostChoices() {
  QStringList hosts;
  for (int row = 0; row < model_->rowCount(); ++row) {
    const QString host = model_->runAt(row).host;
    if (!host.isEmpty() && !hosts.contains(host)) hosts << host;
  }
  hosts.sort(Qt::CaseInsensitive);
  QStringList shown;
  for (int i = 1; i < hostFilter_->count(); ++i) shown << hostFilter_->itemData(i).toString();
  if (shown == hosts) return;
  const QString chosen = hostFilter_->currentData().toString();
  const QSignalBlocker block(hostFilter_);
  while (hostFilter_->count() > 1) hostFilter_->removeItem(1);
  for (const QString& h : hosts) hostFilter_->addItem(h, h);
  // The chosen host stays chosen while it has no run listed (its runs may come back).
  if (!chosen.isEmpty() && !hosts.contains(chosen)) hostFilter_->addItem(chosen, chosen);
  hostFilter_->setCurrentIndex(std::max(0, hostFilter_->findData(chosen)));
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

QStringList RunsPanel::selectedRuns() const {
  QStringList dirs;
  const QString current = selectedRun();
  if (!current.isEmpty() && view_->selectionModel()->isRowSelected(
                                view_->selectionModel()->currentIndex().row(), QModelIndex()))
    dirs << current;
  for (const QModelIndex& index : view_->selectionModel()->selectedRows(0)) {
    const QString dir = index.data(RunsModel::DirRole).toString();
    if (!dirs.contains(dir)) dirs << dir;
  }
  return dirs;
}

bool RunsPanel::selectRun(const QString& dir) {
  for (int row = 0; row < filter_->rowCount(); ++row) {
    const QModelIndex index = filter_->index(row, 0);
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
  // A sweep can be stopped while any of its points runs here or on a host the studio reaches,
  // or while its queue runs here between two points (a stopped sweep's points that never
  // started stay Queued, with nothing left to signal).
  bool sweepAlive = false;
  if (info && !info->sweepDir.isEmpty())
    for (const QString& point : sweepRuns(dir)) {
      const auto p = store_->run(point);
      sweepAlive = sweepAlive || (p && p->sweepQueueAlive) ||
                   (p && (p->local || p->remote) &&
                    (p->state == RunState::Running || p->state == RunState::Starting));
    }
  stopSweep_->setEnabled(sweepAlive);
  overlay_->setEnabled(info.has_value() && store_->runs().size() > 1);
  forget_->setEnabled(info.has_value());
  openFolder_->setEnabled(info.has_value());
  openLog_->setEnabled(info.has_value());
  openConfig_->setEnabled(info && !info->configPath.isEmpty());
  compare_->setEnabled(view_->selectionModel()->selectedRows(0).size() >= 2);
  compareSweep_->setEnabled(info && !info->sweepDir.isEmpty() && sweepRuns(dir).size() >= 2);
}

QStringList RunsPanel::sweepRuns(const QString& dir) const {
  const auto info = dir.isEmpty() ? std::nullopt : store_->run(dir);
  QStringList dirs;
  if (!info || info->sweepDir.isEmpty()) return dirs;
  dirs << info->dir;  // the current point first: it stays the dashboard's run
  for (const RunInfo& r : store_->runs())
    if (r.sweepDir == info->sweepDir && r.dir != info->dir) dirs << r.dir;
  return dirs;
}

}  // namespace studio::ui
