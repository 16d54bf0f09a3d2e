#pragma once
// QCustomPlot draws with fixed black-on-white defaults; the wizard's plots take their colours from
// the widget palette instead so they follow light and dark themes. Private to studio_wizard.
class QCustomPlot;

namespace studio::ui {

// Background, axes, ticks, labels, grid and legend from `plot`'s palette; call it again on
// QEvent::PaletteChange.
void applyPalette(QCustomPlot* plot);

}  // namespace studio::ui
