#include "studio/ui/dashboard/rank_time_view.h"

#include <algorithm>
#include <cmath>

#include <QEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QSpinBox>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include "chart_panel.h"

namespace studio::ui {

namespace {

double part(const RankTime& t, int i) {
  switch (i) {
    case 0: return t.compute_s;
    case 1: return t.sp_comm_s;
    case 2: return t.grad_comm_s;
    case 3: return t.data_s;
    default: return t.wait_s;
  }
}

QString seconds(double s) {
  if (!std::isfinite(s)) return QStringLiteral("-");
  if (s < 1e-3) return QStringLiteral("%1 µs").arg(s * 1e6, 0, 'f', 0);
  if (s < 1) return QStringLiteral("%1 ms").arg(s * 1e3, 0, 'f', 1);
  return QStringLiteral("%1 s").arg(s, 0, 'f', 2);
}

}  // namespace

QString RankTimeView::partName(int part) {
  switch (part) {
    case 0: return tr("compute");
    case 1: return tr("SP communication");
    case 2: return tr("gradient reduce and gather");
    case 3: return tr("data");
    default: return tr("waiting for other ranks");
  }
}

RankTimeView::RankTimeView(QWidget* parent) : QWidget(parent) {
  setObjectName(QStringLiteral("rankTimeView"));
  auto* title = new QLabel(tr("<b>Where each rank's time goes</b> (seconds per step)"));
  stepBox_ = new QSpinBox;
  stepBox_->setObjectName(QStringLiteral("rankTimeStep"));
  stepBox_->setAccessibleName(tr("Step whose time per rank is drawn"));
  stepBox_->setKeyboardTracking(false);
  auto* stepLabel = new QLabel(tr("Ste&p:"));
  stepLabel->setBuddy(stepBox_);
  connect(stepBox_, &QSpinBox::valueChanged, this, [this](int v) {
    if (!updating_) selectStep(v);
  });
  summary_ = new QLabel;
  summary_->setObjectName(QStringLiteral("rankTimeSummary"));
  summary_->setWordWrap(true);
  // A long sentence wraps in the width the charts leave; it never widens the dashboard.
  summary_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  summary_->setTextFormat(Qt::PlainText);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  plot_ = new QCustomPlot;
  plot_->setObjectName(QStringLiteral("rankTimePlot"));
  plot_->setAccessibleName(tr("Time per rank at the chosen step"));
  plot_->setMinimumHeight(180);
  plot_->setMinimumWidth(0);
  plot_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Expanding);
  plot_->xAxis->setLabel(tr("rank"));
  plot_->yAxis->setLabel(tr("seconds per step"));
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  plot_->xAxis->setTicker(ticker);
  // The legend beside the plot, where it never hides a rank's bar.
  plot_->legend->setVisible(true);
  plot_->axisRect()->insetLayout()->take(plot_->legend);
  plot_->plotLayout()->addElement(0, 1, plot_->legend);
  plot_->plotLayout()->setColumnStretchFactor(1, 0.001);
  for (int i = 0; i < kParts; ++i) {
    auto* bars = new QCPBars(plot_->xAxis, plot_->yAxis);
    bars->setName(partName(i));
    bars->setWidthType(QCPBars::wtPlotCoords);
    bars->setWidth(0.7);
    bars->setStackingGap(0);
    if (i > 0) bars->moveAbove(bars_[static_cast<std::size_t>(i - 1)]);
    bars_[static_cast<std::size_t>(i)] = bars;
  }

  auto* top = new QHBoxLayout;
  top->addWidget(title);
  top->addStretch(1);
  top->addWidget(stepLabel);
  top->addWidget(stepBox_);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(top);
  layout->addWidget(summary_);
  layout->addWidget(plot_, 1);
  applyPalette();
  draw();
}

void RankTimeView::setSeries(const RunSeries* series) {
  series_ = series;
  follow_ = true;
  draw();
}

void RankTimeView::refresh() { draw(); }

void RankTimeView::selectStep(double step) {
  follow_ = false;
  shown_ = step;
  draw();
}

QString RankTimeView::summary() const { return summary_->text(); }

std::vector<std::pair<double, double>> RankTimeView::barValues(int part) const {
  std::vector<std::pair<double, double>> out;
  const QCPBars* b = bars_[static_cast<std::size_t>(part)];
  for (auto it = b->data()->constBegin(); it != b->data()->constEnd(); ++it)
    out.emplace_back(it->key, it->value);
  return out;
}

