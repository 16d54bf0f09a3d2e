#include "studio/ui/wizard/length_plan_chart.h"

#include <QMouseEvent>

#include <cmath>

namespace studio::ui {
namespace {

// The SP modes' colours (readable on light and dark backgrounds) and the savings' dashes.
QColor mode_color(studio::SpMode mode) {
  switch (mode) {
    case studio::SpMode::ZigzagRing: return QColor(0x1f, 0x77, 0xb4);
    case studio::SpMode::Ulysses: return QColor(0xd6, 0x27, 0x28);
    case studio::SpMode::Usp: return QColor(0x2c, 0xa0, 0x2c);
  }
  return Qt::gray;
}

Qt::PenStyle saving_dash(const studio::PlanOption& o) {
  if (o.long_context) return Qt::SolidLine;
  if (o.offload) return Qt::DashLine;
  return o.zero_stage >= 3 ? Qt::DashDotLine : Qt::DotLine;
}

}  // namespace

LengthPlanChart::LengthPlanChart(QWidget* parent) : PalettePlot(parent) {
  setObjectName(QStringLiteral("lengthPlan"));
  setAccessibleName(tr("Longest cutoff_len against the number of GPUs"));
  setMinimumHeight(240);
  xAxis->setScaleType(QCPAxis::stLogarithmic);
  yAxis->setScaleType(QCPAxis::stLogarithmic);
  auto xTicks = QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog);
  xTicks->setLogBase(2);
  xAxis->setTicker(xTicks);
  auto yTicks = QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog);
  yTicks->setLogBase(10);
  yAxis->setTicker(yTicks);
  yAxis->setNumberFormat(QStringLiteral("eb"));
  yAxis->setNumberPrecision(0);
  xAxis->setLabel(tr("GPUs"));
  yAxis->setLabel(tr("longest cutoff_len (tokens)"));
  published_ = addGraph();
  published_->setName(tr("published (their models and GPUs)"));
  published_->setLineStyle(QCPGraph::lsNone);
  legend->setVisible(true);
  legend->setFont(QFont(font().family(), font().pointSize() - 1));
  axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);
  applyColors();
  clearPlan();
}

void LengthPlanChart::applyColors() {
  PalettePlot::applyColors();
  const QColor text = palette().color(QPalette::WindowText);
  if (published_) {
    published_->setPen(QPen(text));
    published_->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDiamond, text, text, 8));
  }
  for (QCPItemText* label : labels_) label->setColor(text);
  for (size_t i = 0; i < lines_.size() && i < plan_.lines.size(); ++i) {
    const QColor c = mode_color(plan_.lines[i].option.mode);
    lines_[i]->setPen(QPen(c, 2, saving_dash(plan_.lines[i].option)));
    lines_[i]->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, c, c, 5));
  }
}

void LengthPlanChart::clearPlan() {
  plan_ = {};
  for (QCPGraph* g : lines_) removeGraph(g);
  lines_.clear();
  for (QCPItemText* label : labels_) removeItem(label);
  labels_.clear();
  published_->data()->clear();
  xAxis->setRange(0.8, 80);
  yAxis->setRange(1e3, 1e7);
  replot();
}

void LengthPlanChart::setPlan(const studio::LengthPlan& plan) {
  clearPlan();
  plan_ = plan;
  double top = 1e4;
  for (const studio::PlanLine& line : plan.lines) {
    QCPGraph* g = addGraph();
    g->setName(QString::fromStdString(line.option.label()));
    QVector<double> x, y;
    for (const studio::PlanPoint& p : line.points) {
      if (!p.longest) continue;
      x << p.gpus;
      y << double(*p.longest);
      top = std::max(top, double(*p.longest));
    }
    g->setData(x, y, true);
    lines_.push_back(g);
  }
  QVector<double> px, py;
  for (const studio::PublishedPoint& p : studio::published_long_context_points()) {
    px << p.gpus;
    py << double(p.tokens);
    top = std::max(top, double(p.tokens));
    auto* label = new QCPItemText(this);
    label->position->setType(QCPItemPosition::ptPlotCoords);
    label->position->setCoords(p.gpus, double(p.tokens));
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
    label->setPadding(QMargins(6, 0, 0, 2));
    label->setFont(QFont(font().family(), font().pointSize() - 2));
    label->setText(QString::fromStdString(p.who + ": " + p.what));
    labels_.push_back(label);
  }
  published_->setData(px, py, true);
  const int most = plan.gpu_counts.empty() ? 64 : plan.gpu_counts.back();
  xAxis->setRange(0.8, most * 1.25);
  yAxis->setRange(1e3, top * 2);
  applyColors();
  replot();
}

QVector<QPointF> LengthPlanChart::linePoints(int line) const {
  QVector<QPointF> out;
  if (line < 0 || line >= lineCount()) return out;
  for (auto it = lines_[size_t(line)]->data()->constBegin();
       it != lines_[size_t(line)]->data()->constEnd(); ++it)
    out << QPointF(it->key, it->value);
  return out;
}

QString LengthPlanChart::lineName(int line) const {
  return line >= 0 && line < lineCount() ? lines_[size_t(line)]->name() : QString();
}

QVector<QPointF> LengthPlanChart::publishedPoints() const {
  QVector<QPointF> out;
  for (auto it = published_->data()->constBegin(); it != published_->data()->constEnd(); ++it)
    out << QPointF(it->key, it->value);
  return out;
}

std::pair<int, int> LengthPlanChart::pointAt(const QPoint& pixel) const {
  std::pair<int, int> best{-1, -1};
  double nearest = 12.0;
  for (size_t l = 0; l < plan_.lines.size(); ++l) {
    const auto& points = plan_.lines[l].points;
    for (size_t k = 0; k < points.size(); ++k) {
      if (!points[k].longest) continue;
      const double px = xAxis->coordToPixel(points[k].gpus);
      const double py = yAxis->coordToPixel(double(*points[k].longest));
      const double d = std::hypot(px - pixel.x(), py - pixel.y());
      if (d < nearest) {
        nearest = d;
        best = {int(l), int(k)};
      }
    }
  }
  return best;
}

void LengthPlanChart::mousePressEvent(QMouseEvent* event) {
  const auto [line, point] = pointAt(event->pos());
  if (line >= 0) emit pointChosen(line, point);
  PalettePlot::mousePressEvent(event);
}

}  // namespace studio::ui
