#include "studio/ui/wizard/palette_plot.h"

namespace studio::ui {

PalettePlot::PalettePlot(QWidget* parent) : QCustomPlot(parent) {
  setInteractions({});
}

void PalettePlot::changeEvent(QEvent* event) {
  QCustomPlot::changeEvent(event);
  if (event->type() != QEvent::PaletteChange) return;
  applyColors();
  replot();
}

void PalettePlot::applyColors() {
  const QPalette& pal = palette();
  const QColor text = pal.color(QPalette::WindowText);
  QColor grid = pal.color(QPalette::Mid);
  grid.setAlpha(110);
  setBackground(pal.brush(QPalette::Base));
  for (QCPAxis* axis : axisRect()->axes()) {
    axis->setBasePen(QPen(text));
    axis->setTickPen(QPen(text));
    axis->setSubTickPen(QPen(text));
    axis->setTickLabelColor(text);
    axis->setLabelColor(text);
    axis->grid()->setPen(QPen(grid, 1, Qt::DotLine));
  }
  legend->setBrush(pal.brush(QPalette::Base));
  legend->setBorderPen(QPen(pal.color(QPalette::Mid)));
  legend->setTextColor(text);
}

}  // namespace studio::ui
