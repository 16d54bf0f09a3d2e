#include "studio/ui/wizard/memory_bar.h"

#include <algorithm>


namespace studio::ui {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Distinct on light and dark backgrounds (Tableau 10).
const QColor kColors[] = {QColor(0x4e79a7), QColor(0xf28e2b), QColor(0xe15759), QColor(0x76b7b2),
                          QColor(0x59a14f), QColor(0xedc948), QColor(0xb07aa1), QColor(0xff9da7),
                          QColor(0x9c755f)};
constexpr int kColorCount = static_cast<int>(sizeof kColors / sizeof kColors[0]);

}  // namespace

QStringList MemoryBar::partNames() {
  QStringList names;
  for (const studio::MemoryPart& part : studio::memory_parts({}))
    names << QString::fromUtf8(part.label);
  return names;
}

MemoryBar::MemoryBar(QWidget* parent)
    : PalettePlot(parent), capacity_(new QCPItemStraightLine(this)),
      capacityLabel_(new QCPItemText(this)) {
  setObjectName(QStringLiteral("memoryBar"));
  setMinimumHeight(180);
  const QStringList names = partNames();
  QCPBars* below = nullptr;
  for (int i = 0; i < names.size(); ++i) {
    auto* bars = new QCPBars(yAxis, xAxis);  // horizontal: keys on the y axis
    bars->setWidth(0.6);
    bars->setStackingGap(0);
    if (below) bars->moveAbove(below);
    below = bars;
    parts_ << bars;
  }
  yAxis->setTicks(false);
  yAxis->setRange(-0.6, 0.6);
  xAxis->setLabel(tr("GiB per GPU"));
  // The legend goes under the bar, in rows of four, so the bar keeps the plot's full width.
  legend->setVisible(true);
  axisRect()->insetLayout()->take(legend);
  plotLayout()->addElement(1, 0, legend);
  plotLayout()->setRowStretchFactor(1, 0.001);
  legend->setWrap(4);
  legend->setFillOrder(QCPLegend::foColumnsFirst, true);
  capacityLabel_->setPositionAlignment(Qt::AlignRight | Qt::AlignTop);
  capacityLabel_->position->setTypeX(QCPItemPosition::ptPlotCoords);
  capacityLabel_->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
  capacityLabel_->setPadding(QMargins(4, 2, 4, 2));
  applyColors();
  clearEstimate();
}

void MemoryBar::applyColors() {
  PalettePlot::applyColors();
  for (int i = 0; i < parts_.size(); ++i) {
    parts_[i]->setBrush(kColors[i % kColorCount]);
    parts_[i]->setPen(QPen(kColors[i % kColorCount].darker(130)));
  }
  capacity_->setPen(QPen(palette().color(QPalette::WindowText), 2, Qt::DashLine));
  capacityLabel_->setColor(palette().color(QPalette::WindowText));
}

void MemoryBar::clearEstimate() {
  const QStringList names = partNames();
  for (int i = 0; i < parts_.size(); ++i) {
    parts_[i]->data()->clear();
    parts_[i]->setName(names[i]);
  }
  capacity_->setVisible(false);
  capacityLabel_->setVisible(false);
  replot();
}

void MemoryBar::setEstimate(const studio::MemoryEstimate& estimate) {
  const std::vector<studio::MemoryPart> parts = studio::memory_parts(estimate.bytes);
  for (int i = 0; i < parts_.size(); ++i) {
    const studio::MemoryPart& part = parts[static_cast<size_t>(i)];
    parts_[i]->setData({0.0}, {part.bytes / kGiB}, true);
    parts_[i]->setName(QStringLiteral("%1 %2").arg(QString::fromUtf8(part.label),
                                                   QString::fromStdString(studio::format_gib(part.bytes))));
  }
  const double total = estimate.bytes.total() / kGiB;
  const double capacity = estimate.capacity_bytes / kGiB;
  xAxis->setRange(0, std::max({total, capacity, 1.0}) * 1.08);
  capacity_->setVisible(capacity > 0);
  capacityLabel_->setVisible(capacity > 0);
  capacity_->point1->setCoords(capacity, 0);
  capacity_->point2->setCoords(capacity, 1);
  capacityLabel_->position->setCoords(capacity, 0.0);
  capacityLabel_->setText(tr("GPU %1 GiB").arg(capacity, 0, 'f', 0));
  replot();
}

QVector<double> MemoryBar::partGiB() const {
  QVector<double> out;
  for (const QCPBars* bars : parts_)
    out << (bars->data()->isEmpty() ? 0.0 : bars->data()->constBegin()->value);
  return out;
}

double MemoryBar::capacityGiB() const {
  return capacity_->visible() ? capacity_->point1->coords().x() : 0.0;
}

}  // namespace studio::ui
