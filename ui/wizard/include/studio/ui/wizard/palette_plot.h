#pragma once
// QCustomPlot draws black on white whatever the theme; the wizard's plots take background, axes,
// ticks, labels, grid and legend from the widget palette instead, and again when it changes, so
// they follow light and dark themes.
#include <qcustomplot.h>

namespace studio::ui {

class PalettePlot : public QCustomPlot {
  Q_OBJECT

 protected:
  explicit PalettePlot(QWidget* parent = nullptr);

  void changeEvent(QEvent* event) override;
  // Colours the plot from the palette; subclasses colour their own plottables and items after
  // calling this. Constructors of subclasses call it once their parts exist.
  virtual void applyColors();
};

}  // namespace studio::ui
