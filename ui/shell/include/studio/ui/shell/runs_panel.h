#pragma once
// The runs dock: every run the studio knows (RunStore) in a table, newest first, with the
// actions that apply to the selected one.
#include <QWidget>

class QTableView;
class QToolBar;
class QAction;

namespace studio::ui {

class RunStore;
class RunsModel;

class RunsPanel : public QWidget {
  Q_OBJECT

 public:
  explicit RunsPanel(RunStore* store, QWidget* parent = nullptr);

  QString selectedRun() const;
  // Selects the row of `dir` (no signal when it is already selected); false when not listed.
  bool selectRun(const QString& dir);
  QTableView* view() const { return view_; }
  RunsModel* model() const { return model_; }
  // The toolbar's actions, for the window's menus.
  QAction* newRunAction() const { return newRun_; }
  QAction* openRunAction() const { return openRun_; }
  QAction* stopAction() const { return stop_; }
  QAction* overlayAction() const { return overlay_; }
  QAction* forgetAction() const { return forget_; }

 signals:
  void runSelected(const QString& dir);
  // The selected run left the list (its folder was deleted or moved, or it was forgotten): the
  // selection is cleared rather than moved to a neighbour, whose run the user did not pick.
  void selectedRunRemoved(const QString& dir);

 private:
  void updateActions();
  // After a model change: the run selected before, selected again, or reported gone.
  void reselect();

  RunStore* store_;
  RunsModel* model_;
  QString selected_;   // the run last emitted by runSelected
  int changing_ = 0;   // model changes under way (rows inserted, removed, moved; reset)
  QTableView* view_;
  QToolBar* toolbar_;
  QAction* newRun_;
  QAction* openRun_;
  QAction* stop_;
  QAction* overlay_;
  QAction* forget_;
};

}  // namespace studio::ui
