#include "chart_panel.h"

#include <algorithm>
#include <cmath>

#include <QEvent>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QMenu>
#include <QMouseEvent>
#include <QStackedWidget>
#include <QTimer>
#include <QToolTip>
#include <QToolButton>
#include <QVBoxLayout>
#include <qcustomplot.h>

namespace studio::ui {

namespace {

// Step numbers are integers: never put a tick between two steps.
class StepTicker : public QCPAxisTicker {
 protected:
  double getTickStep(const QCPRange& range) override {
    return std::max(1.0, std::ceil(QCPAxisTicker::getTickStep(range)));
  }
};

QString xAxisLabel(XAxisMode mode) {
  switch (mode) {
    case XAxisMode::RelativeTime: return ChartPanel::tr("time since start (h:m:s)");
    case XAxisMode::WallTime: return ChartPanel::tr("wall time");
    case XAxisMode::Step: break;
  }
  return ChartPanel::tr("step");
}

QString valueAxisLabel(ChartKind kind) {
  switch (kind) {
    case ChartKind::Loss: return ChartPanel::tr("loss");
    case ChartKind::TokensPerSec: return ChartPanel::tr("tokens/s");
    case ChartKind::LearningRate: return ChartPanel::tr("learning rate");
    case ChartKind::GradNorm: return ChartPanel::tr("gradient norm");
    case ChartKind::Memory: return ChartPanel::tr("MiB");
    case ChartKind::GpuActivity: return ChartPanel::tr("%");
    case ChartKind::Rewards: return ChartPanel::tr("reward");
    case ChartKind::Accuracy: return ChartPanel::tr("accuracy");
    case ChartKind::Straggler: return ChartPanel::tr("slowest rank / mean");
  }
  return {};
}

QSharedPointer<QCPAxisTicker> makeXTicker(XAxisMode mode) {
  switch (mode) {
    case XAxisMode::RelativeTime: {
      auto ticker = QSharedPointer<QCPAxisTickerTime>::create();
      // Hours keep counting past 24: a long run reads 31:20:00, not a day count.
      ticker->setTimeFormat(QStringLiteral("%h:%m:%s"));
      return ticker;
    }
    case XAxisMode::WallTime: {
      auto ticker = QSharedPointer<QCPAxisTickerDateTime>::create();
      ticker->setDateTimeFormat(QStringLiteral("hh:mm:ss\nyyyy-MM-dd"));
      return ticker;
    }
    case XAxisMode::Step: break;
  }
  return QSharedPointer<StepTicker>::create();
}

}  // namespace

ChartPanel::ChartPanel(ChartKind kind, QWidget* parent)
    : QWidget(parent),
      kind_(kind),
      title_(new QLabel(chartTitle(kind))),
      stack_(new QStackedWidget),
      plot_(new QCustomPlot),
      emptyText_(new QLabel) {
  setObjectName(chartName(kind));
  plot_->setObjectName(chartName(kind) + QStringLiteral("-plot"));
  emptyText_->setObjectName(chartName(kind) + QStringLiteral("-empty"));
  emptyText_->setAlignment(Qt::AlignCenter);
  emptyText_->setWordWrap(true);
  stack_->addWidget(plot_);
  stack_->addWidget(emptyText_);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(2);
  layout->addWidget(buildTitleBar());
  layout->addWidget(stack_, 1);
  setMinimumHeight(240);
  setupPlot();
}

QWidget* ChartPanel::buildTitleBar() {
  auto* bar = new QWidget;
  auto* row = new QHBoxLayout(bar);
  row->setContentsMargins(4, 0, 4, 0);
  QFont bold = title_->font();
  bold.setBold(true);
  title_->setFont(bold);
  // A long title (the memory chart's) wraps rather than widening its column past the others.
  title_->setWordWrap(true);
  title_->setMinimumWidth(120);
  row->addWidget(title_, 1);
  auto addButton = [&](const QString& text, const QString& tip, auto signal) {
    auto* button = new QToolButton;
    button->setText(text);
    button->setToolTip(tip);
    button->setAutoRaise(true);
    connect(button, &QToolButton::clicked, this, signal);
    row->addWidget(button);
  };
  addButton(tr("Enlarge"), tr("Show this chart alone, as large as the dashboard (click again for "
                              "all charts); the context menu moves it among the others"),
            &ChartPanel::enlargeToggled);
  row->itemAt(row->count() - 1)->widget()->setObjectName(chartName(kind_) + QStringLiteral("-enlarge"));
  addButton(tr("PNG…"), tr("Save this chart as a PNG image"), &ChartPanel::exportPngRequested);
  addButton(tr("CSV…"), tr("Export the data of this chart as CSV: x first, one column per series"),
            &ChartPanel::exportCsvRequested);
  return bar;
}

void ChartPanel::setupPlot() {
  plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  // A million points stay interactive: no antialiasing while dragging, and solid lines drawn
  // as segments instead of one huge polyline (graphs also sample adaptively, QCP's default).
  plot_->setNoAntialiasingOnDrag(true);
  plot_->setPlottingHint(QCP::phFastPolylines, true);
  plot_->legend->setVisible(false);
  QFont legendFont = font();
  legendFont.setPointSizeF(std::max(6.0, legendFont.pointSizeF() * 0.85));
  plot_->legend->setFont(legendFont);
  plot_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
  if (kind_ == ChartKind::Memory) {
    // One entry per rank: below the plot in rows of four, not a column over the lines.
    plot_->plotLayout()->addElement(1, 0, plot_->legend);
    plot_->plotLayout()->setRowStretchFactor(1, 0.001);
    plot_->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst, false);
    plot_->legend->setWrap(4);
    plot_->legend->setMargins(QMargins(4, 2, 4, 2));
  }
  plot_->yAxis->setLabel(valueAxisLabel(kind_));
  setXAxisMode(mode_);
  applyPalette();

