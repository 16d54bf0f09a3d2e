#include "run_graphs.h"

#include <cmath>
#include <limits>
#include <optional>

#include <qcustomplot.h>

#include "chart_panel.h"

namespace studio::ui {

namespace {

// Colours per run on the charts with several series per run.
constexpr int kRewardColors = 4;
constexpr int kRankColorOffset = 3;
constexpr int kManyRanksBase = 10;      // past the palette (ChartPanel::seriesColor)
constexpr int kManyRanksPerRun = 1024;

QString metricName(Metric metric) {
  switch (metric) {
    case Metric::Loss: return QStringLiteral("loss");
    case Metric::LearningRate: return QStringLiteral("learning rate");
    case Metric::GradNorm: return QStringLiteral("grad norm");
    case Metric::TokensPerSec: return QStringLiteral("tokens/s");
    case Metric::RssMib: return QStringLiteral("RSS");
    case Metric::RewardsChosen: return QStringLiteral("chosen");
    case Metric::RewardsRejected: return QStringLiteral("rejected");
    case Metric::RewardsMargins: return QStringLiteral("margins");
    case Metric::RewardsAccuracies: return QStringLiteral("accuracy");
    case Metric::ModelTflops: return QStringLiteral("model TFLOP/s");
    case Metric::Mfu: return QStringLiteral("MFU");
    case Metric::Kl: return QStringLiteral("KL");
    case Metric::Straggler: return QStringLiteral("slowest / mean");
  }
  return {};
}

const GpuSeries* gpuOf(const RunSeries& series, int rank) {
  for (const GpuSeries& gpu : series.gpus())
    if (gpu.rank == rank) return &gpu;
  return nullptr;
}

}  // namespace

RunGraphs::RunGraphs(const Panels& panels, int slot, const QString& label)
    : panels_(panels), slot_(slot), label_(label) {}

RunGraphs::~RunGraphs() {
  for (const Line& line : lines_) line.graph->parentPlot()->removeGraph(line.graph);
}

void RunGraphs::setLabel(const QString& label) {
  label_ = label;
  for (const Line& line : lines_) line.graph->setName(lineName(line));
}

std::vector<QCPGraph*> RunGraphs::graphs(ChartKind chart) const {
  std::vector<QCPGraph*> out;
  for (const Line& line : lines_)
    if (line.chart == chart) out.push_back(line.graph);
  return out;
}

void RunGraphs::sync(const RunSeries& series, const SeriesChanges& changes,
                     const PlotOptions& options, bool redraw) {
  // Only the last row drawn changed (and maybe more came): take it back and draw on from there.
  const bool lastRowChanged =
      !redraw && rowsShown_ > 0 && changes.rowsFrom + 1 == rowsShown_ && series.size() >= rowsShown_;
  if (lastRowChanged) {
    for (Line& line : lines_) {
      if (isEval(line.source) || line.shown != rowsShown_) continue;
      QCPGraphDataContainer& data = *line.graph->data();
      if (line.pointsBeforeLast == 0)
        data.clear();
      else if (data.size() > line.pointsBeforeLast)
        data.removeAfter((data.constBegin() + (line.pointsBeforeLast - 1))->key);
      line.shown = rowsShown_ - 1;
      if (line.source == Source::Smoothed) smoother_ = smootherBeforeLast_;
    }
    if (changes.evalsFrom < evalsShown_) {
      for (Line& line : lines_) {
        if (!isEval(line.source)) continue;
        line.graph->data()->clear();
        line.shown = 0;
      }
    }
  } else if (redraw || changes.rowsFrom < rowsShown_) {
    // Rows were replaced: start from scratch, dropping graphs of metrics the series lost.
    for (const Line& line : lines_) line.graph->parentPlot()->removeGraph(line.graph);
    lines_.clear();
  } else if (changes.evalsFrom < evalsShown_) {
    for (Line& line : lines_) {
      if (!isEval(line.source)) continue;
      line.graph->data()->clear();
      line.shown = 0;
    }
  }
  if (const bool sampled = !series.facts().sampledHost.empty(); sampled != sampled_) {
    sampled_ = sampled;
    for (const Line& line : lines_) line.graph->setName(lineName(line));
  }
  // A smoothed curve starts from the first row, with the weight in force now.
  if (!hasLine(Source::Smoothed, Metric::Loss, 0)) smoother_ = EmaSmoother(options.smoothing);
  addMissingLines(series);
  for (Line& line : lines_) {
    append(line, series, options.mode);
    if (!isEval(line.source) && line.source != Source::NotFinite && !isRawLoss(line)) {
      // Markers for a few points only: a million scatter symbols would stall every replot.
      const bool few = line.graph->data()->size() <= kMarkerLimit;
      line.graph->setScatterStyle(few ? QCPScatterStyle(QCPScatterStyle::ssDisc, 5)
                                      : QCPScatterStyle());
    }
  }
  rowsShown_ = series.size();
  evalsShown_ = series.evalCount();
}

void RunGraphs::resmooth(const RunSeries& series, const PlotOptions& options) {
  smoother_ = EmaSmoother(options.smoothing);
  for (Line& line : lines_) {
    if (line.source != Source::Smoothed) continue;
    line.graph->data()->clear();
    line.shown = 0;
    append(line, series, options.mode);
  }
}

bool RunGraphs::hasLine(Source source, Metric metric, int rank) const {
  for (const Line& line : lines_) {
    if (line.source != source) continue;
    if ((source == Source::Metric || source == Source::NotFinite) && line.metric != metric)
      continue;
    if ((source == Source::Allocated || source == Source::Reserved || source == Source::Util ||
         source == Source::Power) &&
        line.rank != rank)
      continue;
    return true;
  }
  return false;
}

void RunGraphs::addLine(ChartKind chart, int colorIndex, Source source, Metric metric, int rank) {
  if (hasLine(source, metric, rank)) return;
  ChartPanel* panel = panels_[static_cast<std::size_t>(chart)];
  QCustomPlot* plot = panel->plot();
  QCPGraph* graph = source == Source::NotFinite ? plot->addGraph(plot->xAxis, panel->marksAxis())
                                                : plot->addGraph();
  Line line{chart, source, metric, rank, graph, 0};
  lines_.push_back(line);
  line.graph->setName(lineName(line));
  if (!inLegend(line)) line.graph->removeFromLegend();
  styleLine(line, ChartPanel::seriesColor(colorIndex));
}

void RunGraphs::addMissingLines(const RunSeries& series) {
  // One colour per run on single-series charts; rewards and ranks get several per run, offset
  // by the run's slot to keep the runs of an overlay apart.
  auto metricLine = [&](ChartKind chart, Metric metric, int colorIndex) {
    if (series.has(metric)) addLine(chart, colorIndex, Source::Metric, metric);
  };
  // Marks of diverged steps, drawn after (over) every line of the run.
  auto marks = [&](ChartKind chart, Metric metric, int colorIndex) {
    if (series.hasNotFinite(metric)) addLine(chart, colorIndex, Source::NotFinite, metric);
  };
  // Drawing order: the faint raw loss below its smoothed curve, the eval markers on top.
  metricLine(ChartKind::Loss, Metric::Loss, slot_);
  if (series.has(Metric::Loss)) addLine(ChartKind::Loss, slot_, Source::Smoothed);
  if (series.evalCount() > 0) addLine(ChartKind::Loss, slot_, Source::Eval);
  metricLine(ChartKind::TokensPerSec, Metric::TokensPerSec, slot_);
  metricLine(ChartKind::LearningRate, Metric::LearningRate, slot_);
  metricLine(ChartKind::GradNorm, Metric::GradNorm, slot_);
  int rankIndex = 0;
  // A few ranks take the run's few palette colours; more ranks get colours of their own (past
  // the palette, apart from every other run's).
  const bool manyRanks = series.gpus().size() > static_cast<std::size_t>(kRankColorOffset);
  for (const GpuSeries& gpu : series.gpus()) {
    const int color = manyRanks ? kManyRanksBase + slot_ * kManyRanksPerRun + rankIndex++
                                : slot_ * kRankColorOffset + rankIndex++;
    addLine(ChartKind::Memory, color, Source::Allocated, Metric::Loss, gpu.rank);
    addLine(ChartKind::Memory, color, Source::Reserved, Metric::Loss, gpu.rank);
    if (gpu.hasActivity()) {  // the same colour as the rank's memory
      addLine(ChartKind::GpuActivity, color, Source::Util, Metric::Loss, gpu.rank);
      addLine(ChartKind::GpuActivity, color, Source::Power, Metric::Loss, gpu.rank);
    }
  }
  // A CPU run has no device memory; its process's resident memory takes the chart instead.
  if (series.gpus().empty()) metricLine(ChartKind::Memory, Metric::RssMib, slot_);
  const int rewards = slot_ * kRewardColors;
  metricLine(ChartKind::Rewards, Metric::RewardsChosen, rewards);
  metricLine(ChartKind::Rewards, Metric::RewardsRejected, rewards + 1);
  metricLine(ChartKind::Rewards, Metric::RewardsMargins, rewards + 2);
  metricLine(ChartKind::Rewards, Metric::Kl, rewards + 3);
  metricLine(ChartKind::Accuracy, Metric::RewardsAccuracies, slot_);
  metricLine(ChartKind::Straggler, Metric::Straggler, slot_);
  // The evaluations' accuracy (dpo, rm) as markers over the training accuracy, as eval loss.
  if (series.hasEvalAccuracy()) addLine(ChartKind::Accuracy, slot_, Source::EvalAccuracy);
  marks(ChartKind::Loss, Metric::Loss, slot_);
  marks(ChartKind::TokensPerSec, Metric::TokensPerSec, slot_);
  marks(ChartKind::LearningRate, Metric::LearningRate, slot_);
  marks(ChartKind::GradNorm, Metric::GradNorm, slot_);
  if (series.gpus().empty()) marks(ChartKind::Memory, Metric::RssMib, slot_);
  marks(ChartKind::Rewards, Metric::RewardsChosen, rewards);
  marks(ChartKind::Rewards, Metric::RewardsRejected, rewards + 1);
  marks(ChartKind::Rewards, Metric::RewardsMargins, rewards + 2);
  marks(ChartKind::Rewards, Metric::Kl, rewards + 3);
  marks(ChartKind::Accuracy, Metric::RewardsAccuracies, slot_);
}

QString RunGraphs::lineName(const Line& line) const {
  QString what;
  switch (line.source) {
    case Source::Metric: what = metricName(line.metric); break;
    case Source::Smoothed: what = QStringLiteral("loss (smoothed)"); break;
    case Source::Eval: what = QStringLiteral("eval loss"); break;
    case Source::EvalAccuracy: what = QStringLiteral("eval accuracy"); break;
    case Source::Allocated:
      // Compact, one entry per rank (16 ranks in four short rows): the chart's title says solid
      // is allocated and dashed reserved.
      what = sampled_ ? QStringLiteral("GPU %1").arg(line.rank) : QStringLiteral("r%1").arg(line.rank);
      break;
    case Source::Reserved: what = QStringLiteral("rank %1 reserved").arg(line.rank); break;
    case Source::Util:
      what = QStringLiteral("%1 %2 utilisation").arg(sampled_ ? "GPU" : "rank").arg(line.rank);
      break;
    case Source::Power:
      what = QStringLiteral("%1 %2 power").arg(sampled_ ? "GPU" : "rank").arg(line.rank);
      break;
    case Source::NotFinite:
      what = QStringLiteral("%1 not finite (NaN or Infinity)").arg(metricName(line.metric));
      break;
  }
  return label_ + QStringLiteral(": ") + what;
}

bool RunGraphs::isRawLoss(const Line& line) {
  return line.source == Source::Metric && line.metric == Metric::Loss;
}

bool RunGraphs::inLegend(const Line& line) {
  // The raw loss is named by its smoothed curve, and a rank's reserved line (dashed) by its
  // allocated one of the same colour: the legend names each run without doubling up.
  return line.source != Source::Reserved && line.source != Source::Power && !isRawLoss(line);
}

void RunGraphs::styleLine(const Line& line, const QColor& color) {
  QPen pen(color, 1.0);
  switch (line.source) {
    case Source::Metric:
      if (isRawLoss(line)) {
        // Faint, below the smoothed curve, as TensorBoard draws it.
        QColor faint = color;
        faint.setAlpha(70);
        pen.setColor(faint);
      }
      break;
    case Source::Smoothed: break;
    case Source::Eval:
    case Source::EvalAccuracy:
      line.graph->setLineStyle(QCPGraph::lsNone);
      line.graph->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, color, 7));
      break;
    case Source::Allocated:
    case Source::Util: break;
    case Source::Reserved:
    case Source::Power: pen.setStyle(Qt::DashLine); break;
    case Source::NotFinite:
      // A bold triangle at the foot of the chart, in the run's colour, at each such step.
      line.graph->setLineStyle(QCPGraph::lsNone);
      line.graph->setScatterStyle(
          QCPScatterStyle(QCPScatterStyle::ssTriangle, QPen(color, 1.5), QBrush(color), 9));
      break;
  }
  line.graph->setPen(pen);
}

