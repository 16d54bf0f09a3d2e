#include "studio/ui/wizard/length_histogram.h"

#include <algorithm>
#include <limits>


namespace studio::ui {

LengthHistogram::LengthHistogram(QWidget* parent)
    : PalettePlot(parent),
      kept_(new QCPBars(xAxis, yAxis)),
      truncated_(new QCPBars(xAxis, yAxis)),
      cutoff_(new QCPItemStraightLine(this)),
      cutoffLabel_(new QCPItemText(this)),
      ticker_(new QCPAxisTickerText) {
  setObjectName(QStringLiteral("lengthHistogram"));
  setMinimumHeight(160);
  kept_->setName(tr("kept whole"));
  truncated_->setName(tr("truncated"));
  kept_->setWidth(0.8);
  truncated_->setWidth(0.8);
  xAxis->setTicker(ticker_);
  xAxis->setTickLabelRotation(30);
  xAxis->setLabel(tr("tokens before truncation"));
  yAxis->setLabel(tr("samples"));
  cutoffLabel_->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
  cutoffLabel_->position->setType(QCPItemPosition::ptPlotCoords);
  cutoffLabel_->setPadding(QMargins(4, 2, 4, 2));
  applyColors();
  clearHistogram();
}

void LengthHistogram::applyColors() {
  PalettePlot::applyColors();
  const QColor accent = palette().color(QPalette::Highlight);
  const QColor warning(0xd9, 0x6c, 0x1e);  // orange reads on light and dark backgrounds
  kept_->setPen(QPen(accent.darker(120)));
  kept_->setBrush(accent);
  truncated_->setPen(QPen(warning.darker(120)));
  truncated_->setBrush(warning);
  cutoff_->setPen(QPen(palette().color(QPalette::WindowText), 1.5, Qt::DashLine));
  cutoffLabel_->setColor(palette().color(QPalette::WindowText));
}

void LengthHistogram::clearHistogram() {
  counts_.clear();
  kept_->data()->clear();
  truncated_->data()->clear();
  ticker_->clear();
  cutoff_->setVisible(false);
  cutoffLabel_->setVisible(false);
  replot();
}

void LengthHistogram::setHistogram(const studio::data::LengthHistogram& h) {
  counts_.clear();
  ticker_->clear();
  QVector<double> keys, keptValues, cutValues;
  double cutoffAt = -0.5;  // after the bin that ends at cutoff_len
  for (size_t i = 0; i < h.counts.size(); ++i) {
    const double x = static_cast<double>(i);
    const double n = static_cast<double>(h.counts[i]);
    const bool over = i > 0 && h.upper[i - 1] >= h.cutoff_len;
    counts_ << n;
    keys << x;
    keptValues << (over ? 0.0 : n);
    cutValues << (over ? n : 0.0);
    if (h.upper[i] <= h.cutoff_len) cutoffAt = x + 0.5;  // tiny cutoffs repeat bounds
    ticker_->addTick(x, h.upper[i] == std::numeric_limits<int64_t>::max()
                            ? QStringLiteral(">%1").arg(h.upper[i - 1])
                            : QStringLiteral("≤%1").arg(h.upper[i]));
  }
  kept_->setData(keys, keptValues, true);
  truncated_->setData(keys, cutValues, true);
  const double most = counts_.isEmpty() ? 1.0 : *std::max_element(counts_.begin(), counts_.end());
  xAxis->setRange(-0.6, std::max<double>(0.6, static_cast<double>(h.counts.size()) - 0.4));
  yAxis->setRange(0, std::max(1.0, most * 1.15));
  cutoff_->point1->setCoords(cutoffAt, 0);
  cutoff_->point2->setCoords(cutoffAt, 1);
  cutoff_->setVisible(!counts_.isEmpty());
  cutoffLabel_->position->setCoords(cutoffAt, std::max(1.0, most * 1.12));
  cutoffLabel_->setText(tr("cutoff_len %1").arg(h.cutoff_len));
  cutoffLabel_->setVisible(!counts_.isEmpty());
  replot();
}

QVector<double> LengthHistogram::counts() const {
  return counts_;
}

double LengthHistogram::cutoffX() const {
  return cutoff_->point1->coords().x();
}

QStringList LengthHistogram::binLabels() const {
  return ticker_->ticks().values();
}

}  // namespace studio::ui