  connect(plot_, &QCustomPlot::mouseWheel, this, [this] {
    followData_ = false;
    // The zoom follows this signal in QCustomPlot's own handler: the range change it makes is
    // the user's.
    userAxisChange_ = true;
    QTimer::singleShot(0, this, [this] { userAxisChange_ = false; });
  });
  connect(plot_, &QCustomPlot::mousePress, this, [this] { userAxisChange_ = true; });
  connect(plot_, &QCustomPlot::mouseRelease, this, [this] { userAxisChange_ = false; });
  connect(plot_, &QCustomPlot::mouseMove, this, [this](QMouseEvent* event) {
    if (event->buttons() != Qt::NoButton) {
      followData_ = false;
      return;
    }
    // Hover: the exact values under the pointer.
    const QString text = readoutAt(plot_->xAxis->pixelToCoord(event->position().x()));
    if (text.isEmpty())
      QToolTip::hideText();
    else
      QToolTip::showText(event->globalPosition().toPoint(), text, plot_);
  });
  connect(plot_->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
          [this](const QCPRange& r) {
            if (userAxisChange_) emit xRangeChangedByUser(r.lower, r.upper);
          });
  connect(plot_, &QCustomPlot::mouseDoubleClick, this, [this] { fitAndReplot(); });
  plot_->setContextMenuPolicy(Qt::CustomContextMenu);
  connect(plot_, &QWidget::customContextMenuRequested, this, &ChartPanel::showContextMenu);
  // Reachable with Tab: panned, zoomed, fitted, read and its menu opened from the keyboard.
  plot_->setFocusPolicy(Qt::StrongFocus);
  plot_->setAccessibleName(chartTitle(kind_));
  plot_->setAccessibleDescription(keyboardHelp());
  plot_->installEventFilter(this);
}

QString ChartPanel::keyboardHelp() {
  return tr("Left and Right, Up and Down pan; + and - zoom the x axis; 0 or Home fits to the data; "
            "Space reads the values at the middle; the menu key opens the chart's menu");
}

bool ChartPanel::eventFilter(QObject* watched, QEvent* event) {
  if (watched == plot_) {
    if (event->type() == QEvent::KeyPress && handleKey(static_cast<QKeyEvent*>(event))) return true;
    if (event->type() == QEvent::FocusIn || event->type() == QEvent::FocusOut) {
      // Where the keyboard is: the title in the highlight colour while the plot has the focus.
      QPalette p = title_->palette();
      if (event->type() == QEvent::FocusIn)
        p.setColor(QPalette::WindowText, palette().color(QPalette::Highlight));
      else
        p = palette();
      title_->setPalette(p);
    }
  }
  return QWidget::eventFilter(watched, event);
}

