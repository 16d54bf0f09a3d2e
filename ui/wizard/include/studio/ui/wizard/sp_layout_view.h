#pragma once
// The Parallelism page's picture of the SP choice (studio::sp_picture): the sequence as a bar cut
// into what each SP rank of a group holds (zigzag-ring's paired chunks, Ulysses' slices, usp's
// grid), coloured by SP rank; under Ulysses and usp a second bar of the head groups each rank
// attends over; the world as a grid of GPUs (a row per node) coloured the same way, one group per
// data-parallel replica; and one decoder layer's traffic per rank in words and bytes. Drawn from
// the palette, so it follows light and dark themes.
#include <QWidget>

#include <optional>

#include "studio/config/sp_picture.h"

namespace studio::ui {

class SpLayoutView : public QWidget {
  Q_OBJECT

 public:
  explicit SpLayoutView(QWidget* parent = nullptr);

  void setPicture(const studio::SpPicture& picture, int64_t layers);
  void clearPicture();
  const std::optional<studio::SpPicture>& picture() const { return picture_; }

  // Where things are drawn, for tests that read the pixels: SP rank `s`'s k-th span of the
  // sequence bar, its head group on the heads bar (empty without Ulysses), and global rank g's
  // box in the GPU grid.
  QRect spanRect(int sp_rank, int k) const;
  QRect headsRect(int sp_rank) const;
  QRect gpuRect(int global_rank) const;
  // The colour of SP rank s (its spans, heads and GPUs).
  QColor rankColor(int sp_rank) const;
  // The traffic lines as shown ("K/V block passed to the next of the 4 ring ranks: 16.0 MiB x 3
  // per layer, x 28 layers"), and the problem, if any.
  QStringList trafficLines() const;

  QSize sizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  QRect sequenceBar() const;
  QRect headsBar() const;
  QRect gridArea() const;

  std::optional<studio::SpPicture> picture_;
  int64_t layers_ = 0;
};

}  // namespace studio::ui
