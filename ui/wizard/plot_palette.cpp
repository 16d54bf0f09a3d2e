#include "plot_palette.h"

#include <qcustomplot.h>

namespace studio::ui {

void applyPalette(QCustomPlot* plot) {
  const QPalette& pal = plot->palette();
  const QColor text = pal.color(QPalette::WindowText);
  QColor grid = pal.color(QPalette::Mid);
  grid.setAlpha(110);
  plot->setBackground(pal.brush(QPalette::Base));
  for (QCPAxis* axis : plot->axisRect()->axes()) {
    axis->setBasePen(QPen(text));
    axis->setTickPen(QPen(text));
    axis->setSubTickPen(QPen(text));
    axis->setTickLabelColor(text);
    axis->setLabelColor(text);
    axis->grid()->setPen(QPen(grid, 1, Qt::DotLine));
  }
  plot->legend->setBrush(pal.brush(QPalette::Base));
  plot->legend->setBorderPen(QPen(pal.color(QPalette::Mid)));
  plot->legend->setTextColor(text);
}

}  // namespace studio::ui
