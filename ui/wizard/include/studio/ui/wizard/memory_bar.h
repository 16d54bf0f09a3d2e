#pragma once
// One GPU's estimated memory as a stacked horizontal bar - weights, gradients, optimizer,
// reference, activations, logits, SP buffers, optimizer step - against the GPU's capacity (a
// vertical line), with each part's GiB in the legend.
#include <QStringList>
#include <QVector>

#include "studio/ui/wizard/palette_plot.h"

#include "studio/config/memory_estimate.h"

namespace studio::ui {

class MemoryBar : public PalettePlot {
  Q_OBJECT

 public:
  explicit MemoryBar(QWidget* parent = nullptr);

  void setEstimate(const studio::MemoryEstimate& estimate);
  void clearEstimate();

  // The parts drawn, in order, and their sizes in GiB (bytes / 2^30).
  static QStringList partNames();
  QVector<double> partGiB() const;
  double capacityGiB() const;

 protected:
  void applyColors() override;

 private:

  QVector<QCPBars*> parts_;
  QCPItemStraightLine* capacity_;
  QCPItemText* capacityLabel_;
};

}  // namespace studio::ui
