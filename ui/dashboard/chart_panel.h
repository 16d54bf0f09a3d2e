#pragma once
// One chart of the dashboard: a title bar with export buttons over a QCustomPlot (or a line of
// text where the chart has nothing to show). It owns the look and the axes: palette colours,
// the x ticker of the axis mode, log scale, rescaling with margins until the user zooms, and
// the horizontal limit lines. Which graphs it holds is RunGraphs' business. Private to
// studio_dashboard.
#include <optional>
#include <vector>

#include <QColor>
#include <QSharedPointer>
#include <QWidget>

#include "studio/ui/dashboard/chart_kind.h"
#include "studio/ui/dashboard/run_series.h"

class QCPAxis;
class QCPAxisTicker;
class QCPGraph;
class QCPRange;
class QCustomPlot;
class QLabel;
class QPalette;
class QStackedWidget;

namespace studio::ui {

// A vertical mark across a chart where something happened to a run (a restart, a checkpoint,
// an evaluation): its place on each kind of x axis and its label ("" for none). Restarts are
// solid lines named "mark"; checkpoints dashed ("mark-checkpoint"), evaluations dotted
// ("mark-eval").
struct ChartMark {
  enum class Kind { Restart, Checkpoint, Eval };
  Kind kind = Kind::Restart;
  double step = 0;
  double wall = 0;      // unix time
  double relative = 0;  // seconds since the run's first start
  QString label;
};

class ChartPanel : public QWidget {
  Q_OBJECT

 public:
  explicit ChartPanel(ChartKind kind, QWidget* parent = nullptr);

  ChartKind kind() const { return kind_; }
  QCustomPlot* plot() const { return plot_; }

  void setTitle(const QString& title);
  // Shows `text` in place of the plot; an empty text shows the plot.
  void setEmptyText(const QString& text);
  bool showsPlot() const;

  void setXAxisMode(XAxisMode mode);
  XAxisMode xAxisMode() const { return mode_; }
  // The CSV header of the x column for the current mode.
  QString xHeader() const;
  void setLogScale(bool on);
  // Accuracy-like charts keep a fixed value range instead of fitting the data.
  void setFixedValueRange(double lower, double upper);
  // Horizontal limit lines (device capacities), with a label each; the value axis keeps them
  // in view.
  void setLimitLines(const std::vector<double>& values, const QString& unit);
  // Vertical marks (restarts), placed on the current x axis and moved when it changes.
  void setMarks(const std::vector<ChartMark>& marks);

  // Until the user drags or zooms, the axes follow the data; a double click or "Fit to data"
  // brings that back.
  bool followsData() const { return followData_; }
  void setFollowsData(bool on);
  // Fits the axes to the data with margins, when following it.
  void rescale();

  // The hidden value axis of [0, 1] that marks of steps written non-finite (NaN, Infinity,
  // -Infinity: a diverged run) sit on, at the foot of the chart whatever the values' scale.
  QCPAxis* marksAxis() const;
  // A mark's height on that axis, which keeps the word it stands for (a difference of a
  // ten-thousandth, not to be seen), and that word back from a mark's height.
  static double notFiniteMarkY(double value);
  static QString notFiniteMarkText(double y);
  static bool isMarks(const QCPGraph* graph);

  // Colours of series, from a palette that reads on light and dark backgrounds; any index.
  static QColor seriesColor(int index);
  // A plot's background, axes, grid and legend in the palette's colours (every chart's look).
  static void applyPlotPalette(QCustomPlot* plot, const QPalette& palette);

  // "Ignore outliers": the value axis fits the drawn values within Tukey's far fences (3
  // interquartile ranges beyond the quartiles), so one loss spike does not flatten the rest.
  void setIgnoreOutliers(bool on);
  // Linked x axes: another chart's x range, set as if the user had zoomed here (the axes stop
  // following the data until a fit).
  void setLinkedXRange(double lower, double upper);
  // The hover read-out at x = `key`: each drawn line's exact value at its point nearest `key`,
  // one line each ("RUN: loss = 2.3456 (step 120)"); "" when no line has a point.
  QString readoutAt(double key) const;
  // The keyboard, once Tab has put the focus on the plot: Left/Right and Up/Down pan by a tenth,
  // + and - zoom the x axis, 0 or Home fits to the data, Space shows the read-out at the middle
  // of the x range, the menu key (or Shift+F10) opens the chart's menu.
  static QString keyboardHelp();

 signals:
  void exportPngRequested();
  void exportCsvRequested();
  // The user dragged or zoomed this chart's x axis (the dashboard links the others to it).
  void xRangeChangedByUser(double lower, double upper);
  // The title bar's Enlarge button or the context menu: this chart alone (again: all charts).
  void enlargeToggled();
  // The context menu's Move earlier (-1) / Move later (+1): its place among the charts.
  void moveRequested(int delta);

 protected:
  void changeEvent(QEvent* event) override;
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  QWidget* buildTitleBar();
  void setupPlot();
  void applyPalette();
  void showContextMenu(const QPoint& pos);
  void fitAndReplot();
  void padKeyRange();
  void padValueRange();
  bool handleKey(QKeyEvent* event);

  ChartKind kind_;
  XAxisMode mode_ = XAxisMode::Step;
  bool logScale_ = false;
  bool followData_ = true;
  std::optional<std::pair<double, double>> fixedValueRange_;
  std::vector<double> limits_;
  QString limitUnit_;
  std::vector<ChartMark> marks_;
  void drawItems();
  bool ignoreOutliers_ = false;
  bool userAxisChange_ = false;  // a mouse drag or wheel of the user's is changing the axes
  QLabel* title_;
  QStackedWidget* stack_;
  QCustomPlot* plot_;
  QLabel* emptyText_;
};

}  // namespace studio::ui
