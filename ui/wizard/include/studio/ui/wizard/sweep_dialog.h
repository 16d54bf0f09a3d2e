#pragma once
// The Review page's "Sweep...": which keys to vary and their values (every combination, or the
// i-th values together), how many points run at once and the sweep's name, with the list of
// its points, each checked as studio-train sweep checks it (sweep_point_config for the run's
// world) off the GUI thread. Start Sweep is enabled once every point is valid; the sweep then
// runs on this machine as `studio-train sweep` (LocalLauncher::launchSweep, docs/SWEEPS.md).
#include <memory>

#include <QDialog>
#include <QMetaType>
#include <QStringList>
#include <QTimer>

#include "studio/config/run_config.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace studio::ui {

template <class Result>
class LatestJob;

// What a check of the sweep found: the points' names, or why there are none (a value that does
// not parse, a list whose keys differ in length), and every invalid point's problems.
struct SweepCheck {
  QStringList points;
  QString error;        // the sweep itself cannot be expanded
  QStringList problems;  // "POINT: file:line: key: message", one per error
};

struct SweepChoice {
  QStringList axes;  // "key=v1,v2,..."
  bool list = false;
  int parallel = 1;
  QString name;
};

class SweepDialog : public QDialog {
  Q_OBJECT

 public:
  // `nproc`: the processes each point runs on (the Target page's nodes x GPUs), the world every
  // point is checked for; `onThisMachine`: local paths must exist (as studio-train train checks
  // them); false for a Slurm host, where a model path may be the host's own.
  SweepDialog(const studio::RunConfig& base, const QString& baseDir, int nproc,
              QWidget* parent = nullptr, bool onThisMachine = true);
  ~SweepDialog() override;

  SweepChoice choice() const;
  // The axes table: one row per key, "Key" and "Values" (comma-separated YAML values).
  QTableWidget* axesTable() const { return axes_; }
  // Sets the table to `axes` ("key=v1,v2"), replacing its rows.
  void setAxes(const QStringList& axes);
  QComboBox* modeBox() const { return mode_; }
  QSpinBox* parallelBox() const { return parallel_; }
  QLineEdit* nameEdit() const { return name_; }
  QListWidget* pointsList() const { return points_; }
  QLabel* summaryLabel() const { return summary_; }
  QPushButton* startButton() const { return start_; }
  QPushButton* addButton() const { return add_; }
  QPushButton* removeButton() const { return remove_; }
  // True while a check is pending or running.
  bool isChecking() const;
  const SweepCheck& lastCheck() const { return check_; }

 signals:
  // The points list and the summary show the current table.
  void checked();

 private:
  void scheduleCheck();
  void runCheck();
  void showCheck(const SweepCheck& check);
  QStringList axisTexts() const;

  studio::RunConfig base_;
  QString baseDir_;
  int nproc_ = 1;
  bool onThisMachine_ = true;
  QTableWidget* axes_;
  QComboBox* mode_;
  QSpinBox* parallel_;
  QLineEdit* name_;
  QListWidget* points_;
  QLabel* summary_;
  QPushButton* add_;
  QPushButton* remove_;
  QPushButton* start_;
  QTimer debounce_;
  SweepCheck check_;
  std::unique_ptr<LatestJob<SweepCheck>> job_;
};

}  // namespace studio::ui

Q_DECLARE_METATYPE(studio::ui::SweepChoice)