bool ChartPanel::handleKey(QKeyEvent* event) {
  if (event->modifiers() & (Qt::ControlModifier | Qt::AltModifier | Qt::MetaModifier)) return false;
  QCPRange x = plot_->xAxis->range();
  QCPRange y = plot_->yAxis->range();
  const double dx = x.size() / 10, dy = y.size() / 10;
  bool xChanged = false;
  switch (event->key()) {
    case Qt::Key_Left: x += -dx; xChanged = true; break;
    case Qt::Key_Right: x += dx; xChanged = true; break;
    case Qt::Key_Up: plot_->yAxis->setRange(y + dy); break;
    case Qt::Key_Down: plot_->yAxis->setRange(y + (-dy)); break;
    case Qt::Key_Plus:
    case Qt::Key_Equal:
      x = QCPRange(x.center() - x.size() * 0.4, x.center() + x.size() * 0.4);
      xChanged = true;
      break;
    case Qt::Key_Minus:
      x = QCPRange(x.center() - x.size() * 0.625, x.center() + x.size() * 0.625);
      xChanged = true;
      break;
    case Qt::Key_0:
    case Qt::Key_Home: fitAndReplot(); return true;
    case Qt::Key_Space: {
      const QString text = readoutAt(x.center());
      const QPoint at = plot_->mapToGlobal(plot_->axisRect()->rect().center());
      QToolTip::showText(at, text.isEmpty() ? tr("no values here") : text, plot_);
      return true;
    }
    default: return false;
  }
  followData_ = false;
  if (xChanged) {
    userAxisChange_ = true;  // as a drag would: the linked charts follow
    plot_->xAxis->setRange(x);
    userAxisChange_ = false;
  }
  plot_->replot();
  return true;
}

void ChartPanel::showContextMenu(const QPoint& pos) {
  QMenu menu(this);
  menu.addAction(tr("Save as &PNG…"), this, &ChartPanel::exportPngRequested);
  menu.addAction(tr("Export data as &CSV…"), this, &ChartPanel::exportCsvRequested);
  menu.addSeparator();
  menu.addAction(tr("&Fit to data"), this, &ChartPanel::fitAndReplot);
  menu.addSeparator();
  menu.addAction(tr("&Enlarge / show all charts"), this, &ChartPanel::enlargeToggled);
  menu.addAction(tr("Move e&arlier"), this, [this] { emit moveRequested(-1); });
  menu.addAction(tr("Move &later"), this, [this] { emit moveRequested(+1); });
  menu.exec(plot_->mapToGlobal(pos));
}

void ChartPanel::setIgnoreOutliers(bool on) {
  ignoreOutliers_ = on;
  followData_ = true;
}

void ChartPanel::setLinkedXRange(double lower, double upper) {
  followData_ = false;
  plot_->xAxis->setRange(lower, upper);
}

QString ChartPanel::readoutAt(double key) const {
  QStringList lines;
  for (int i = 0; i < plot_->graphCount(); ++i) {
    const QCPGraph* g = plot_->graph(i);
    if (!g->visible() || g->data()->isEmpty()) continue;
    auto it = g->data()->findBegin(key, false);  // the first point at or after key
    if (it == g->data()->constEnd()) --it;
    if (it != g->data()->constBegin()) {
      auto before = it - 1;
      if (std::abs(before->key - key) < std::abs(it->key - key)) it = before;
    }
    if (isMarks(g)) {
      if (std::abs(it->key - key) > 0.5 * std::abs(plot_->xAxis->range().size()) / 100) continue;
      lines << QStringLiteral("%1: %2 (%3 %4)")
                   .arg(g->name(), notFiniteMarkText(it->value), xHeader(),
                        QString::number(it->key, 'g', 10));
      continue;
    }
    if (!std::isfinite(it->value)) continue;
    lines << QStringLiteral("%1 = %2 (%3 %4)")
                 .arg(g->name(), QString::number(it->value, 'g', 6), xHeader(),
                      QString::number(it->key, 'g', 10));
  }
  return lines.join(QLatin1Char('\n'));
}

void ChartPanel::fitAndReplot() {
  setFollowsData(true);
  rescale();
  plot_->replot();
}

void ChartPanel::setTitle(const QString& title) {
  title_->setText(title);
  plot_->setAccessibleName(title);
}

void ChartPanel::setEmptyText(const QString& text) {
  emptyText_->setText(text);
  stack_->setCurrentWidget(text.isEmpty() ? static_cast<QWidget*>(plot_) : emptyText_);
}