void RankTimeView::draw() {
  const std::vector<RankTimeRow> none;
  const auto& rows = series_ ? series_->rankTimes() : none;
  const RankTimeRow* row = nullptr;
  if (!rows.empty()) {
    if (follow_ || shown_ < rows.front().step) row = follow_ ? &rows.back() : &rows.front();
    else row = series_->rankTimesAt(shown_);
  }
  updating_ = true;
  stepBox_->setEnabled(row != nullptr);
  if (!rows.empty()) {
    stepBox_->setRange(static_cast<int>(rows.front().step), static_cast<int>(rows.back().step));
    stepBox_->setValue(static_cast<int>(row->step));
  }
  updating_ = false;

  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  for (int i = 0; i < kParts; ++i) bars_[static_cast<std::size_t>(i)]->data()->clear();
  double highest = 0;
  if (row) {
    const int n = static_cast<int>(row->ranks.size());
    const int every = std::max(1, n / 32);  // at most ~32 rank labels
    for (const RankTime& t : row->ranks) {
      double stacked = 0;
      for (int i = 0; i < kParts; ++i) {
        const double v = std::isfinite(part(t, i)) ? part(t, i) : 0.0;
        bars_[static_cast<std::size_t>(i)]->addData(t.rank, v);
        stacked += v;
      }
      highest = std::max(highest, stacked);
      if (t.rank % every == 0) ticker->addTick(t.rank, QString::number(t.rank));
    }
    plot_->xAxis->setRange(-0.6, std::max(0, n - 1) + 0.6);
  } else {
    plot_->xAxis->setRange(-0.6, 0.6);
  }
  plot_->xAxis->setTicker(ticker);
  plot_->yAxis->setRange(0, highest > 0 ? highest * 1.08 : 1.0);

  QString text;
  if (!row) {
    text = tr("No step reported where its time went yet (studio-train writes it with each "
              "step event that carries memory, every logging_steps).");
  } else {
    const Straggler s = stragglerOf(row->ranks);
    const std::size_t at = static_cast<std::size_t>(row - rows.data());
    const double from = at > 0 ? rows[at - 1].step + 1 : row->step;
    text = from < row->step ? tr("Step %1 (mean of steps %2-%1)").arg(row->step).arg(from)
                            : tr("Step %1").arg(row->step);
    if (s.rank >= 0) {
      const RankTime& slow = row->ranks[static_cast<std::size_t>(
          std::find_if(row->ranks.begin(), row->ranks.end(),
                       [&](const RankTime& t) { return t.rank == s.rank; }) -
          row->ranks.begin())];
      const auto most_wait = std::max_element(
          row->ranks.begin(), row->ranks.end(),
          [](const RankTime& a, const RankTime& b) { return a.wait_s < b.wait_s; });
      text += tr(": slowest rank %1 (compute %2, data %3: %4x the ranks' mean)")
                  .arg(s.rank)
                  .arg(seconds(slow.compute_s), seconds(slow.data_s))
                  .arg(s.ratio, 0, 'f', 2);
      if (most_wait != row->ranks.end() && most_wait->wait_s > 0)
        text += tr("; rank %1 waited longest, %2").arg(most_wait->rank).arg(seconds(most_wait->wait_s));
    } else if (!row->ranks.empty()) {
      const RankTime& t = row->ranks.front();
      text += tr(": compute %1, data %2, step %3")
                  .arg(seconds(t.compute_s), seconds(t.data_s), seconds(t.total_s()));
    }
    text += QStringLiteral(".");
  }
  summary_->setText(text);
  plot_->replot();  // now: the bars and the sentence above them always show the same step
  const double step = row ? row->step : -1;
  if (step != shown_) {
    shown_ = step;
    emit stepShown(step);
  }
}

void RankTimeView::changeEvent(QEvent* event) {
  QWidget::changeEvent(event);
  if (event->type() == QEvent::PaletteChange || event->type() == QEvent::StyleChange) applyPalette();
}

void RankTimeView::applyPalette() {
  ChartPanel::applyPlotPalette(plot_, palette());
  for (int i = 0; i < kParts; ++i) {
    const QColor c = ChartPanel::seriesColor(i);
    bars_[static_cast<std::size_t>(i)]->setBrush(c);
    bars_[static_cast<std::size_t>(i)]->setPen(QPen(c.darker(130), 1));
  }
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace studio::ui
