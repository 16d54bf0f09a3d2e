#pragma once
// The run dashboard: live charts of one run, or of several overlaid on shared axes. Run folders
// are followed by EventTailers (reading happens on their threads); events go into a RunSeries
// per run, and a single-shot timer moves what is new into the graphs and replots once, so a
// burst of events costs one replot and there are never more than 1000 / kCoalesceMs per second
// (fewer when an update takes longer than half the interval: the next waits twice as long as it
// took, up to kMaxCoalesceMs).
#include <array>
#include <optional>
#include <memory>
#include <vector>

#include <QString>
#include <QStringList>
#include <QTimer>
#include <QWidget>

#include "studio/runs/events.h"
#include "studio/ui/dashboard/chart_kind.h"
#include "studio/ui/dashboard/run_series.h"

class QCPGraph;
class QCheckBox;
class QComboBox;
class QCustomPlot;
class QLabel;
class QScrollArea;
class QSlider;

class QGridLayout;

namespace studio::ui {

class ChartPanel;
class EventTailer;
class RankTimeView;
class FailurePanel;

class RunDashboard : public QWidget {
  Q_OBJECT

 public:
  // Delay between the first new event and the replot that shows it, at least.
  static constexpr int kCoalesceMs = 100;
  static constexpr int kMaxCoalesceMs = 1000;
  static constexpr double kDefaultSmoothing = 0.6;
  static constexpr double kMaxSmoothing = 0.999;
  // Checkpoint and evaluation marks carry a label while a run has at most this many of them.
  static constexpr std::size_t kLabelledMarks = 12;

  explicit RunDashboard(QWidget* parent = nullptr);
  ~RunDashboard() override;

  // Shows the run in `runDir` alone (every other run is removed) and follows its events.jsonl
  // live from the first line. The label names it in legends and CSV headers; by default the
  // folder's name.
  void showRun(const QString& runDir, const QString& label = {});
  // Adds another run folder on the same axes, read and followed the same way. Adding a folder
  // that is already shown only changes its label.
  void addOverlayRun(const QString& runDir, const QString& label = {});
  // Removes a run (folder or feed key) and stops following it.
  void removeRun(const QString& runDir);
  // The runs shown, first the primary one, as cleaned paths (QDir::cleanPath) or feed keys.
  QStringList runs() const;
  // The series of a run, or nullptr when it is not shown.
  const RunSeries* series(const QString& runDir) const;
  QString label(const QString& runDir) const;
  // The tailer following a run folder (its cursor can be persisted), or nullptr for a feed.
  const EventTailer* tailer(const QString& runDir) const;
  // Adds events to a run without reading any file (tests, benchmarks, replays); creates the
  // run, labelled after the key's last path component, when it is not shown yet.
  void feed(const QString& runKey, const std::vector<studio::Event>& events);
  // An nvidia-smi sample of the GPUs of `host`, where a shown run that reports no memory of its
  // own runs (RunSeries::addDeviceSample). Returns whether the run took it.
  bool addDeviceSample(const QString& runKey, const QString& host,
                       const std::vector<studio::GpuMemory>& gpus);
  // A shown run whose steps report no memory (a LLaMA-Factory run): the studio samples its
  // host's GPUs for it while it lives.
  bool wantsDeviceSamples(const QString& runKey) const;

  // Loss smoothing, TensorBoard's EMA weight in [0, kMaxSmoothing].
  void setSmoothing(double weight);
  double smoothing() const { return smoothing_; }
  // Value axes fitted to their values without outliers ("Ignore outliers": Tukey's far fences).
  void setIgnoreOutliers(bool on);
  bool ignoresOutliers() const { return ignoreOutliers_; }
  // The charts' order (three a row) and the one shown alone, if any: rearranged from each chart's
  // context menu, enlarged from its title bar; kept in the settings ("dashboard/order",
  // "dashboard/enlarged") for the next start.
  std::vector<ChartKind> chartOrder() const { return order_; }
  void moveChart(ChartKind kind, int delta);
  void setEnlargedChart(std::optional<ChartKind> kind);
  std::optional<ChartKind> enlargedChart() const { return enlarged_; }
  // The hover read-out of a chart at x (each line's exact value at its nearest point).
  QString readoutAt(ChartKind kind, double x) const;
  // A user's zoom or drag of one chart's x axis to [lower, upper]: every chart follows.
  void setLinkedXRange(ChartKind kind, double lower, double upper);
  // Logarithmic value axis on the loss chart.
  void setLogScale(bool on);
  bool logScale() const { return logScale_; }
  // The x axis of every chart.
  void setXAxis(XAxisMode mode);
  XAxisMode xAxis() const { return mode_; }

