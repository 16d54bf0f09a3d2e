#pragma once
// The runs dock: every run the studio knows (RunStore) in a table, newest first, with the
// actions that apply to the selected one. A filter bar narrows the list by name, state, host and
// stage; a click on a column header sorts by it (a third click goes back to newest first); the
// selected run's folder, log and config are one click (or key) away.
#include <QWidget>

class QTableView;
class QToolBar;
class QAction;
class QComboBox;
class QLineEdit;

namespace studio::ui {

class RunStore;
class RunsModel;
class RunsFilter;

class RunsPanel : public QWidget {
  Q_OBJECT

 public:
  explicit RunsPanel(RunStore* store, QWidget* parent = nullptr);

  QString selectedRun() const;
  // Every selected run (Ctrl/Shift-click selects several), the current one first.
  QStringList selectedRuns() const;
  // Selects the row of `dir` (no signal when it is already selected); false when not listed.
  bool selectRun(const QString& dir);
  QTableView* view() const { return view_; }
  RunsModel* model() const { return model_; }
  // What the view shows: the model filtered and sorted.
  RunsFilter* filter() const { return filter_; }
  // The toolbar's actions, for the window's menus.
  QAction* newRunAction() const { return newRun_; }
  QAction* openRunAction() const { return openRun_; }
  QAction* stopAction() const { return stop_; }
  // Stops every point of the selected run's sweep (the queue first): enabled while one of them
  // runs.
  QAction* stopSweepAction() const { return stopSweep_; }
  QAction* overlayAction() const { return overlay_; }
  QAction* forgetAction() const { return forget_; }
  QAction* openFolderAction() const { return openFolder_; }
  QAction* openLogAction() const { return openLog_; }
  QAction* openConfigAction() const { return openConfig_; }
  QAction* compareAction() const { return compare_; }
  // Compare Sweep: every listed point of the current run's sweep (it first), for compareRequested.
  QAction* compareSweepAction() const { return compareSweep_; }
  QStringList sweepRuns(const QString& dir) const;

 Q_SIGNALS:
  // Open Config: the selected run's config file, for the Config tab.
  void configRequested(const QString& path);
  // Compare: the selected runs (two or more), the current one first.
  void compareRequested(const QStringList& dirs);
  void runSelected(const QString& dir);
  // The selected run left the list (its folder was deleted or moved, or it was forgotten): the
  // selection is cleared rather than moved to a neighbour, whose run the user did not pick.
  void selectedRunRemoved(const QString& dir);

 private:
  void updateActions();
  // After a model change: the run selected before, selected again, or reported gone.
  void reselect();
  QWidget* createFilterBar();
  // The hosts of the listed runs in the host filter, the chosen one kept.
  void updateHostChoices();
  // A filter change, which the view's current row must not turn into a selection.
  template <class F>
  void refilter(F change);

  RunStore* store_;
  RunsModel* model_;
  RunsFilter* filter_;
  QLineEdit* nameFilter_ = nullptr;
  QComboBox* stateFilter_ = nullptr;
  QComboBox* hostFilter_ = nullptr;
  QComboBox* stageFilter_ = nullptr;
  QString selected_;   // the run last emitted by runSelected
  int changing_ = 0;   // model changes under way (rows inserted, removed, moved; reset)
  QTableView* view_;
  QToolBar* toolbar_;
  QAction* newRun_;
  QAction* openRun_;
  QAction* stop_;
  QAction* stopSweep_;
  QAction* overlay_;
  QAction* forget_;
  QAction* openFolder_;
  QAction* openLog_;
  QAction* openConfig_;
  QAction* compare_;
  QAction* compareSweep_;
};

}  // namespace studio::ui
