#pragma once
// Page 4: the world (nodes x GPUs per node) and sequence parallelism. The SP size selector offers
// only the sizes valid for the mode and the model (a note lists the divisors left out and why);
// the mode selector explains each mode in one line; usp picks its Ulysses x ring split. The
// constraint messages are validate_config's for the SP keys. An optional DeepSpeed JSON gives the
// ZeRO stage the memory estimate uses. Below, the layout drawn live: which part of the sequence
// and which heads each rank holds, the replicas, and what travels between ranks per layer.
#include <vector>

#include "studio/ui/wizard/wizard_page.h"

class QComboBox;
class QLabel;
class QCheckBox;
class QLineEdit;
class QSpinBox;

namespace studio::ui {

class SpLayoutView;

class ParallelismPage : public WizardPage {
  Q_OBJECT

 public:
  explicit ParallelismPage(RunDraft* draft, QWidget* parent = nullptr);

  // The SP sizes offered as valid (a configured size outside them is listed too, marked).
  std::vector<int> offeredSpSizes() const;
  // Selects an SP size as the user would (it must be among the listed ones).
  bool selectSpSize(int size);
  QString excludedNote() const;
  QString modeExplanation() const;

  QSpinBox* nodesBox() const { return nodes_; }
  QSpinBox* gpusBox() const { return gpus_; }
  QSpinBox* zeroStageBox() const { return zeroStage_; }
  QCheckBox* offloadOptimizerBox() const { return offloadOptimizer_; }
  QComboBox* modeBox() const { return mode_; }
  QComboBox* spSizeBox() const { return size_; }
  QComboBox* uspSplitBox() const { return split_; }
  // The layout of the chosen world and SP choice, drawn live (sp_layout_view.h).
  SpLayoutView* layoutView() const { return layout_; }

 private:
  void rebuild();
  void rebuildSplits();
  void sizeChosen();
  void splitChosen();
  void browseDeepSpeed();

  QSpinBox* nodes_;
  QSpinBox* gpus_;
  QComboBox* mode_;
  QLabel* explanation_;
  QComboBox* size_;
  QLabel* excluded_;
  QLabel* splitLabel_;
  QComboBox* split_;
  QLineEdit* deepspeed_;
  QSpinBox* zeroStage_;
  QCheckBox* offloadOptimizer_;
  QCheckBox* offloadParam_;
  SpLayoutView* layout_;
};

}  // namespace studio::ui