bool ChartPanel::showsPlot() const { return stack_->currentWidget() == plot_; }

void ChartPanel::setXAxisMode(XAxisMode mode) {
  const bool moved = mode != mode_ && !marks_.empty();
  mode_ = mode;
  if (moved) drawItems();
  plot_->xAxis->setTicker(makeXTicker(mode));
  plot_->xAxis->setLabel(xAxisLabel(mode));
  // Steps read as plain integers (1000000, not 1·10^6); the time tickers make their own labels.
  plot_->xAxis->setNumberFormat(mode == XAxisMode::Step ? QStringLiteral("f") : QStringLiteral("gb"));
  plot_->xAxis->setNumberPrecision(mode == XAxisMode::Step ? 0 : 6);
  followData_ = true;  // the old range means nothing on the new axis
}

QString ChartPanel::xHeader() const {
  switch (mode_) {
    case XAxisMode::RelativeTime: return QStringLiteral("relative_time_s");
    case XAxisMode::WallTime: return QStringLiteral("wall_time_unix_s");
    case XAxisMode::Step: break;
  }
  return QStringLiteral("step");
}

void ChartPanel::setLogScale(bool on) {
  logScale_ = on;
  QCPAxis* y = plot_->yAxis;
  if (on) {
    y->setScaleType(QCPAxis::stLogarithmic);
    y->setTicker(QSharedPointer<QCPAxisTickerLog>::create());
  } else {
    y->setScaleType(QCPAxis::stLinear);
    y->setTicker(QSharedPointer<QCPAxisTicker>::create());
  }
  followData_ = true;
}

void ChartPanel::setFixedValueRange(double lower, double upper) {
  fixedValueRange_ = std::make_pair(lower, upper);
}

void ChartPanel::setLimitLines(const std::vector<double>& values, const QString& unit) {
  if (values == limits_ && unit == limitUnit_) return;
  limits_ = values;
  limitUnit_ = unit;
  drawItems();
}

void ChartPanel::setMarks(const std::vector<ChartMark>& marks) {
  const bool same = marks.size() == marks_.size() &&
                    std::equal(marks.begin(), marks.end(), marks_.begin(),
                               [](const ChartMark& a, const ChartMark& b) {
                                 auto same = [](double x, double y) {
                                   return x == y || (std::isnan(x) && std::isnan(y));
                                 };
                                 return a.kind == b.kind && same(a.step, b.step) &&
                                        same(a.wall, b.wall) && same(a.relative, b.relative) &&
                                        a.label == b.label;
                               });
  if (same) return;
  marks_ = marks;
  drawItems();
}

// The limit lines and the marks, drawn again from limits_ and marks_ (the x axis mode decides
// where a mark goes).
void ChartPanel::drawItems() {
  plot_->clearItems();
  for (double value : limits_) {
    auto* line = new QCPItemStraightLine(plot_);
    line->setObjectName(QStringLiteral("limit"));
    line->point1->setCoords(0, value);
    line->point2->setCoords(1, value);
    auto* label = new QCPItemText(plot_);
    label->position->setTypeX(QCPItemPosition::ptAxisRectRatio);
    label->position->setTypeY(QCPItemPosition::ptPlotCoords);
    label->position->setCoords(0.01, value);
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
    label->setText(tr("device capacity %1 %2").arg(QString::number(value, 'f', 0), limitUnit_));
  }
  for (const ChartMark& mark : marks_) {
    const double x = mode_ == XAxisMode::WallTime       ? mark.wall
                     : mode_ == XAxisMode::RelativeTime ? mark.relative
                                                        : mark.step;
    if (!std::isfinite(x)) continue;
    const QString name = mark.kind == ChartMark::Kind::Checkpoint ? QStringLiteral("mark-checkpoint")
                         : mark.kind == ChartMark::Kind::Eval     ? QStringLiteral("mark-eval")
                                                                   : QStringLiteral("mark");
    auto* line = new QCPItemStraightLine(plot_);
    line->setObjectName(name);
    // Across the axis rect whatever the value axis (a log scale has no 0).
    line->point1->setTypeY(QCPItemPosition::ptAxisRectRatio);
    line->point2->setTypeY(QCPItemPosition::ptAxisRectRatio);
    line->point1->setCoords(x, 0);
    line->point2->setCoords(x, 1);
    if (mark.label.isEmpty()) continue;
    auto* label = new QCPItemText(plot_);
    label->setObjectName(name);
    label->position->setTypeX(QCPItemPosition::ptPlotCoords);
    label->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
    label->position->setCoords(x, 0.02);
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
    label->setRotation(90);
    label->setText(mark.label);
  }
  applyPalette();
}

