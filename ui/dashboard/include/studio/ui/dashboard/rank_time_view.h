#pragma once
// Where each rank's time went at one step (docs/events.md, "Where the time goes"): a stacked
// bar per rank of compute, sequence-parallel communication, gradient reduction and gathering,
// data and waiting, in seconds per optimizer step, drawn from the step events' rank_times. The
// step is picked with a spin box (or from the dashboard's straggler chart); until the user
// picks one it follows the newest step. Keyboard: the spin box takes the focus, arrows and
// Page Up/Down move through the steps.
#include <array>
#include <utility>
#include <vector>

#include <QString>
#include <QWidget>

#include "studio/ui/dashboard/run_series.h"

class QCPBars;
class QCustomPlot;
class QLabel;
class QSpinBox;

namespace studio::ui {

class RankTimeView : public QWidget {
  Q_OBJECT

 public:
  static constexpr int kParts = 5;  // compute, SP comm, grad comm, data, wait (bottom to top)

  explicit RankTimeView(QWidget* parent = nullptr);

  // The run whose steps are drawn (nullptr: none); draws again from it.
  void setSeries(const RunSeries* series);
  const RunSeries* series() const { return series_; }
  // Draws again from the series (new steps arrived).
  void refresh();
  // Shows the reported step at or before `step` and stops following the newest.
  void selectStep(double step);
  // The step drawn (-1: none) and whether it follows the newest.
  double shownStep() const { return shown_; }
  bool followsNewest() const { return follow_; }

  QCustomPlot* plot() const { return plot_; }
  // The bars of one part (kParts, bottom to top), for tests and exports; barValues: their
  // (rank, seconds) pairs as drawn.
  QCPBars* bars(int part) const { return bars_[static_cast<std::size_t>(part)]; }
  std::vector<std::pair<double, double>> barValues(int part) const;
  // "compute", "SP communication", ...
  static QString partName(int part);
  QString summary() const;

 Q_SIGNALS:
  void stepShown(double step);

 protected:
  void changeEvent(QEvent* event) override;

 private:
  void draw();
  void applyPalette();

  const RunSeries* series_ = nullptr;
  QCustomPlot* plot_ = nullptr;
  std::array<QCPBars*, kParts> bars_{};
  QSpinBox* stepBox_ = nullptr;
  QLabel* summary_ = nullptr;
  double shown_ = -1;
  bool follow_ = true;
  bool updating_ = false;  // the spin box is being set by the view, not the user
};

}  // namespace studio::ui
