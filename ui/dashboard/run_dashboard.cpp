#include "studio/ui/dashboard/run_dashboard.h"

#include "studio/ui/dashboard/rank_time_view.h"
#include "studio/ui/dashboard/failure_panel.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QFileInfo>
#include <QGridLayout>
#include <QSettings>
#include <QHBoxLayout>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QScrollArea>
#include <QSignalBlocker>
#include <QSlider>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include "chart_export.h"
#include "chart_panel.h"
#include "run_graphs.h"
#include "studio/ui/dashboard/event_tailer.h"

namespace studio::ui {

struct RunDashboard::Run {
  QString key;
  RunSeries series;
  std::unique_ptr<RunGraphs> graphs;
  std::unique_ptr<EventTailer> tailer;
  bool dirty = false;  // events arrived since the last update
  QString error;       // the last read error, until events arrive again
  QString problems;    // what reading skipped or repaired (ReadProblems::summary), or ""
};

namespace {

constexpr int kSmoothingSteps = 1000;  // slider positions: weight = position / 1000
const QSize kExportSize(1200, 700);

QString keyOf(const QString& runDir) { return QDir::cleanPath(runDir); }

QString defaultLabel(const QString& key) {
  const QString name = QFileInfo(key).fileName();
  return name.isEmpty() ? key : name;
}

// The last finite capacity each rank reported: what the limit lines show.
void collectCapacities(const RunSeries& series, std::set<double>& out) {
  for (const GpuSeries& gpu : series.gpus()) {
    for (auto it = gpu.total.rbegin(); it != gpu.total.rend(); ++it) {
      if (!std::isfinite(*it)) continue;
      out.insert(std::round(*it));
      break;
    }
  }
}

QString hms(double seconds) {
  const auto s = static_cast<qint64>(std::llround(std::max(0.0, seconds)));
  return QStringLiteral("%1:%2:%3")
      .arg(s / 3600)
      .arg((s / 60) % 60, 2, 10, QLatin1Char('0'))
      .arg(s % 60, 2, 10, QLatin1Char('0'));
}

// The last finite value of a column, or NaN.
double lastFinite(const std::vector<double>& column) {
  for (auto it = column.rbegin(); it != column.rend(); ++it)
    if (std::isfinite(*it)) return *it;
  return kNoValue;
}

QString parameterCount(std::int64_t n) {
  if (n >= 1'000'000'000) return RunDashboard::tr("%1 B parameters").arg(n / 1e9, 0, 'f', 2);
  if (n >= 1'000'000) return RunDashboard::tr("%1 M parameters").arg(n / 1e6, 0, 'f', 2);
  return RunDashboard::tr("%1 parameters").arg(n);
}

}  // namespace

RunDashboard::RunDashboard(QWidget* parent) : QWidget(parent) {
  updateTimer_.setSingleShot(true);
  updateTimer_.setInterval(kCoalesceMs);
  connect(&updateTimer_, &QTimer::timeout, this, &RunDashboard::applyUpdate);

  facts_ = new QLabel;
  facts_->setObjectName(QStringLiteral("runFacts"));
  facts_->setTextFormat(Qt::PlainText);
  facts_->setWordWrap(true);
  facts_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  status_ = new QLabel;
  status_->setObjectName(QStringLiteral("readStatus"));
  status_->setTextFormat(Qt::PlainText);
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  status_->hide();

  failure_ = new FailurePanel;
  connect(failure_, &FailurePanel::openConfigRequested, this, &RunDashboard::openConfigRequested);

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(buildControls());
  layout->addWidget(facts_);
  layout->addWidget(status_);
  layout->addWidget(failure_);
  layout->addWidget(buildCharts(), 1);
  updateChartStates();
  updateFacts();
}

RunDashboard::~RunDashboard() {
  // Graphs leave their plots and tailer threads stop while the plots still exist.
  runs_.clear();
}

QWidget* RunDashboard::buildControls() {
  auto* bar = new QWidget;
  auto* row = new QHBoxLayout(bar);
  row->setContentsMargins(0, 0, 0, 0);

  xAxisBox_ = new QComboBox;
  xAxisBox_->setObjectName(QStringLiteral("xAxis"));
  xAxisBox_->addItem(tr("Step"), static_cast<int>(XAxisMode::Step));
  xAxisBox_->addItem(tr("Relative time"), static_cast<int>(XAxisMode::RelativeTime));
  xAxisBox_->addItem(tr("Wall time"), static_cast<int>(XAxisMode::WallTime));
  connect(xAxisBox_, &QComboBox::currentIndexChanged, this, [this](int index) {
    setXAxis(static_cast<XAxisMode>(xAxisBox_->itemData(index).toInt()));
  });
  auto* xLabel = new QLabel(tr("&X axis:"));
  xLabel->setBuddy(xAxisBox_);
  row->addWidget(xLabel);
  row->addWidget(xAxisBox_);

  smoothingSlider_ = new QSlider(Qt::Horizontal);
  smoothingSlider_->setObjectName(QStringLiteral("smoothing"));
  smoothingSlider_->setRange(0, static_cast<int>(kMaxSmoothing * kSmoothingSteps));
  smoothingSlider_->setValue(static_cast<int>(kDefaultSmoothing * kSmoothingSteps));
  smoothingSlider_->setToolTip(tr("Loss smoothing: TensorBoard's exponential moving average "
                                  "weight (0 = raw)"));
  smoothingValue_ = new QLabel(QString::number(kDefaultSmoothing, 'f', 3));
  connect(smoothingSlider_, &QSlider::valueChanged, this,
          [this](int value) { setSmoothing(double(value) / kSmoothingSteps); });
  row->addSpacing(12);
  auto* smoothingLabel = new QLabel(tr("S&moothing:"));
  smoothingLabel->setBuddy(smoothingSlider_);
  row->addWidget(smoothingLabel);
  row->addWidget(smoothingSlider_, 1);
  row->addWidget(smoothingValue_);

  logBox_ = new QCheckBox(tr("Lo&g-scale loss"));
  logBox_->setObjectName(QStringLiteral("logScale"));
  connect(logBox_, &QCheckBox::toggled, this, &RunDashboard::setLogScale);
  row->addSpacing(12);
  row->addWidget(logBox_);
  auto* outliers = new QCheckBox(tr("Ignore &outliers"));
  outliers->setObjectName(QStringLiteral("ignoreOutliers"));
  outliers->setToolTip(tr("Fit each chart's value axis to its values without outliers (beyond 3 "
                          "interquartile ranges), so that a spike does not flatten the rest"));
  connect(outliers, &QCheckBox::toggled, this, &RunDashboard::setIgnoreOutliers);
  row->addWidget(outliers);

  auto* fit = new QPushButton(tr("Fi&t to data"));
  fit->setObjectName(QStringLiteral("fitToData"));
  fit->setToolTip(tr("Show all the data again on every chart after dragging or zooming "
                     "(double-click a chart to fit that one)"));
  connect(fit, &QPushButton::clicked, this, &RunDashboard::fitToData);
  row->addWidget(fit);
  return bar;
}

QWidget* RunDashboard::buildCharts() {
  auto* grid = new QGridLayout;
  grid->setContentsMargins(0, 0, 0, 0);
  for (ChartKind kind : kAllCharts) {
    auto* panel = new ChartPanel(kind);
    panels_[static_cast<std::size_t>(kind)] = panel;
    connect(panel, &ChartPanel::exportPngRequested, this, [this, kind] { exportWithDialog(kind, true); });
    connect(panel, &ChartPanel::exportCsvRequested, this, [this, kind] { exportWithDialog(kind, false); });
    // Linked x axes: a drag or zoom on one chart's x axis moves every other chart's too.
    connect(panel, &ChartPanel::xRangeChangedByUser, this, [this, panel](double lower, double upper) {
      for (ChartPanel* other : panels_) {
        if (other == panel || other == nullptr) continue;
        other->setLinkedXRange(lower, upper);
        other->plot()->replot(QCustomPlot::rpQueuedReplot);
      }
    });
  }
  auto at = [this](ChartKind kind) { return panels_[static_cast<std::size_t>(kind)]; };
  at(ChartKind::Accuracy)->setFixedValueRange(-0.05, 1.05);
  // Utilisation and power as percentages: util 100 % and power at its limit share one scale.
  at(ChartKind::GpuActivity)->setFixedValueRange(0, 105);
  for (ChartKind kind : kAllCharts) {
    ChartPanel* panel = at(kind);
    connect(panel, &ChartPanel::enlargeToggled, this, [this, kind] {
      setEnlargedChart(enlarged_ == kind ? std::nullopt : std::optional<ChartKind>(kind));
    });
    connect(panel, &ChartPanel::moveRequested, this, [this, kind](int delta) { moveChart(kind, delta); });
  }
  // Three columns, two rows above the fold by default: loss, tokens/s and per-GPU memory, then
  // the learning rate, the gradient norm and GPU activity, all at once from a 1600 x 1000 screen
  // on (the window's first size, 1480 x 920, leaves each chart its 240 px minimum height); the
  // DPO charts after them. The user's order and enlarged chart come back from the settings.
  order_ = {ChartKind::Loss,     ChartKind::TokensPerSec, ChartKind::Memory,
            ChartKind::LearningRate, ChartKind::GradNorm, ChartKind::GpuActivity,
            ChartKind::Straggler, ChartKind::Rewards,  ChartKind::Accuracy};
  QSettings settings;
  std::vector<ChartKind> saved;
  for (const QString& name : settings.value(QStringLiteral("dashboard/order")).toStringList())
    for (ChartKind kind : kAllCharts)
      if (chartName(kind) == name && std::find(saved.begin(), saved.end(), kind) == saved.end())
        saved.push_back(kind);
  for (ChartKind kind : order_)  // charts the saved order lacks (a newer studio's) go last
    if (std::find(saved.begin(), saved.end(), kind) == saved.end()) saved.push_back(kind);
  order_ = saved;
  const QString enlarged = settings.value(QStringLiteral("dashboard/enlarged")).toString();
  for (ChartKind kind : kAllCharts)
    if (chartName(kind) == enlarged) enlarged_ = kind;
  wanted_.fill(true);
  grid_ = grid;
  for (int c = 0; c < 3; ++c) grid->setColumnStretch(c, 1);

  // Under the charts: where each rank's time went at a step, picked on the straggler chart.
  rankTime_ = new RankTimeView;
  rankTime_->hide();
  connect(at(ChartKind::Straggler)->plot(), &QCustomPlot::plottableClick, this,
          [this](QCPAbstractPlottable* plottable, int index, QMouseEvent*) {
            auto* graph = qobject_cast<QCPGraph*>(plottable);
            if (!graph || runs_.empty() || index < 0 || index >= graph->dataCount()) return;
            // The point's row in the first run (on a time axis, the row at that time).
            const RunSeries& s = runs_.front()->series;
            const auto& xs = s.x(mode_);
            const double key = (graph->data()->begin() + index)->key;
            const auto row = std::lower_bound(xs.begin(), xs.end(), key) - xs.begin();
            if (row < static_cast<std::ptrdiff_t>(xs.size()))
              rankTime_->selectStep(s.steps()[static_cast<std::size_t>(row)]);
          });
  auto* gridHost = new QWidget;
  gridHost->setLayout(grid);
  gridHost_ = gridHost;
  relayout();  // the panels have their parent now: hiding one never makes it a window
  // Below the charts, and after them in the Tab order.
  auto* charts = new QWidget;
  auto* column = new QVBoxLayout(charts);
  column->setContentsMargins(0, 0, 0, 0);
  column->addWidget(gridHost, 1);
  column->addWidget(rankTime_);  // the panels have their parent now: hiding one never makes it a window
  auto* scroll = new QScrollArea;
  scroll->setObjectName(QStringLiteral("chartsArea"));
  scroll->setAccessibleName(tr("Charts"));
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setWidget(charts);
  scroll->viewport()->installEventFilter(this);
  scroll_ = scroll;
  return scroll;
}

bool RunDashboard::eventFilter(QObject* watched, QEvent* event) {
  if (scroll_ && watched == scroll_->viewport() && event->type() == QEvent::Resize) fitChartsToView();
  return QWidget::eventFilter(watched, event);
}

void RunDashboard::fitChartsToView() {
  if (!gridHost_ || !scroll_) return;
  // The view under the charts takes only what rows of kComfortableRowPx leave of the visible
  // height; in a shorter window the charts keep all of it and the view lies below the fold.
  constexpr int kComfortableRowPx = 300;
  int shown = 0;
  for (ChartPanel* panel : panels_)
    if (panel && !panel->isHidden()) ++shown;
  const int rows = std::max(1, (shown + 2) / 3);
  const int height = rankTime_->isHidden()
                         ? 0
                         : std::min(scroll_->viewport()->height(), rows * kComfortableRowPx);
  if (gridHost_->minimumHeight() != height) gridHost_->setMinimumHeight(height);
}

void RunDashboard::revealRankTimes() { scroll_->ensureWidgetVisible(rankTime_, 0, 0); }

void RunDashboard::revealChart(ChartKind kind) {
  scroll_->ensureWidgetVisible(panels_[static_cast<std::size_t>(kind)], 0, 0);
}

// --- runs ------------------------------------------------------------------------------------

void RunDashboard::showRun(const QString& runDir, const QString& label) {
  runs_.clear();
  nextSlot_ = 0;
  ensureRun(keyOf(runDir), label, true);
  scheduleUpdate();
}

void RunDashboard::addOverlayRun(const QString& runDir, const QString& label) {
  ensureRun(keyOf(runDir), label, true);
  scheduleUpdate();
}

void RunDashboard::removeRun(const QString& runDir) {
  const QString key = keyOf(runDir);
  const auto it = std::find_if(runs_.begin(), runs_.end(),
                               [&](const std::unique_ptr<Run>& run) { return run->key == key; });
  if (it == runs_.end()) return;
  runs_.erase(it);
  scheduleUpdate();
}

QStringList RunDashboard::runs() const {
  QStringList keys;
  for (const auto& run : runs_) keys << run->key;
  return keys;
}

RunDashboard::Run* RunDashboard::find(const QString& key) {
  const QString clean = keyOf(key);
  for (const auto& run : runs_)
    if (run->key == clean) return run.get();
  return nullptr;
}

const RunDashboard::Run* RunDashboard::find(const QString& key) const {
  return const_cast<RunDashboard*>(this)->find(key);
}

const RunSeries* RunDashboard::series(const QString& runDir) const {
  const Run* run = find(runDir);
  return run != nullptr ? &run->series : nullptr;
}

QString RunDashboard::label(const QString& runDir) const {
  const Run* run = find(runDir);
  return run != nullptr ? run->graphs->label() : QString();
}

const EventTailer* RunDashboard::tailer(const QString& runDir) const {
  const Run* run = find(runDir);
  return run != nullptr ? run->tailer.get() : nullptr;
}

std::vector<QCPGraph*> RunDashboard::graphs(ChartKind kind, const QString& runKey) const {
  const Run* run = find(runKey);
  return run != nullptr ? run->graphs->graphs(kind) : std::vector<QCPGraph*>{};
}

RunDashboard::Run& RunDashboard::ensureRun(const QString& key, const QString& label, bool follow) {
  Run* run = find(key);
  if (run == nullptr) {
    auto fresh = std::make_unique<Run>();
    fresh->key = key;
    fresh->graphs = std::make_unique<RunGraphs>(panels_, nextSlot_++,
                                                label.isEmpty() ? defaultLabel(key) : label);
    run = fresh.get();
    runs_.push_back(std::move(fresh));
  } else if (!label.isEmpty()) {
    run->graphs->setLabel(label);
  }
  if (follow && run->tailer == nullptr) this->follow(*run);
  return *run;
}

void RunDashboard::follow(Run& run) {
  run.tailer = std::make_unique<EventTailer>(run.key);
  connect(run.tailer.get(), &EventTailer::eventsRead, this,
          [this](const QString& dir, const std::shared_ptr<const std::vector<studio::Event>>& events) {
            ingest(dir, *events);
          });
  connect(run.tailer.get(), &EventTailer::restarted, this,
          [this](const QString& dir) {
            Run* run = find(dir);
            if (run == nullptr) return;
            // The series belong to the old file: start over with the new one.
            run->series.clear();
            run->problems.clear();
            run->dirty = true;
            scheduleUpdate();
          });
  connect(run.tailer.get(), &EventTailer::readProblems, this,
          [this](const QString& dir, const QString& summary) {
            if (Run* run = find(dir)) run->problems = summary;
            updateChartStates();
            updateFacts();
            emit readProblems(dir, summary);
          });
  connect(run.tailer.get(), &EventTailer::readError, this,
          [this](const QString& dir, const QString& message) {
            if (Run* run = find(dir)) run->error = message;
            updateFacts();
            emit readError(dir, message);
          });
  run.tailer->start();
}

void RunDashboard::feed(const QString& runKey, const std::vector<studio::Event>& events) {
  ensureRun(keyOf(runKey), {}, false);
  ingest(runKey, events);
}

bool RunDashboard::addDeviceSample(const QString& runKey, const QString& host,
                                   const std::vector<studio::GpuMemory>& gpus) {
  Run* run = find(keyOf(runKey));
  if (run == nullptr || !run->series.addDeviceSample(host.toStdString(), gpus)) return false;
  run->dirty = true;
  scheduleUpdate();
  return true;
}

bool RunDashboard::wantsDeviceSamples(const QString& runKey) const {
  const Run* run = find(keyOf(runKey));
  if (run == nullptr || run->series.facts().ended) return false;
  if (!run->series.facts().sampledHost.empty()) return true;
  for (const GpuSeries& gpu : run->series.gpus())
    for (double v : gpu.allocated)
      if (std::isfinite(v)) return false;
  return !run->series.has(Metric::RssMib);
}

void RunDashboard::ingest(const QString& key, const std::vector<studio::Event>& events) {
  Run* run = find(key);
  if (run == nullptr) return;  // removed while its events were on their way
  run->series.ingest(events);
  run->dirty = true;
  run->error.clear();
  scheduleUpdate();
}

// --- view options ----------------------------------------------------------------------------

void RunDashboard::setSmoothing(double weight) {
  weight = std::isfinite(weight) ? std::clamp(weight, 0.0, kMaxSmoothing) : kDefaultSmoothing;
  if (weight == smoothing_) return;
  smoothing_ = weight;
  {
    const QSignalBlocker block(smoothingSlider_);
    smoothingSlider_->setValue(static_cast<int>(std::lround(weight * kSmoothingSteps)));
  }
  smoothingValue_->setText(QString::number(weight, 'f', 3));
  resmooth_ = true;
  scheduleUpdate();
}

void RunDashboard::setLogScale(bool on) {
  if (on == logScale_) return;
  logScale_ = on;
  {
    const QSignalBlocker block(logBox_);
    logBox_->setChecked(on);
  }
  panels_[static_cast<std::size_t>(ChartKind::Loss)]->setLogScale(on);
  scheduleUpdate();
}

void RunDashboard::setXAxis(XAxisMode mode) {
  if (mode == mode_) return;
  mode_ = mode;
  {
    const QSignalBlocker block(xAxisBox_);
    xAxisBox_->setCurrentIndex(xAxisBox_->findData(static_cast<int>(mode)));
  }
  for (ChartPanel* panel : panels_) panel->setXAxisMode(mode);
  redrawAll_ = true;
  scheduleUpdate();
}

// --- updates ---------------------------------------------------------------------------------

void RunDashboard::scheduleUpdate() {
  pending_ = true;
  // Started once per burst, never pushed back: a steady stream still replots every
  // kCoalesceMs, and a burst of any size replots once.
  if (!updateTimer_.isActive()) updateTimer_.start();
}

void RunDashboard::flush() {
  if (pending_) applyUpdate();
}

void RunDashboard::setIgnoreOutliers(bool on) {
  ignoreOutliers_ = on;
  for (ChartPanel* panel : panels_) panel->setIgnoreOutliers(on);
  if (auto* box = findChild<QCheckBox*>(QStringLiteral("ignoreOutliers"))) {
    const QSignalBlocker block(box);
    box->setChecked(on);
  }
  applyUpdate();
}

QString RunDashboard::readoutAt(ChartKind kind, double x) const {
  return panels_[static_cast<std::size_t>(kind)]->readoutAt(x);
}

void RunDashboard::setLinkedXRange(ChartKind kind, double lower, double upper) {
  ChartPanel* panel = panels_[static_cast<std::size_t>(kind)];
  panel->plot()->xAxis->setRange(lower, upper);  // as a programmatic change: nothing follows
  emit panel->xRangeChangedByUser(lower, upper);  // as the user's: the others follow
}

void RunDashboard::fitToData() {
  for (ChartPanel* panel : panels_) panel->setFollowsData(true);
  // Through the coalesced update, so pending events are drawn too and replotted() is sent.
  applyUpdate();
}

void RunDashboard::applyUpdate() {
  QElapsedTimer took;
  took.start();
  updateTimer_.stop();
  pending_ = false;
  const bool redraw = std::exchange(redrawAll_, false);
  const bool resmooth = std::exchange(resmooth_, false);
  const PlotOptions options{mode_, smoothing_};

  QStringList updated;
  std::vector<std::pair<QString, QString>> ended;
  for (const auto& run : runs_) {
    if (!run->dirty && !redraw && !resmooth) continue;
    if (resmooth && !redraw) run->graphs->resmooth(run->series, options);
    const SeriesChanges changes = run->series.takeChanges();
    run->graphs->sync(run->series, changes, options, redraw);
    if (run->dirty) updated << run->key;
    if (changes.ended)
      ended.emplace_back(run->key, QString::fromStdString(run->series.facts().endState));
    run->dirty = false;
  }

  updateChartStates();
  updateFacts();
  for (ChartPanel* panel : panels_)
    if (!panel->isHidden()) panel->rescale();
  // Drawing a million points in a tab nobody looks at is wasted: that waits for showEvent.
  if (isVisible())
    replot();
  else
    replotWhenShown_ = true;
  // A long run's update can take a good part of the interval; waiting twice as long as the
  // last one took keeps the GUI thread at least two-thirds free while a huge file streams in
  // (up to a second, so that one slow redraw does not make the charts lag for long).
  updateTimer_.setInterval(
      std::clamp(2 * static_cast<int>(took.elapsed()), kCoalesceMs, kMaxCoalesceMs));
  for (const QString& key : updated) emit runUpdated(key);
  for (const auto& [key, state] : ended) emit runEnded(key, state);
}

void RunDashboard::replot() {
  replotWhenShown_ = false;
  for (ChartPanel* panel : panels_)
    if (!panel->isHidden()) panel->plot()->replot();
  emit replotted();
}

void RunDashboard::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  if (replotWhenShown_) replot();
}

void RunDashboard::updateChartStates() {
  bool anyDpo = false;
  bool anyRows = false;
  bool anyGpu = false;
  bool cpuRanksOnly = true;  // every run with per-rank memory trained on the CPU (device -1)
  bool anyRss = false;
  bool anyActivity = false;
  bool anyStraggler = false;
  std::set<double> capacities;
  for (const auto& run : runs_) {
    const RunSeries& s = run->series;
    anyDpo = anyDpo || s.isDpo();
    anyRows = anyRows || !s.empty();
    anyGpu = anyGpu || !s.gpus().empty();
    if (!s.gpus().empty()) cpuRanksOnly = cpuRanksOnly && s.facts().deviceName == "cpu";
    anyRss = anyRss || (s.gpus().empty() && s.has(Metric::RssMib));
    anyStraggler = anyStraggler || s.has(Metric::Straggler);
    for (const GpuSeries& gpu : s.gpus()) anyActivity = anyActivity || gpu.hasActivity();
    collectCapacities(s, capacities);
  }
  // NVML's figures exist for GPU runs on hosts with the driver's library only.
  const std::array<bool, kChartCount> before = wanted_;
  wanted_[static_cast<std::size_t>(ChartKind::Rewards)] = anyDpo;
  wanted_[static_cast<std::size_t>(ChartKind::Accuracy)] = anyDpo;
  wanted_[static_cast<std::size_t>(ChartKind::GpuActivity)] = anyActivity;
  wanted_[static_cast<std::size_t>(ChartKind::Straggler)] = anyStraggler;
  if (wanted_ != before) relayout();
  // Where each rank's time goes: the first run's steps (an overlay's other runs are compared
  // on the straggler chart).
  const RunSeries* primary = runs_.empty() ? nullptr : &runs_.front()->series;
  // Runs of two ranks or more: one rank has no one to wait for (its compute and data are in
  // the step time already).
  const bool times = primary && !primary->rankTimes().empty() &&
                     primary->rankTimes().back().ranks.size() >= 2;
  if (rankTime_->series() != primary) rankTime_->setSeries(primary);
  if (times) rankTime_->refresh();
  rankTime_->setVisible(times && !enlarged_);
  fitChartsToView();
  ChartPanel* activity = panels_[static_cast<std::size_t>(ChartKind::GpuActivity)];
  activity->setTitle(tr("GPU utilisation per rank (solid, %) and power draw (dashed, % of its limit)"));

  ChartPanel* memory = panels_[static_cast<std::size_t>(ChartKind::Memory)];
  memory->setLimitLines({capacities.begin(), capacities.end()}, QStringLiteral("MiB"));
  // Restarts on every chart, where the restarted world took over (its resumed step); then
  // checkpoints and evaluations (labelled while there are few enough to read).
  std::vector<ChartMark> marks;
  for (const auto& run : runs_)
    for (const RestartMark& r : run->series.facts().restarts) {
      ChartMark m;
      m.step = r.step;
      m.wall = r.wall;
      m.relative = r.relative;
      m.label = (runs_.size() > 1 ? run->graphs->label() + QStringLiteral(": ") : QString()) +
                tr("restart %1").arg(r.attempt) +
                (r.failedRank >= 0 ? tr(" (rank %1 failed)").arg(r.failedRank) : QString());
      marks.push_back(m);
    }
  for (const auto& run : runs_) {
    const RunSeries& s = run->series;
    const QString prefix = runs_.size() > 1 ? run->graphs->label() + QStringLiteral(": ") : QString();
    const auto& checkpoints = s.facts().checkpoints;
    for (const RunFacts::CheckpointMark& c : checkpoints) {
      ChartMark m;
      m.kind = ChartMark::Kind::Checkpoint;
      m.step = c.step;
      m.wall = c.wall;
      m.relative = c.relative;
      if (checkpoints.size() <= kLabelledMarks)
        m.label = prefix + tr("checkpoint %1").arg(static_cast<qint64>(c.step));
      marks.push_back(m);
    }
    const std::size_t evals = s.evalCount();
    for (std::size_t i = 0; i < evals; ++i) {
      ChartMark m;
      m.kind = ChartMark::Kind::Eval;
      m.step = s.evalX(XAxisMode::Step)[i];
      m.wall = s.evalX(XAxisMode::WallTime)[i];
      m.relative = s.evalX(XAxisMode::RelativeTime)[i];
      if (evals <= kLabelledMarks)
        m.label = prefix + tr("eval %1").arg(static_cast<qint64>(m.step));
      marks.push_back(m);
    }
  }
  for (ChartPanel* panel : panels_) panel->setMarks(marks);
  QString sampledHost;
  for (const auto& run : runs_)
    if (!run->series.facts().sampledHost.empty())
      sampledHost = QString::fromStdString(run->series.facts().sampledHost);
  if (anyGpu && !sampledHost.isEmpty())
    memory->setTitle(tr("GPU memory per device (MiB), sampled with nvidia-smi on %1 while the run "
                        "lives: all processes on each GPU").arg(sampledHost));
  else if (anyGpu && cpuRanksOnly)
    memory->setTitle(tr("Memory per rank on the CPU (MiB): solid held by tensors, dashed the "
                        "process's RSS"));
  else if (anyGpu)
    memory->setTitle(tr("GPU memory per rank (MiB): solid allocated, dashed reserved"));
  else if (anyRss)
    memory->setTitle(tr("Process memory, RSS (MiB): no GPU memory in this run"));
  else
    memory->setTitle(chartTitle(ChartKind::Memory));

  QStringList problemList;
  for (const auto& run : runs_)
    if (!run->problems.isEmpty()) problemList << run->problems;
  const QString problems = problemList.join(QLatin1Char('\n'));
  for (ChartPanel* panel : panels_) {
    bool anyPoint = false;
    for (int i = 0; i < panel->plot()->graphCount() && !anyPoint; ++i)
      anyPoint = !panel->plot()->graph(i)->data()->isEmpty();
    QString empty;
    if (!anyPoint) {
      if (runs_.empty())
        empty = tr("No run shown.");
      else if (!anyRows && !problems.isEmpty())
        empty = tr("No step of the run could be read yet.\n%1").arg(problems);
      else if (!anyRows)
        empty = tr("Waiting for the first step of the run…");
      else if (panel->kind() == ChartKind::Memory)
        empty = tr("No GPU memory in this run: its steps report neither GPU memory (gpus) nor "
                   "the process's resident memory (rss_mib).");
      else
        empty = tr("This run reports no %1.").arg(chartTitle(panel->kind()).toLower());
    }
    panel->setEmptyText(empty);
  }
}

QString RunDashboard::etaText(const RunSeries& series) {
  const RunFacts& f = series.facts();
  if (f.ended || f.totalSteps <= 0 || series.empty()) return {};
  const std::vector<double>& steps = series.steps();
  const std::vector<double>& wall = series.wallTime();
  const std::size_t last = steps.size() - 1;
  const double done = steps[last];
  if (done >= static_cast<double>(f.totalSteps)) return {};
  // Seconds per step over the last rows (up to 50, the pace now), else since the start.
  double perStep = kNoValue;
  const std::size_t first = last > 50 ? last - 50 : 0;
  if (last > first && std::isfinite(wall[last]) && std::isfinite(wall[first]) &&
      steps[last] > steps[first])
    perStep = (wall[last] - wall[first]) / (steps[last] - steps[first]);
  else if (std::isfinite(series.relativeTime()[last]) && done > 0)
    perStep = series.relativeTime()[last] / done;
  if (!std::isfinite(perStep) || perStep < 0) return {};
  return tr("step %1 of %2, ETA %3")
      .arg(static_cast<qint64>(done))
      .arg(f.totalSteps)
      .arg(hms(perStep * (static_cast<double>(f.totalSteps) - done)));
}

QString RunDashboard::utilisationText(const RunSeries& series) {
  const double tflops = lastFinite(series.values(Metric::ModelTflops));
  if (!std::isfinite(tflops)) return {};
  const RunFacts& f = series.facts();
  const QString device = QString::fromStdString(f.deviceName.empty() ? "?" : f.deviceName);
  const double mfu = lastFinite(series.values(Metric::Mfu));
  if (std::isfinite(mfu) && std::isfinite(f.peakTflops))
    return tr("MFU %1% (%2 model TFLOP/s per rank of %3 peak, %4)")
        .arg(100.0 * mfu, 0, 'f', 1)
        .arg(tflops, 0, 'g', 4)
        .arg(f.peakTflops, 0, 'g', 5)
        .arg(device);
  return tr("%1 model TFLOP/s per rank (MFU: no peak known for %2; set STUDIO_PEAK_TFLOPS)")
      .arg(tflops, 0, 'g', 4)
      .arg(device);
}

void RunDashboard::updateFacts() {
  if (runs_.empty()) {
    facts_->setText(tr("No run shown."));
    status_->hide();
    failure_->showEnd({}, {}, {}, -1);
    return;
  }
  const Run& primary = *runs_.front();
  const RunFacts& f = primary.series.facts();
  // A failed run opens on its cause (its folder's train.log when it has one).
  failure_->showEnd(primary.tailer ? primary.key : QString(),
                    f.ended ? QString::fromStdString(f.endState) : QString(),
                    QString::fromStdString(f.endReason),
                    primary.series.empty() ? -1.0 : primary.series.steps().back());
  QStringList parts;
  parts << primary.graphs->label();
  if (!f.stage.empty()) parts << QString::fromStdString(f.stage).toUpper();
  if (f.worldSize > 0) parts << tr("%n rank(s)", nullptr, f.worldSize);
  if (f.sequenceParallelSize > 0)
    parts << tr("SP %1 (%2)").arg(f.sequenceParallelSize).arg(QString::fromStdString(f.sequenceParallelMode));
  if (!f.model.architecture.empty())
    parts << QStringLiteral("%1, %2").arg(QString::fromStdString(f.model.architecture),
                                          parameterCount(f.model.parameters));
  // LoRA and freeze runs train a part (LLaMA-Factory's "trainable params" line).
  if (f.model.trainable_parameters > 0 && f.model.trainable_parameters < f.model.parameters)
    parts << tr("%1 trained (%2%)")
                 .arg(parameterCount(f.model.trainable_parameters))
                 .arg(100.0 * double(f.model.trainable_parameters) / double(f.model.parameters), 0,
                      'g', 3);
  if (!f.restarts.empty())
    parts << tr("restarted %n time(s), last after: %1", nullptr, int(f.restarts.size()))
                 .arg(QString::fromStdString(f.restarts.back().reason).left(160));
  else if (f.starts > 1)
    parts << tr("resumed %n time(s)", nullptr, f.starts - 1);
  if (const QString eta = etaText(primary.series); !eta.isEmpty())
    parts << eta;
  else if (!primary.series.empty())
    parts << tr("step %1").arg(static_cast<qint64>(primary.series.steps().back()));
  if (const QString mfu = utilisationText(primary.series); !mfu.isEmpty()) parts << mfu;
  if (f.ended)
    parts << QStringLiteral("%1: %2").arg(QString::fromStdString(f.endState),
                                          QString::fromStdString(f.endReason));
  else if (f.starts > 0)
    parts << tr("no end event yet");
  if (runs_.size() > 1) parts << tr("%n overlaid run(s)", nullptr, int(runs_.size() - 1));
  facts_->setText(parts.join(QStringLiteral(" · ")));

  QStringList errors;
  for (const auto& run : runs_) {
    if (!run->error.isEmpty()) errors << run->error;
    if (!run->problems.isEmpty()) errors << run->problems;
  }
  status_->setText(errors.join(QLatin1Char('\n')));
  status_->setVisible(!errors.isEmpty());
}

// --- charts and export -----------------------------------------------------------------------

QCustomPlot* RunDashboard::plot(ChartKind kind) const {
  return panels_[static_cast<std::size_t>(kind)]->plot();
}

bool RunDashboard::chartShown(ChartKind kind) const {
  return wanted_[static_cast<std::size_t>(kind)];
}

void RunDashboard::relayout() {
  for (ChartPanel* panel : panels_) grid_->removeWidget(panel);
  int index = 0;
  for (ChartKind kind : order_) {
    ChartPanel* panel = panels_[static_cast<std::size_t>(kind)];
    const bool show = wanted_[static_cast<std::size_t>(kind)] && (!enlarged_ || *enlarged_ == kind);
    panel->setVisible(show);
    if (!show) continue;
    if (enlarged_)
      grid_->addWidget(panel, 0, 0, 1, 3);
    else
      grid_->addWidget(panel, index / 3, index % 3);
    ++index;
  }
}

void RunDashboard::saveLayout() const {
  QStringList names;
  for (ChartKind kind : order_) names << chartName(kind);
  QSettings settings;
  settings.setValue(QStringLiteral("dashboard/order"), names);
  settings.setValue(QStringLiteral("dashboard/enlarged"), enlarged_ ? chartName(*enlarged_) : QString());
}

void RunDashboard::moveChart(ChartKind kind, int delta) {
  const auto it = std::find(order_.begin(), order_.end(), kind);
  if (it == order_.end()) return;
  const auto from = static_cast<int>(it - order_.begin());
  const int to = std::clamp(from + delta, 0, static_cast<int>(order_.size()) - 1);
  if (to == from) return;
  std::swap(order_[static_cast<std::size_t>(from)], order_[static_cast<std::size_t>(to)]);
  relayout();
  saveLayout();
}

void RunDashboard::setEnlargedChart(std::optional<ChartKind> kind) {
  enlarged_ = kind;
  relayout();
  updateChartStates();  // the time-per-rank view: hidden while a chart is enlarged
  fitChartsToView();
  // The new geometry now, before the replot: a chart enlarged from a grid cell must not be
  // drawn at its cell's old size in the corner it came from.
  gridHost_->layout()->activate();
  saveLayout();
  replot();
}

bool RunDashboard::chartHasPlot(ChartKind kind) const {
  return panels_[static_cast<std::size_t>(kind)]->showsPlot();
}

bool RunDashboard::exportPng(ChartKind kind, const QString& path, QString* error) {
  flush();
  QCustomPlot* p = plot(kind);
  const bool hasSize = p->isVisible() && p->width() >= 200 && p->height() >= 120;
  const QByteArray png = chartPng(*p, hasSize ? p->size() : kExportSize);
  if (png.isEmpty()) {
    if (error != nullptr) *error = tr("cannot render the %1 chart as PNG").arg(chartTitle(kind));
    return false;
  }
  return writeFileAtomically(path, png, error);
}

bool RunDashboard::exportCsv(ChartKind kind, const QString& path, QString* error) {
  flush();
  const ChartPanel* panel = panels_[static_cast<std::size_t>(kind)];
  return writeFileAtomically(path, chartCsv(*panel->plot(), panel->xHeader()), error);
}

void RunDashboard::exportWithDialog(ChartKind kind, bool png) {
  const QString dir = runs_.empty() ? QDir::homePath() : runs_.front()->key;
  const QString base = (runs_.empty() ? QStringLiteral("chart") : runs_.front()->graphs->label()) +
                       QLatin1Char('-') + chartName(kind);
  const QString path =
      png ? QFileDialog::getSaveFileName(this, tr("Save the %1 chart as PNG").arg(chartTitle(kind)),
                                         QDir(dir).filePath(base + QStringLiteral(".png")),
                                         tr("PNG images (*.png)"))
          : QFileDialog::getSaveFileName(this, tr("Export the %1 data as CSV").arg(chartTitle(kind)),
                                         QDir(dir).filePath(base + QStringLiteral(".csv")),
                                         tr("CSV files (*.csv)"));
  if (path.isEmpty()) return;
  QString error;
  const bool ok = png ? exportPng(kind, path, &error) : exportCsv(kind, path, &error);
  if (!ok) QMessageBox::warning(this, tr("Export failed"), error);
}

}  // namespace studio::ui
