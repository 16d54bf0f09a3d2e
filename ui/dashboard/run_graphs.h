#pragma once
// The graphs one run contributes to the dashboard's charts, kept in step with its RunSeries:
// new rows are appended to the graphs, and only a truncated series (a resume, a replaced file),
// another x axis or another smoothing weight redraws them. Private to studio_dashboard.
#include <array>
#include <cstddef>
#include <vector>

#include <QColor>
#include <QString>

#include "studio/ui/dashboard/chart_kind.h"
#include "studio/ui/dashboard/ema_smoother.h"
#include "studio/ui/dashboard/run_series.h"

class QCPGraph;

namespace studio::ui {

class ChartPanel;

// How the graphs show a series: the x axis and the loss smoothing weight.
struct PlotOptions {
  XAxisMode mode = XAxisMode::Step;
  double smoothing = 0.6;
};

class RunGraphs {
 public:
  using Panels = std::array<ChartPanel*, kChartCount>;
  // Series up to this many points get a marker on each point, so a run of a few steps shows
  // its points rather than a line that looks empty; longer ones are drawn as lines only.
  static constexpr int kMarkerLimit = 60;

  // `slot` picks the run's colour on single-series charts: runs keep theirs across charts.
  RunGraphs(const Panels& panels, int slot, const QString& label);
  // Removes the run's graphs from the charts.
  ~RunGraphs();
  RunGraphs(const RunGraphs&) = delete;
  RunGraphs& operator=(const RunGraphs&) = delete;

  // Renames the graphs (legend and CSV headers) after the run's label.
  void setLabel(const QString& label);
  QString label() const { return label_; }
  int slot() const { return slot_; }

  // Brings the graphs up to date with `series`, given what changed since the last sync; with
  // `redraw` everything is drawn again (the x axis or the smoothing changed).
  void sync(const RunSeries& series, const SeriesChanges& changes, const PlotOptions& options,
            bool redraw);

  // Recomputes the smoothed loss alone with another weight.
  void resmooth(const RunSeries& series, const PlotOptions& options);

  // The run's graphs on one chart, in drawing order.
  std::vector<QCPGraph*> graphs(ChartKind chart) const;

 private:
  // NotFinite: marks at the foot of the chart for the rows of `metric` with steps written as
  // NaN, Infinity or -Infinity; the metric's own line and its smoothed curve go on through the
  // finite rows around them instead of breaking there.
  // Eval and EvalAccuracy draw the evaluations (the eval events), the others the step rows.
  enum class Source {
    Metric, Smoothed, Eval, EvalAccuracy, Allocated, Reserved, Util, Power, NotFinite
  };
  static bool isEval(Source s) { return s == Source::Eval || s == Source::EvalAccuracy; }
  struct Line {
    ChartKind chart;
    Source source;
    Metric metric;  // for Metric
    int rank;       // for Allocated, Reserved, Util and Power
    QCPGraph* graph;
    std::size_t shown;  // rows (or evaluations) already in the graph
    // Points in the graph before its last row's: a last row that changes in place (a series
    // with merged rows fills its newest row step by step) is taken back to there and redrawn.
    int pointsBeforeLast = 0;
  };

  void addMissingLines(const RunSeries& series);
  bool hasLine(Source source, Metric metric, int rank) const;
  void addLine(ChartKind chart, int colorIndex, Source source, Metric metric = Metric::Loss,
               int rank = 0);
  void styleLine(const Line& line, const QColor& color);
  QString lineName(const Line& line) const;
  static bool isRawLoss(const Line& line);
  static bool inLegend(const Line& line);
  void append(Line& line, const RunSeries& series, XAxisMode mode);

  Panels panels_;
  int slot_;
  QString label_;
  std::vector<Line> lines_;
  EmaSmoother smoother_;
  EmaSmoother smootherBeforeLast_;  // its state before the last row shown
  std::size_t rowsShown_ = 0;
  std::size_t evalsShown_ = 0;
  bool sampled_ = false;  // memory from nvidia-smi samples: lines per GPU, not per rank
};

}  // namespace studio::ui