void RunGraphs::append(Line& line, const RunSeries& series, XAxisMode mode) {
  const bool eval = isEval(line.source);
  const std::vector<double>& xs = eval ? series.evalX(mode) : series.x(mode);
  const std::vector<double>* ys = nullptr;
  const std::vector<double>* limits = nullptr;  // power: drawn as a share of its limit
  switch (line.source) {
    case Source::Metric:
    case Source::NotFinite: ys = &series.values(line.metric); break;
    case Source::Smoothed: ys = &series.values(Metric::Loss); break;
    case Source::Eval: ys = &series.evalLoss(); break;
    case Source::EvalAccuracy: ys = &series.evalAccuracy(); break;
    case Source::Allocated:
    case Source::Reserved: {
      const GpuSeries* gpu = gpuOf(series, line.rank);
      if (gpu == nullptr) return;
      ys = line.source == Source::Allocated ? &gpu->allocated : &gpu->reserved;
      break;
    }
    case Source::Util:
    case Source::Power: {
      const GpuSeries* gpu = gpuOf(series, line.rank);
      if (gpu == nullptr) return;
      ys = line.source == Source::Util ? &gpu->util : &gpu->power;
      limits = line.source == Source::Power ? &gpu->powerLimit : nullptr;
      break;
    }
  }
  if (ys->size() != xs.size() || line.shown >= xs.size()) return;
  // The metric whose rows may hold steps written non-finite (marked, not a gap in the line).
  const std::optional<Metric> divergent =
      line.source == Source::Metric || line.source == Source::NotFinite
          ? std::optional<Metric>(line.metric)
          : line.source == Source::Smoothed ? std::optional<Metric>(Metric::Loss) : std::nullopt;

  QVector<QCPGraphData> points;
  points.reserve(static_cast<qsizetype>(xs.size() - line.shown));
  double lastKey = -std::numeric_limits<double>::infinity();
  bool sorted = true;
  for (std::size_t i = line.shown; i < xs.size(); ++i) {
    if (i + 1 == xs.size()) {
      line.pointsBeforeLast = line.graph->data()->size() + static_cast<int>(points.size());
      if (line.source == Source::Smoothed) smootherBeforeLast_ = smoother_;
    }
    // The smoother sees every row, drawn or not, so its state matches a full recomputation.
    double y = line.source == Source::Smoothed ? smoother_.next((*ys)[i]) : (*ys)[i];
    if (limits) y = (*limits)[i] > 0 ? 100.0 * y / (*limits)[i] : kNoValue;
    const double x = xs[i];
    if (!std::isfinite(x)) continue;  // no time for this row: it cannot be placed on this axis
    const bool notFinite = divergent && series.notFiniteAt(*divergent, i) > 0;
    if (line.source == Source::NotFinite) {
      if (!notFinite) continue;
      y = ChartPanel::notFiniteMarkY((*ys)[i]);
    } else if (notFinite && !std::isfinite(y)) {
      continue;  // marked: the line goes on from the finite rows around it
    }
    sorted = sorted && x >= lastKey;
    lastKey = x;
    points.append(QCPGraphData(x, y));
  }
  line.graph->data()->add(points, sorted);
  line.shown = xs.size();
}

}  // namespace studio::ui