void ChartPanel::setFollowsData(bool on) { followData_ = on; }

void ChartPanel::rescale() {
  plot_->legend->setVisible(plot_->legend->itemCount() > 0);
  if (!followData_) return;
  bool anyPoint = false;
  for (int i = 0; i < plot_->graphCount() && !anyPoint; ++i)
    anyPoint = !plot_->graph(i)->data()->isEmpty();
  if (!anyPoint) return;
  plot_->rescaleAxes(true);
  marksAxis()->setRange(0.0, 1.0);  // the marks' axis stays as it is
  // QCustomPlot keeps the axis's old span when all values are equal (a constant learning rate
  // drawn at 0 +- 30000); the values' own range lets padValueRange open a window around them.
  bool found = false;
  QCPRange values;
  for (int i = 0; i < plot_->graphCount(); ++i) {
    QCPGraph* g = plot_->graph(i);
    if (!g->visible() || isMarks(g)) continue;
    bool has = false;
    const QCPRange r = g->getValueRange(has, logScale_ ? QCP::sdPositive : QCP::sdBoth);
    if (!has) continue;
    values = found ? QCPRange(std::min(values.lower, r.lower), std::max(values.upper, r.upper)) : r;
    found = true;
  }
  if (found && ignoreOutliers_ && !fixedValueRange_) {
    // The values drawn (enough of them to speak of outliers).
    std::vector<double> all;
    for (int i = 0; i < plot_->graphCount(); ++i) {
      const QCPGraph* g = plot_->graph(i);
      if (!g->visible() || isMarks(g)) continue;
      for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it)
        if (std::isfinite(it->value) && (!logScale_ || it->value > 0)) all.push_back(it->value);
    }
    if (all.size() >= 20) {
      auto at = [&all](double q) {
        auto nth = all.begin() + static_cast<std::ptrdiff_t>(q * double(all.size() - 1));
        std::nth_element(all.begin(), nth, all.end());
        return *nth;
      };
      // Tukey's far fences: 3 interquartile ranges beyond the quartiles (a spike and the decay
      // of its smoothed curve stay out; a steady trend stays in), within the values' range.
      const double q1 = at(0.25), q3 = at(0.75), iqr = q3 - q1;
      const double lo = std::max(values.lower, q1 - 3 * iqr), hi = std::min(values.upper, q3 + 3 * iqr);
      if (hi > lo) values = QCPRange(lo, hi);
    }
  }
  if (found && !logScale_ && values.size() <= std::abs(values.upper) * 1e-9) {
    // All equal: a window of 10% (or 1 around zero) each side; QCustomPlot refuses a zero span.
    const double v = values.upper, margin = v != 0.0 ? std::abs(v) * 0.1 : 1.0;
    values = QCPRange(v - margin, v + margin);
  }
  if (found) plot_->yAxis->setRange(values);
  padKeyRange();
  padValueRange();
}

void ChartPanel::padKeyRange() {
  QCPAxis* x = plot_->xAxis;
  const QCPRange range = x->range();
  // One point (or all at one x): a window of one step or second around it, not a zero range.
  if (range.size() <= 0.0) {
    x->setRange(range.lower - 1.0, range.upper + 1.0);
    return;
  }
  const double margin = range.size() * 0.02;
  x->setRange(range.lower - margin, range.upper + margin);
}

void ChartPanel::padValueRange() {
  QCPAxis* y = plot_->yAxis;
  if (fixedValueRange_) {
    y->setRange(fixedValueRange_->first, fixedValueRange_->second);
    return;
  }
  double lower = y->range().lower;
  double upper = y->range().upper;
  if (logScale_) {
    if (upper <= lower * (1.0 + 1e-9)) {
      lower /= 2.0;
      upper *= 2.0;
    } else {
      const double factor = std::pow(upper / lower, 0.06);
      lower /= factor;
      upper *= factor;
    }
  } else {
    const double size = upper - lower;
    const double magnitude = std::max(std::abs(lower), std::abs(upper));
    const double margin = size > magnitude * 1e-9 ? size * 0.08 : (magnitude > 0 ? magnitude * 0.1 : 1.0);
    lower -= margin;
    upper += margin;
  }
  // Memory reads against zero and the device's capacity: both stay in view.
  if (kind_ == ChartKind::Memory) lower = 0.0;
  for (double limit : limits_) upper = std::max(upper, limit * 1.05);
  y->setRange(lower, upper);
}