  // The chart's picture (its on-screen size, or 1200x700 when it has none) as a PNG file, or
  // its data as CSV (chartCsv: x first, one column per series). Pending events are drawn first.
  // Files are replaced atomically. On failure returns false with the reason in `error`.
  bool exportPng(ChartKind kind, const QString& path, QString* error = nullptr);
  bool exportCsv(ChartKind kind, const QString& path, QString* error = nullptr);

  QCustomPlot* plot(ChartKind kind) const;
  // Where each rank's time went at a step (the first run's; hidden while it reports none).
  RankTimeView* rankTimeView() const { return rankTime_; }
  // The first run's cause of failure, above the charts (hidden unless it failed).
  FailurePanel* failurePanel() const { return failure_; }
  // False when the dashboard hides the chart: the DPO charts while no DPO run is shown.
  bool chartShown(ChartKind kind) const;
  // False when the chart shows a line of text instead of its plot (nothing to draw).
  bool chartHasPlot(ChartKind kind) const;
  // The run's graphs on one chart, in drawing order; empty for an unknown run.
  std::vector<QCPGraph*> graphs(ChartKind kind, const QString& runKey) const;

  // Draws what is pending now instead of at the coalescing timer.
  void flush();
  // Fits every chart to its data again (after the user dragged or zoomed) and replots; the
  // charts then follow new data until the next drag or zoom.
  void fitToData();
  // Scrolls the charts so that `kind`'s is in view (the charts do not all fit a small window).
  void revealChart(ChartKind kind);
  // Scrolls the time-per-rank view (under the charts) into view.
  void revealRankTimes();
  bool updatePending() const { return pending_; }

  // The facts line's live parts for a run: "step 120 of 1000, ETA 1:12:05" from the pace of its
  // last steps (empty once it ended or without total_steps), and its model FLOP rate and MFU
  // (docs/events.md), or "" when its steps report none.
  static QString etaText(const RunSeries& series);
  static QString utilisationText(const RunSeries& series);

 Q_SIGNALS:
  // New events of a run reached the charts (once per coalesced update).
  void runUpdated(QString runDir);
  // An end event of the run reached the charts; `state` is finished, failed or stopped.
  void runEnded(QString runDir, QString state);
  // After each coalesced replot. A hidden dashboard keeps its graphs up to date but draws
  // nothing until it is shown again (then once).
  void replotted();
  // Reading a followed run folder failed (the tailer keeps trying).
  void readError(QString runDir, QString message);
  // Reading a followed run folder skipped lines or repaired fields (EventTailer::readProblems);
  // the summary is also shown above the charts, and on the charts while no step was read.
  void readProblems(QString runDir, QString summary);
  // The failure panel's "Open the config" (a config error): the file, 1-based line and column.
  void openConfigRequested(QString path, int line, int column);

 protected:
  void showEvent(QShowEvent* event) override;
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  struct Run;

  QWidget* buildControls();
  QWidget* buildCharts();
  Run& ensureRun(const QString& key, const QString& label, bool follow);
  Run* find(const QString& key);
  const Run* find(const QString& key) const;
  void follow(Run& run);
  void ingest(const QString& key, const std::vector<studio::Event>& events);
  void scheduleUpdate();
  void applyUpdate();
  void updateChartStates();
  void updateFacts();
  void replot();
  void exportWithDialog(ChartKind kind, bool png);

  std::vector<std::unique_ptr<Run>> runs_;
  int nextSlot_ = 0;
  std::array<ChartPanel*, kChartCount> panels_{};
  std::vector<ChartKind> order_;
  std::optional<ChartKind> enlarged_;
  std::array<bool, kChartCount> wanted_{};  // shown as the runs' contents say (DPO, NVML)
  QGridLayout* grid_ = nullptr;
  void relayout();
  void saveLayout() const;
  QScrollArea* scroll_ = nullptr;
  QWidget* gridHost_ = nullptr;
  // With the time-per-rank view shown, the charts keep rows of 300 px, or the whole visible
  // height in a shorter window, the view then below them (scrolled to): it never squeezes the
  // charts' rows.
  void fitChartsToView();
  XAxisMode mode_ = XAxisMode::Step;
  double smoothing_ = kDefaultSmoothing;
  bool ignoreOutliers_ = false;
  bool logScale_ = false;
  bool pending_ = false;
  bool redrawAll_ = false;
  bool resmooth_ = false;
  bool replotWhenShown_ = false;
  QTimer updateTimer_;

  QComboBox* xAxisBox_ = nullptr;
  QSlider* smoothingSlider_ = nullptr;
  QLabel* smoothingValue_ = nullptr;
  QCheckBox* logBox_ = nullptr;
  QLabel* facts_ = nullptr;
  QLabel* status_ = nullptr;
  RankTimeView* rankTime_ = nullptr;
  FailurePanel* failure_ = nullptr;
};

}  // namespace studio::ui
