#pragma once
// Sample lengths before truncation (data::LengthHistogram: eighths of cutoff_len, then (1x, 2x],
// (2x, 4x], above) as bars, the bins past cutoff_len in a warning colour, and cutoff_len as a
// vertical line between the bins it separates.
#include <QVector>

#include "studio/ui/wizard/palette_plot.h"

#include "studio/data/dataset.h"

namespace studio::ui {

class LengthHistogram : public PalettePlot {
  Q_OBJECT

 public:
  explicit LengthHistogram(QWidget* parent = nullptr);

  void setHistogram(const studio::data::LengthHistogram& histogram);
  void clearHistogram();

  // What is drawn: counts per bin, and the cutoff line's x (bins are at 0, 1, 2, ...).
  QVector<double> counts() const;
  double cutoffX() const;
  // Bin labels on the x axis, e.g. "≤12", ">384".
  QStringList binLabels() const;

 protected:
  void applyColors() override;

 private:

  QCPBars* kept_;
  QCPBars* truncated_;
  QCPItemStraightLine* cutoff_;
  QCPItemText* cutoffLabel_;
  QSharedPointer<QCPAxisTickerText> ticker_;
  QVector<double> counts_;
};

}  // namespace studio::ui