QCPAxis* ChartPanel::marksAxis() const {
  QCPAxis* axis = plot_->yAxis2;
  if (axis->range() != QCPRange(0.0, 1.0)) axis->setRange(0.0, 1.0);
  return axis;
}

namespace {
constexpr double kMarkY = 0.035;  // the marks' height on their [0, 1] axis
constexpr double kMarkCode = 1e-4;
}  // namespace

double ChartPanel::notFiniteMarkY(double value) {
  if (std::isinf(value)) return value > 0 ? kMarkY + kMarkCode : kMarkY - kMarkCode;
  return kMarkY;
}

QString ChartPanel::notFiniteMarkText(double y) {
  if (y > kMarkY + kMarkCode / 2) return QStringLiteral("Infinity");
  if (y < kMarkY - kMarkCode / 2) return QStringLiteral("-Infinity");
  return QStringLiteral("NaN");
}

bool ChartPanel::isMarks(const QCPGraph* graph) {
  return graph->valueAxis() == graph->parentPlot()->yAxis2;
}

QColor ChartPanel::seriesColor(int index) {
  // Tableau 10: distinct hues of medium lightness, legible on white and on near-black.
  static const QRgb colors[] = {0x4e79a7, 0xf28e2b, 0xe15759, 0x76b7b2, 0x59a14f,
                                0xedc948, 0xb07aa1, 0xff9da7, 0x9c755f, 0xbab0ac};
  constexpr int count = static_cast<int>(sizeof colors / sizeof colors[0]);
  if (index >= 0 && index < count) return QColor(colors[index]);
  // Beyond them (16 ranks, overlaid runs of many ranks): hues a golden angle apart, so that no
  // two nearby indices look alike.
  const int hue = static_cast<int>(std::fmod(std::abs(index) * 137.508, 360.0));
  return QColor::fromHsv(hue, 170, 205);
}

void ChartPanel::changeEvent(QEvent* event) {
  QWidget::changeEvent(event);
  if (event->type() == QEvent::PaletteChange || event->type() == QEvent::StyleChange) {
    applyPalette();
    plot_->replot();
  }
}

void ChartPanel::applyPlotPalette(QCustomPlot* plot, const QPalette& pal) {
  const QColor background = pal.color(QPalette::Base);
  const QColor text = pal.color(QPalette::Text);
  QColor grid = text;
  grid.setAlpha(45);  // a faint tint of the text colour reads on any background
  plot->setBackground(background);
  for (QCPAxis* axis : plot->axisRect()->axes()) {
    axis->setBasePen(QPen(text, 1));
    axis->setTickPen(QPen(text, 1));
    axis->setSubTickPen(QPen(text, 1));
    axis->setTickLabelColor(text);
    axis->setLabelColor(text);
    axis->grid()->setPen(QPen(grid, 1, Qt::DotLine));
    axis->grid()->setZeroLinePen(Qt::NoPen);
  }
  QColor legendBackground = background;
  legendBackground.setAlpha(220);
  plot->legend->setBrush(legendBackground);
  plot->legend->setBorderPen(QPen(grid));
  plot->legend->setTextColor(text);
}

void ChartPanel::applyPalette() {
  const QColor text = palette().color(QPalette::Text);
  applyPlotPalette(plot_, palette());
  for (int i = 0; i < plot_->itemCount(); ++i) {
    if (auto* line = qobject_cast<QCPItemStraightLine*>(plot_->item(i))) {
      const QString name = line->objectName();
      QColor faint = text;
      faint.setAlpha(110);
      line->setPen(name == QLatin1String("mark-checkpoint") ? QPen(faint, 1, Qt::DashLine)
                   : name == QLatin1String("mark-eval")     ? QPen(faint, 1, Qt::DotLine)
                                                            : QPen(text, 1, Qt::DashDotLine));
    }
    else if (auto* label = qobject_cast<QCPItemText*>(plot_->item(i)))
      label->setColor(text);
  }
}

}  // namespace studio::ui
