#pragma once
// The length planner drawn (studio::plan_lengths): the longest cutoff_len that fits against the
// number of GPUs (both axes logarithmic), one line per way of running the model (colour: the SP
// mode; dash: the memory savings), and the published points of 360-LLaMA-Factory, ALST and
// others as labelled markers. Clicking near a point of a line emits pointChosen.
#include <QVector>

#include "studio/config/length_plan.h"
#include "studio/ui/wizard/palette_plot.h"

namespace studio::ui {

class LengthPlanChart : public PalettePlot {
  Q_OBJECT

 public:
  explicit LengthPlanChart(QWidget* parent = nullptr);

  void setPlan(const studio::LengthPlan& plan);
  void clearPlan();

  // What is drawn, for tests: per line its (gpus, tokens) points that fit, and the published
  // markers' (gpus, tokens).
  int lineCount() const { return static_cast<int>(lines_.size()); }
  QVector<QPointF> linePoints(int line) const;
  QString lineName(int line) const;
  QVector<QPointF> publishedPoints() const;
  // The line and point nearest to `pixel` within 12 px, as (line, point index); (-1, -1) when
  // none.
  std::pair<int, int> pointAt(const QPoint& pixel) const;

 signals:
  void pointChosen(int line, int point);

 protected:
  void applyColors() override;
  void mousePressEvent(QMouseEvent* event) override;

 private:
  studio::LengthPlan plan_;
  std::vector<QCPGraph*> lines_;
  QCPGraph* published_ = nullptr;
  std::vector<QCPItemText*> labels_;
};

}  // namespace studio::ui
